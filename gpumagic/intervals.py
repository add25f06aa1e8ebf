"""Interval arithmetic shared by the timer and the Trace: how long the GPU was busy."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["union_length", "union_ns"]


def union_length(intervals: Iterable[tuple[int, int]]) -> int:
    """Total length covered by possibly overlapping (start, end) intervals: concurrent kernels count once."""
    pairs = list(intervals)
    if not pairs:
        return 0
    a = np.asarray(pairs, dtype=np.int64).reshape(len(pairs), 2)
    return union_ns(a[:, 0], a[:, 1])


def union_ns(starts: Iterable[int] | np.ndarray, ends: Iterable[int] | np.ndarray) -> int:
    """Length covered by intervals given as arrays of starts and ends (overlaps once), in numpy: a million kernels
    take milliseconds. Sorted by start; an interval that starts after everything before it has ended opens a
    new stretch, which runs to the largest end seen until the next one opens."""
    s = np.asarray(starts if isinstance(starts, np.ndarray) else list(starts), dtype=np.int64)
    e = np.asarray(ends if isinstance(ends, np.ndarray) else list(ends), dtype=np.int64)
    if not len(s):
        return 0
    if (s[1:] < s[:-1]).any():  # kernels usually come in start order: then there is nothing to sort
        order = np.argsort(s)
        s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    opens = np.empty(len(s), dtype=bool)
    opens[0] = True
    opens[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(opens)
    last = np.append(first[1:] - 1, len(s) - 1)
    return int((reach[last] - s[first]).sum())
