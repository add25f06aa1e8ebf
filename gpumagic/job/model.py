"""A job read rank by rank: its per-rank figures, its kernels over every rank, its findings, and the
detailed rows of any rank read again on demand.

A :class:`Job` holds the folded summaries only (``fold.py``): a few KB a rank. What the rows alone
can tell (a rank's timeline, its kernel rows) is read again from that rank's own file when asked:
:meth:`Job.rank` for one rank, :meth:`Job.trace` and :meth:`Job.report` for the featured ranks (the
straggler, the fastest) and any others named. :meth:`Job.save` writes the summaries as Parquet,
and ``gpumagic.load_job(path)`` reopens them in a second, without the raw files.

Which figures are exact: every per-rank figure (range, busy, NCCL, overlap, work, kernel counts,
the skews, the NCCL waits, the host's waits), and per name the counts, totals, averages, minima and
maxima; the standard deviations to float rounding. Approximate: the medians (``Med``, read from a
quantile sketch, within 0.5%: ``sketch.ALPHA``) and the heatmap's binned busy time where clock
alignment moved a rank by part of a bin.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..analysis.finding import Finding
from ..errors import JobRankError
from ..trace import Trace
from .fold import JobData

if TYPE_CHECKING:
    from ..render.report import ProfileReport

__all__ = ["Job", "JobRankError"]


class Job:
    """A job's summaries (see the module's docstring). ``str(job)`` is the text report, and in a
    notebook the job shows as HTML."""

    def __init__(self, data: JobData) -> None:
        self.data = data
        self._findings: list[Finding] | None = None
        self._traces: dict[tuple[int, ...], Trace] = {}

    # --- tables
    @property
    def meta(self) -> dict[str, Any]:
        return self.data.meta

    @property
    def ranks(self) -> list[int]:
        return [int(r) for r in self.data.ranks["rank"]]

    def rank_figures(self) -> pd.DataFrame:
        """One row per rank and GPU, with ``analysis.ranks.rank_figures``' columns (exact)."""
        return self.data.figures.copy()

    def to_dataframe(self) -> pd.DataFrame:
        """The per-rank table: the figures, each rank's file and host, its NCCL wait, the host's
        waits for the GPU, kernel launches and those without a kernel."""
        facts = self.data.ranks.drop(columns=["label"])
        return self.data.figures.merge(facts, on="rank", how="left")

    def table(
        self, page: int = 0, size: int = 50, by: str = "rank", ascending: bool = True
    ) -> pd.DataFrame:
        """Page ``page`` (``size`` rows) of :meth:`to_dataframe`, sorted by ``by``."""
        from .view import table

        return table(self, page, size, by, ascending)

    def waits(self) -> dict[str, int]:
        """Rank label -> the ns its NCCL kernels waited for the other ranks (exact)."""
        r = self.data.ranks
        return dict(zip(r["label"], r["nccl_wait_ns"].astype(int)))

    def _summary(self, table: str) -> pd.DataFrame:
        """A copy of the job's folded summary of ``table`` (``Med`` approximate, within 0.5%): the
        caller may change what it gets without changing the job. The Trace's ``*_summary``
        methods, answered over every rank."""
        return self.data.summaries[table].copy()

    def kernel_summary(self) -> pd.DataFrame:
        """cuda_gpu_kern_sum over every rank: one row per kernel name."""
        return self._summary("kernels")

    def api_summary(self) -> pd.DataFrame:
        """cuda_api_sum over every rank: one row per CUDA runtime/driver API function."""
        return self._summary("api")

    def osrt_summary(self) -> pd.DataFrame:
        """osrt_sum over every rank: one row per OS runtime function (nsys captures only)."""
        return self._summary("osrt")

    def nvtx_summary(self) -> pd.DataFrame:
        """nvtx_sum over every rank: one row per range text and style."""
        return self._summary("nvtx")

    def memop_summary(self) -> pd.DataFrame:
        """cuda_gpu_mem_time_sum over every rank: one row per memory operation kind."""
        return self._summary("memops")

    def memop_size_summary(self) -> pd.DataFrame:
        """cuda_gpu_mem_size_sum over every rank: bytes moved per memory operation kind, in MB."""
        return self._summary("memop_size")

    def kernels_by_rank(self) -> pd.DataFrame:
        """Per rank and kernel name: Instances, Total, Min and Max (ns), exact."""
        return self.data.rank_kernels.copy()

    def kernel_spread(self) -> pd.DataFrame:
        """Per kernel name, its total over the job and how it spreads across the ranks: the ranks
        that ran it, and the least, median and most of the per-rank totals (exact), by total."""
        rk = self.data.rank_kernels
        if rk.empty:
            return pd.DataFrame(
                columns=["Name", "Total Time (ns)", "Instances", "Ranks", "Min rank (ns)"]
            )
        g = rk.groupby("Name", observed=True, sort=False)["Total Time (ns)"]
        out = pd.DataFrame(
            {
                "Total Time (ns)": g.sum(),
                "Instances": rk.groupby("Name", observed=True, sort=False)["Instances"].sum(),
                "Ranks": g.size(),
                "Min rank (ns)": g.min(),
                "Median rank (ns)": g.median(),
                "Max rank (ns)": g.max(),
            }
        )
        out["Max/Min"] = out["Max rank (ns)"] / out["Min rank (ns)"].clip(lower=1)
        out = out.reset_index().sort_values(["Total Time (ns)", "Name"], ascending=[False, True])
        out["Name"] = out["Name"].astype(str)
        return out.reset_index(drop=True)

    # --- findings and the ranks worth a look
    def findings(self) -> list[Finding]:
        """The job's findings, from its summaries (``findings.py``)."""
        if self._findings is None:
            from .findings import job_findings

            self._findings = job_findings(self)
        return list(self._findings)

    def featured(self) -> dict[str, str]:
        """Role -> label of the ranks a view shows first: the straggler (else the slowest) and
        the fastest (``render.ranks_view.featured_of``)."""
        from ..render.ranks_view import featured_of

        return featured_of(self.data.figures, self.findings())

    # --- the second pass: a rank's rows, read again on demand
    def path_of(self, rank: int) -> str:
        hit = self.data.ranks.loc[self.data.ranks["rank"] == int(rank), "path"]
        if hit.empty:
            raise JobRankError(detail=f"rank {rank} is not in this job (ranks {self._span()})")
        return str(hit.iloc[0])

    def _span(self) -> str:
        r = self.ranks
        return f"{min(r)}..{max(r)}" if r else "none"

    def rank(self, rank: int) -> Trace:
        """Rank ``rank``'s whole Trace, read again from its file (on the job's clock)."""
        return self.trace([rank])

    def trace(self, ranks: list[int] | None = None) -> Trace:
        """One Trace of ``ranks`` (default: the featured ranks), read again from their files and
        stacked as ``load_nsys`` stacks a job, on the job's clock."""
        from .second_pass import read_ranks

        chosen = tuple(sorted(set(ranks if ranks is not None else self._featured_ranks())))
        if chosen not in self._traces:
            self._traces[chosen] = read_ranks(self, list(chosen))
        return self._traces[chosen]

    def _featured_ranks(self) -> list[int]:
        return [int(label.split()[-1]) for label in self.featured().values()]

    def report(self, ranks: list[int] | None = None, **options: Any) -> ProfileReport:
        """The full report (timeline, kernel rows) of ``ranks`` (default: the featured ranks)."""
        from ..render.report import ProfileReport

        return ProfileReport(self.trace(ranks), **options)

    # --- persistence and display
    def save(self, path: str | os.PathLike[str]) -> str:
        """Write the job's summaries to the folder ``path`` (Parquet files and a JSON of its meta);
        ``gpumagic.load_job(path)`` reopens it."""
        from .store import save

        return save(self.data, os.fspath(path))

    def busy_matrix(self) -> tuple[np.ndarray, list[int], int, int]:
        """(busy share per rank and time bin, the ranks in row order, bin width in ns, first bin's
        start in ns)."""
        b = self.data.busy
        if b.empty:
            return np.zeros((0, 0), np.float32), [], 1, 0
        shift, first = int(b.attrs["shift"]), int(b.attrs["first"])
        return b.to_numpy(np.float32), [int(r) for r in b.index], 1 << shift, first << shift

    def __str__(self) -> str:
        from .view import text_report

        return text_report(self)

    def __repr__(self) -> str:
        m = self.meta
        return (
            f"<Job: {len(self.data.ranks)} ranks, {len(self.data.figures)} GPUs, "
            f"{m.get('device', '?')}; {m.get('rank_rule', '')}>"
        )

    def _repr_html_(self) -> str:
        from .view import html_report

        return html_report(self)

    def html(self, mode: str = "iframe") -> str:
        """The job's page: ``mode`` "iframe" (standalone) or "page" (BokehJS in a page's head)."""
        from .view import html_report

        return html_report(self, mode)
