"""The HTML of a :class:`~gpumagic.timing.result.TimingResult` (``r`` below; typed ``Any`` since
the result imports this module): the line, its warnings, and a details table (median, IQR, kernel
and host time, rates, peak memory, SM clock, energy, timer)."""

from __future__ import annotations

import html
from typing import Any

from ..units import format_time

__all__ = ["timing_html"]


def _t(r: Any, seconds: float) -> str:
    return format_time(seconds, r.precision)


def timing_html(r: Any) -> str:
    """The result as notebooks show it (the caller adds its advice)."""
    rows = [
        ("median", _t(r, r.median) if r.samples else "—"),
        ("IQR", _t(r, r.iqr) if r.samples else "—"),
        ("min", _t(r, r.min) if r.samples else "—"),
        ("samples × calls", f"{len(r.samples)} × {r.calls_per_sample}"),
        (
            "GPU kernel time per call",
            _t(r, r.kernel_time) if r.kernel_time is not None else "—",
        ),
        (
            "host time per call",
            _t(r, r.host_per_call) if r.host_per_call is not None else "—",
        ),
        ("first call", _t(r, r.first_call) if r.first_call is not None else "—"),
        ("achieved", "; ".join(r.achieved.segments()) if r.achieved is not None else "—"),
        (
            "peak memory per call",
            f"{r.work.peak_memory / 1e6:,.1f} MB" if r._peak_memory else "—",
        ),
        ("SM clock", _clock_cell(r)),
        ("energy per call", _energy_cell(r)),
        ("timer", r.backend),
    ]
    cell = "style='text-align:left'"
    body = "".join(
        f"<tr><th {cell}>{html.escape(k)}</th><td {cell}>{html.escape(v)}</td></tr>"
        for k, v in rows
    )
    warn = "".join(f"<div>\u26a0 {html.escape(w)}</div>" for w in r.warnings())
    return (
        f"<div class='gpumagic-timing'><div><code>{html.escape(r.line())}</code></div>{warn}"
        f"<details><summary>details</summary><table>{body}</table></details></div>"
    )


def _energy_cell(r: Any) -> str:
    found = r.energy
    if found is not None:
        return found.segment() + f" (NVML, {found.blocks} blocks over {found.seconds:.2f} s)"
    if r.energy_counter is False:
        return "not reported: NVML has no energy counter for this GPU"
    return "—"


def _clock_cell(r: Any) -> str:
    clocks = r.clock_summary
    if clocks is None:
        return "—"
    if clocks.low == clocks.high:
        return f"{clocks.low} MHz"
    return f"{clocks.low}-{clocks.high} MHz, prevailing {clocks.prevailing} MHz"
