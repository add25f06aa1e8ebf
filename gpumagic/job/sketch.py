"""A mergeable quantile sketch for durations (and byte sizes): the medians of a job read rank by
rank.

An exact median needs every value in one place; a job of a thousand ranks has fifty million kernel
durations. Each value is put in a logarithmic bucket instead (DDSketch's buckets: bucket ``i`` holds
the values in ``(GAMMA**(i-1), GAMMA**i]``), a rank sends ``(group, bucket, count)`` triples, and
summaries merge by adding counts. A quantile read from the buckets is within :data:`ALPHA` of the
true value, relatively (the bucket's midpoint ``2 GAMMA**i / (GAMMA + 1)`` is never further than
that from a value inside it), and is clamped into the group's exact minimum and maximum. Zero (and
any value under 1) has a bucket of its own, read as 0.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ALPHA", "GAMMA", "ZERO", "buckets", "counts", "median", "merge_counts"]

#: The sketch's relative error: a median read from it is within 0.5% of the exact one.
ALPHA = 0.005
GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LOG_GAMMA = float(np.log(GAMMA))
#: The bucket of values under 1 (durations of 0 ns, empty copies), read back as 0.
ZERO = -(1 << 20)


def buckets(values: np.ndarray) -> np.ndarray:
    """Each value's bucket (int64)."""
    v = np.asarray(values, dtype=np.float64)
    # the logarithm of every value at once (a masked assignment costs ten times the logarithm), in
    # place: one temporary of the values' size
    x = np.maximum(v, 1.0)
    np.log(x, out=x)
    x /= _LOG_GAMMA
    x -= 1e-12
    np.ceil(x, out=x)
    out = x.astype(np.int64)
    out[~(v >= 1)] = ZERO  # values under 1, and NaN
    return out


def value(bucket: np.ndarray) -> np.ndarray:
    """The value a bucket stands for: its midpoint in relative terms (0 for :data:`ZERO`)."""
    b = np.asarray(bucket, dtype=np.int64)
    mid = 2 * np.exp(b.astype(np.float64) * _LOG_GAMMA) / (GAMMA + 1)
    return np.where(b == ZERO, 0.0, mid)


def counts(groups: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The sketch of values in groups: an (n, 3) int32 array of (group, bucket, count) rows, sorted
    by group and bucket."""
    if not len(values):
        return np.empty((0, 3), dtype=np.int32)
    groups = np.asarray(groups, dtype=np.int64)
    b = buckets(values)
    zero = b == ZERO
    real = ~zero
    any_real = bool(real.any())
    # bucket lo stands in for ZERO (ZERO itself is below every other bucket)
    lo = int(b.min(initial=np.iinfo(np.int64).max, where=real)) - 1 if any_real else 0
    width = (int(b.max()) if any_real else lo) - lo + 1
    cells = (int(groups.max()) + 1) * width
    if cells <= max(4 * len(b), 1 << 16):
        # a count per (group, bucket) cell: a duration's buckets span a few thousand at most, so
        # the cells are few and counting them costs less than sorting the values
        b -= lo  # in place: b is this function's own
        b[zero] = 0
        b += groups * width
        n = np.bincount(b, minlength=cells)
        cell = np.flatnonzero(n)
        bucket = cell % width + lo
        bucket[bucket == lo] = ZERO
        # int32: a rank's sketch crosses at 12 bytes a row (counts of one rank fit)
        return np.column_stack([cell // width, bucket, n[cell]]).astype(np.int32)
    key = (groups << 22) | (b - ZERO)
    key.sort()
    new = np.empty(len(key), dtype=bool)
    new[0] = True
    new[1:] = key[1:] != key[:-1]
    first = np.flatnonzero(new)
    n = np.diff(np.append(first, len(key)))
    uniq = key[first]
    return np.column_stack([uniq >> 22, (uniq & ((1 << 22) - 1)) + ZERO, n]).astype(np.int32)


def merge_counts(parts: list[np.ndarray]) -> np.ndarray:
    """Sketches (of the same groups' numbering) added together."""
    rows = np.concatenate(
        [p.astype(np.int64) for p in parts if len(p)] or [np.empty((0, 3), np.int64)]
    )
    if not len(rows):
        return rows
    uniq, inverse = np.unique(rows[:, :2], axis=0, return_inverse=True)
    total = np.bincount(inverse.reshape(-1), weights=rows[:, 2], minlength=len(uniq))
    return np.column_stack([uniq, total.astype(np.int64)])


def median(sketch: np.ndarray, groups: int) -> np.ndarray:
    """Per group 0..groups-1, the median as ``nsys stats`` defines it (the middle value, or the mean
    of the middle two) read from the buckets: within :data:`ALPHA` of the exact one (NaN for a group
    with no values)."""
    out = np.full(groups, np.nan)
    if not len(sketch):
        return out
    sketch = np.asarray(sketch, dtype=np.int64)
    s = sketch[np.lexsort((sketch[:, 1], sketch[:, 0]))]
    g, n = s[:, 0], s[:, 2]
    cum = np.cumsum(n)
    total = np.bincount(g, weights=n, minlength=groups).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(total)[:-1]])  # values before each group
    before = cum - n - start[g]
    lo_rank, hi_rank = (total[g] - 1) // 2, total[g] // 2  # 0-based ranks of the middle value(s)
    vals = value(s[:, 1])
    lo = np.full(groups, np.nan)
    hi = np.full(groups, np.nan)
    at_lo = (before <= lo_rank) & (lo_rank < before + n)
    at_hi = (before <= hi_rank) & (hi_rank < before + n)
    lo[g[at_lo]] = vals[at_lo]
    hi[g[at_hi]] = vals[at_hi]
    middle: np.ndarray = (lo + hi) / 2
    return middle
