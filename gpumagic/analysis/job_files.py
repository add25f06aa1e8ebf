"""What a Trace read from several per-rank reports says about its reading: reports that may not be
one job, the files left out (unreadable, or of the other kind), which rule named the ranks, and how
the clocks of different hosts were aligned (``job/reports.py`` fills ``meta``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..trace import Trace
from .finding import Finding, t

__all__ = ["job_files", "job_files_of"]

#: File names listed in a sentence before "and N more".
_NAMES = 4


def job_files(trace: Trace) -> list[Finding]:
    """Reports that cannot be one job (first: every figure comparing ranks depends on it), a file
    that could not be read (named, the rest shown), files of the other kind left out (and how to
    read them), then how ranks and clocks were read; nothing for a Trace of one file."""
    return job_files_of(trace.meta)


def job_files_of(meta: Mapping[str, Any]) -> list[Finding]:
    """:func:`job_files` from a job's ``meta`` alone (``source``, ``job_mismatch``, ``unreadable``,
    ``skipped``, ``rank_rule``, ``clock_alignment``): a Trace's, or a job's read rank by rank."""
    sources = meta.get("source")
    if not isinstance(sources, list):
        return []
    out = []
    reasons = meta.get("job_mismatch") or []
    if reasons:
        out.append(
            Finding(
                "job_mismatch",
                "warn",
                f"These {len(sources)} reports may not be one job: {'; '.join(reasons)}. Each "
                f"rank's own figures "
                "stand, but the skew, the straggler and the NCCL waits compare ranks that "
                "may never have waited for "
                "one another: load each job's reports on their own.",
                {"reasons": list(reasons)},
            )
        )
    unreadable = meta.get("unreadable") or []
    if unreadable:
        names = "; ".join(f"{os.path.basename(u['path'])} ({u['reason']})" for u in unreadable)
        total = len(sources) + len(unreadable)
        out.append(
            Finding(
                "unreadable_reports",
                "warn",
                f"{len(unreadable)} of {total} reports could not be read and are left out: "
                f"{names}. The figures are "
                "those of the other ranks.",
                {"paths": [u["path"] for u in unreadable]},
            )
        )
    skipped = meta.get("skipped") or []
    if skipped:
        out.append(_skipped(skipped, sources))
    out.append(_reading(meta, sources))
    return out


def _names(paths: Sequence[str]) -> str:
    names = [os.path.basename(p) for p in paths]
    more = f" and {len(names) - _NAMES} more" if len(names) > _NAMES else ""
    return ", ".join(names[:_NAMES]) + more


def _skipped(skipped: list[dict[str, Any]], sources: list[str]) -> Finding:
    """Files of the other kind left out: which, why, and the call that reads them; where they are
    the same ranks recorded the other way (a folder of both per rank), that it is so."""
    paths = [s["path"] for s in skipped]
    what, reader = skipped[0].get("what", "report"), skipped[0].get("reader", "the other reader")
    read = "nsys exports" if skipped[0].get("kind") == "chrome" else "Chrome traces"
    folders = {os.path.dirname(p) for p in paths}
    where = f"{reader}({next(iter(folders))!r})" if len(folders) == 1 else f"{reader}([...])"
    n = len(paths)
    text = (
        f"Left out {n} {what}{'s' if n != 1 else ''} ({_names(paths)}): this reader reads "
        f"{read} only."
    )
    if _stems(paths) == _stems(sources):
        text += (
            f" The folder holds both kinds for every rank, two recordings of the same "
            f"{len(sources)} ranks (not "
            f"{len(sources) + n} ranks): {where} reads the others as the same job"
        )
        text += (
            ", with its torch ops."
            if skipped[0].get("kind") == "chrome"
            else ", with its CUDA API calls."
        )
    else:
        text += f" {where} reads them."
    return Finding("skipped_reports", "info", text, {"paths": paths, "reader": reader})


def _stems(paths: Sequence[str]) -> set[str]:
    """File names without their report extensions: rank0.sqlite and rank0.json.gz are both
    "rank0"."""
    out = set()
    for p in paths:
        name = os.path.basename(p)
        for suffix in (".gz", ".json", ".pt.trace", ".sqlite", ".nsys-rep", ".qdrep"):
            name = name.removesuffix(suffix)
        out.add(name)
    return out


def _reading(meta: Mapping[str, Any], sources: list[str]) -> Finding:
    clock = meta.get("clock_alignment") or {}
    method = clock.get("method", "")
    if "collective" in clock:  # aligned: the collective it was aligned on is named
        shifts = clock.get("shifts_ns") or {}
        spread = max(shifts.values()) - min(shifts.values()) if shifts else 0
        how = (
            f"clocks aligned on {method} ({clock.get('collective')}): shifts up to "
            f"{t(abs(spread))}, residual skew "
            f"{t(clock.get('residual_ns', 0))} over {clock.get('collectives', 0) - 1} later "
            f"collective(s)"
        )
    elif method.startswith("none:"):
        how = f"clocks as recorded, not aligned ({method.removeprefix('none: ')})"
    elif method:
        how = f"clocks: {method}"
    else:
        how = ""
    rule = meta.get("rank_rule")
    text = (
        f"{len(sources)} reports read as one job: ranks from {rule}"
        + (f"; {how}" if how else "")
        + "."
    )
    return Finding("job_files", "info", text, {"rank_rule": rule, "clock_alignment": clock})
