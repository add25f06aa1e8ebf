"""What a Trace read from several per-rank reports says about its reading: the files left out, which rule named the
ranks, and how the clocks of different hosts were aligned (``capture/reports.py`` fills ``meta``)."""

from __future__ import annotations

import os

from ..trace import Trace
from .finding import Finding, t

__all__ = ["job_files"]


def job_files(trace: Trace) -> list[Finding]:
    """A file that could not be read (named, the rest shown), then how ranks and clocks were read; nothing for a
    Trace of one file."""
    sources = trace.meta.get("source")
    if not isinstance(sources, list):
        return []
    out = []
    unreadable = trace.meta.get("unreadable") or []
    if unreadable:
        names = "; ".join(f"{os.path.basename(u['path'])} ({u['reason']})" for u in unreadable)
        total = len(sources) + len(unreadable)
        out.append(
            Finding(
                "unreadable_reports",
                "warn",
                f"{len(unreadable)} of {total} reports could not be read and are left out: {names}. The figures are "
                "those of the other ranks.",
                {"paths": [u["path"] for u in unreadable]},
            )
        )
    clock = trace.meta.get("clock_alignment") or {}
    method = clock.get("method", "")
    if "collective" in method:
        shifts = clock.get("shifts_ns") or {}
        spread = max(shifts.values()) - min(shifts.values()) if shifts else 0
        how = (
            f"clocks aligned on {method} ({clock.get('collective')}): shifts up to {t(abs(spread))}, residual skew "
            f"{t(clock.get('residual_ns', 0))} over {clock.get('collectives', 0) - 1} later collective(s)"
        )
    elif method:
        how = f"clocks: {method}"
    else:
        how = ""
    rule = trace.meta.get("rank_rule")
    text = f"{len(sources)} reports read as one job: ranks from {rule}" + (f"; {how}" if how else "") + "."
    out.append(Finding("job_files", "info", text, {"rank_rule": rule, "clock_alignment": clock}))
    return out
