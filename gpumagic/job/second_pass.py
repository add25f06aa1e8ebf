"""The second pass of a job: the few ranks a view features (or a user names) read again, whole, from
their own files, and stacked into one Trace on the job's clock. Nothing of the other ranks is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import JobRankError
from ..trace import Trace
from .paths import local_file
from .reports import read_one, stack

if TYPE_CHECKING:  # named through the package: Job's own module imports this one (lazily)
    from . import Job

__all__ = ["read_ranks"]


def read_ranks(job: Job, ranks: list[int]) -> Trace:
    """``ranks`` of ``job`` (a :class:`~.model.Job`) as one Trace: each file read whole, moved by
    the shift the job's clock alignment gave its rank, stacked with the job's rank numbers."""
    shifts = (job.meta.get("clock_alignment") or {}).get("shifts_ns") or {}
    shifts = {int(p): int(s) for p, s in shifts.items()}
    rows = job.data.ranks.set_index("rank")
    reports = []
    for rank in ranks:
        path = job.path_of(rank)
        try:
            with local_file(path) as local:
                report = read_one(local)
        except OSError as exc:
            raise JobRankError(
                detail=f"rank {rank}'s report {path} cannot be read again ({exc}): the job's "
                "summaries are here, its rows only in the files"
            ) from exc
        pids = [int(p) for p in str(rows.loc[rank, "pids"]).split(",") if p]
        move = next((shifts[p] for p in pids if p in shifts), 0)
        if move:
            report.tables = {
                name: df.assign(start=df["start"] + move, end=df["end"] + move)
                if not df.empty
                else df
                for name, df in report.tables.items()
            }
        report.path = path
        reports.append(report)
    trace = stack(reports, ranks)
    trace.meta.update(
        rank_rule=job.meta.get("rank_rule"),
        clock_alignment=job.meta.get("clock_alignment"),
        job_ranks=len(job.data.ranks),
    )
    return trace
