"""The HTML of a :class:`~gpumagic.timing.result.TimingResult` (``r`` below): the line, its
warnings, and a details table (median, IQR, kernel and host time, rates, peak memory, SM clock,
energy, timer)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Protocol

from ..units import format_time

if TYPE_CHECKING:
    from ..device_peaks import Achieved
    from .energy import EnergySummary
    from .smclock import ClockSummary
    from .work import Work

__all__ = ["timing_html"]


class _Shown(Protocol):
    """What the page reads of a :class:`~gpumagic.timing.result.TimingResult`, spelled out here
    since the result imports this module (importing it back would be a cycle)."""

    samples: list[float]
    calls_per_sample: int
    backend: str
    precision: int
    first_call: float | None
    kernel_time: float | None
    host_per_call: float | None
    energy_counter: bool | None
    work: Work | None

    @property
    def median(self) -> float: ...
    @property
    def iqr(self) -> float: ...
    @property
    def min(self) -> float: ...
    @property
    def achieved(self) -> Achieved | None: ...
    @property
    def energy(self) -> EnergySummary | None: ...
    @property
    def clock_summary(self) -> ClockSummary | None: ...
    def line(self) -> str: ...
    def warnings(self) -> list[str]: ...


def _t(r: _Shown, seconds: float) -> str:
    return format_time(seconds, r.precision)


def timing_html(r: _Shown) -> str:
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
        ("peak memory per call", _peak_memory_cell(r)),
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


def _energy_cell(r: _Shown) -> str:
    found = r.energy
    if found is not None:
        return found.segment() + f" (NVML, {found.blocks} blocks over {found.seconds:.2f} s)"
    if r.energy_counter is False:
        return "not reported: NVML has no energy counter for this GPU"
    return "—"


def _peak_memory_cell(r: _Shown) -> str:
    peak = r.work.peak_memory if r.work is not None else None
    return f"{peak / 1e6:,.1f} MB" if peak is not None else "—"


def _clock_cell(r: _Shown) -> str:
    clocks = r.clock_summary
    if clocks is None:
        return "—"
    if clocks.low == clocks.high:
        return f"{clocks.low} MHz"
    return f"{clocks.low}-{clocks.high} MHz, prevailing {clocks.prevailing} MHz"
