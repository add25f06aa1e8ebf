"""Interval arithmetic shared by the timer and the Trace: how long the GPU was busy, per device, and
how long two kinds of work ran at the same time."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["clip", "overlap_by_group", "stretches", "union_by_group", "union_length", "union_ns"]


def union_length(intervals: Iterable[tuple[int, int]]) -> int:
    """Total length covered by possibly overlapping (start, end) intervals: concurrent kernels count
    once."""
    pairs = list(intervals)
    if not pairs:
        return 0
    a = np.asarray(pairs, dtype=np.int64).reshape(len(pairs), 2)
    return union_ns(a[:, 0], a[:, 1])


def stretches(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint stretches covered by intervals, sorted: (starts, ends) arrays. The one union of
    intervals every layer uses (a Trace's busy time, a job's busy bins, host work, copies)."""
    if not len(starts):
        return starts, ends
    return _stretches(starts, ends)


def _stretches(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`stretches` of at least one interval, as (first start, reach) arrays."""
    if (s[1:] < s[:-1]).any():  # kernels usually come in start order: then there is nothing to sort
        order = np.argsort(s, kind="stable")  # a merge, where sorted runs were joined
        s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    opens = np.empty(len(s), dtype=bool)
    opens[0] = True
    opens[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(opens)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]


def _union_length(s: np.ndarray, e: np.ndarray) -> int:
    """The length covered by intervals (starts, ends; ends no earlier than starts), without listing
    the stretches: in start order, each interval adds what it reaches past everything before it."""
    if (s[1:] < s[:-1]).any():
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    past = np.maximum(s[1:], reach[:-1])
    np.subtract(reach[1:], past, out=past)
    return int(reach[0] - s[0]) + int(past.sum())


def union_ns(starts: Iterable[int] | np.ndarray, ends: Iterable[int] | np.ndarray) -> int:
    """Length covered by intervals given as arrays of starts and ends (overlaps once), in numpy: a
    million kernels take milliseconds. Sorted by start, each interval adds what it reaches past
    everything before it (:func:`_union_length`: the length without listing the stretches, half
    the time of :func:`stretches` on a million kernels)."""
    s = np.asarray(starts if isinstance(starts, np.ndarray) else list(starts), dtype=np.int64)
    e = np.asarray(ends if isinstance(ends, np.ndarray) else list(ends), dtype=np.int64)
    if not len(s):
        return 0
    return _union_length(s, e)


def union_by_group(
    codes: np.ndarray, starts: np.ndarray, ends: np.ndarray, groups: int
) -> np.ndarray:
    """The union length of each group's intervals (``codes[i]`` in 0..groups-1 is interval i's
    group), as int64. One sweep for every group: each group is moved to a time range of its own
    (group * span past the earliest start), so no stretch joins two groups; a stretch's group is
    where it starts."""
    out = np.zeros(groups, dtype=np.int64)
    if not len(starts):
        return out
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if (e < s).any():  # an end before its start counts as empty
        e = np.maximum(e, s)
    if groups == 1:  # one process on one GPU, the usual unit of a report: nothing to shift
        out[0] = _union_length(s, e)
        return out
    codes = np.asarray(codes, dtype=np.int64)
    t0 = int(s.min())
    span = int(e.max()) - t0 + 1
    if groups * span >= 1 << 62:  # too far apart to shift into one int64 range: one sweep per group
        for g in range(groups):
            mine = codes == g
            out[g] = union_ns(s[mine], e[mine])
        return out
    shift = codes * span
    shift -= t0
    e = e + shift  # (the caller's array is left as it was)
    shift += s
    first, reach = _stretches(shift, e)
    np.add.at(out, first // span, reach - first)
    return out


def overlap_by_group(
    codes_a: np.ndarray,
    a: tuple[np.ndarray, np.ndarray],
    codes_b: np.ndarray,
    b: tuple[np.ndarray, np.ndarray],
    groups: int,
) -> np.ndarray:
    """Per group, how long some interval of ``a`` and some interval of ``b`` ran at once (each
    side's overlaps counted once): |A ∩ B| = |A| + |B| - |A ∪ B|, exact on integer nanoseconds."""
    union_a = union_by_group(codes_a, a[0], a[1], groups)
    union_b = union_by_group(codes_b, b[0], b[1], groups)
    codes = np.concatenate([codes_a, codes_b])
    both = union_by_group(codes, np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]), groups)
    return np.asarray(union_a + union_b - both)


def clip(
    starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Intervals cut to a window each (``lo[i]``, ``hi[i]``): what lies outside is dropped, an
    interval wholly outside becomes empty (start == end)."""
    s = np.clip(starts, lo, hi)
    return s, np.maximum(np.clip(ends, lo, hi), s)
