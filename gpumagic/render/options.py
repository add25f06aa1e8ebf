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
