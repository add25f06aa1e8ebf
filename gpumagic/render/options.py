"""Defaults of what a report shows: written once here, read by the report, the timeline and
``%config``."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MANY_RANKS", "RANK_TABLE_EDGE", "RANK_TABLE_ROWS", "ReportOptions"]

#: Past this many ranks (processes) a report reads as a job, not as a few GPUs side by side: a rank
#: x figure heatmap above the per-rank table, and a timeline that shows the straggler's and the
#: fastest rank's lanes, the others one choice away. At 8 or fewer, every rank's lanes fit a page
#: and the table is short.
MANY_RANKS = 8
#: The per-rank table lists every row up to this many; past it, the straggler, the fastest rank and
#: the :data:`RANK_TABLE_EDGE` ranks at either end by NCCL time, and says how many it leaves out.
RANK_TABLE_ROWS = 16
RANK_TABLE_EDGE = 3


@dataclass(frozen=True)
class ReportOptions:
    #: Rows in the kernel table and the other tables.
    top: int = 15
    #: Draw the Bokeh timeline.
    timeline: bool = True
    #: Events per timeline lane before they are merged into time buckets (keeps the page small on
    #: big traces).
    max_glyphs_per_lane: int = 2500
    #: BokehJS in a notebook: "once" per kernel session (the first report carries it, the others
    #: draw with it), or "every" report its own, in an iframe (front ends that show each output in a
    #: window of its own).
    bokehjs: str = "once"
