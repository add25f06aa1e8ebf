"""Interval arithmetic shared by the timer and the Trace: how long the GPU was busy."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["union_length"]


def union_length(intervals: Iterable[tuple[int, int]]) -> int:
    """Total length covered by possibly overlapping (start, end) intervals: concurrent kernels count once."""
    total = 0
    cur_start = cur_end = None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    if cur_end is not None:
        total += cur_end - cur_start
    return int(total)
