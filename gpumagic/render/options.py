"""Defaults of what a report shows: written once here, read by the report, the timeline and ``%config``."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ReportOptions"]


@dataclass(frozen=True)
class ReportOptions:
    #: Rows in the kernel table and the other tables.
    top: int = 15
    #: Draw the Bokeh timeline.
    timeline: bool = True
    #: Events per timeline lane before they are merged into time buckets (keeps the page small on big traces).
    max_glyphs_per_lane: int = 2500
    #: BokehJS in a notebook: "once" per kernel session (the first report carries it, the others draw with it), or
    #: "every" report its own, in an iframe (front ends that show each output in a window of its own).
    bokehjs: str = "once"
