"""A rank's GPU busy time over time, in bins that line up with any other rank's: the rank x time
heatmap of a job, drawn without any rank's rows in one place.

A worker does not know the job's time axis (the other ranks are read elsewhere), so each rank bins
its busy time on a grid of its own choosing that every other grid nests in: bins ``2**k`` ns wide
starting at multiples of ``2**k`` on its clock, ``k`` the smallest that fits its span in
:data:`FINE_BINS` bins. The fold re-bins every rank onto the job's grid (a coarser power of two):
summing whole bins, exact, where the rank's clock is the job's; where clock alignment shifted a rank
by a number of ns that is not a multiple of its bin, a bin's time is spread evenly over the two job
bins it straddles (the heatmap is a picture: the per-rank busy figures themselves are exact).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace.intervals import stretches

__all__ = ["FINE_BINS", "BusyBins", "bin_busy", "job_grid", "rebin"]

#: At most this many bins per rank on its own grid (2 KB a rank as float32).
FINE_BINS = 512


@dataclass
class BusyBins:
    """Busy time on a grid: bin ``i`` covers ``[(first + i) << shift, (first + i + 1) << shift)``
    ns and was busy ``busy[i]`` of its width (a share, 0..1 per GPU: a rank of two GPUs may reach
    2)."""

    shift: int
    first: int
    busy: np.ndarray  # float32

    @property
    def start(self) -> int:
        return self.first << self.shift

    @property
    def end(self) -> int:
        return (self.first + len(self.busy)) << self.shift


def _covered(s: np.ndarray, e: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Busy ns before each time in ``at``, of disjoint sorted stretches ``s``..``e``."""
    if not len(s):
        return np.zeros(len(at), dtype=np.float64)
    done = np.concatenate([[0], np.cumsum(e - s)])
    j = np.searchsorted(s, at, side="right")  # stretches that start at or before each time
    inside = np.clip(at - s[np.maximum(j - 1, 0)], 0, (e - s)[np.maximum(j - 1, 0)])
    return np.where(j > 0, done[np.maximum(j - 1, 0)] + inside, 0).astype(np.float64)


def bin_busy(units: list[tuple[np.ndarray, np.ndarray]], lo: int, hi: int) -> BusyBins:
    """The busy time of a rank's GPUs (``units``: each GPU's (starts, ends)) over ``[lo, hi)`` on
    the rank's own grid, each GPU's overlapping work counted once."""
    shift = 0
    while ((hi >> shift) - (lo >> shift) + 1) > FINE_BINS:
        shift += 1
    first = lo >> shift
    n = max((hi >> shift) - first + 1, 1)
    edges = (first + np.arange(n + 1, dtype=np.int64)) << shift
    busy = np.zeros(n, dtype=np.float64)
    for starts, ends in units:
        s, e = stretches(np.asarray(starts, np.int64), np.asarray(ends, np.int64))
        busy += np.diff(_covered(s, e, edges))
    return BusyBins(shift, int(first), (busy / float(1 << shift)).astype(np.float32))


def job_grid(lo: int, hi: int, finest: int, columns: int) -> tuple[int, int, int]:
    """The job's grid over ``[lo, hi)``: (shift, first bin, bins), no finer than any rank's
    (``finest``: the largest rank shift) and at most ``columns`` bins."""
    shift = finest
    while ((hi >> shift) - (lo >> shift) + 1) > columns:
        shift += 1
    first = lo >> shift
    return shift, first, max((hi >> shift) - first + 1, 1)


def rebin(b: BusyBins, offset: int, shift: int, first: int, n: int) -> np.ndarray:
    """``b`` moved by ``offset`` ns (clock alignment) on the job's grid: busy share per job bin."""
    width = 1 << b.shift
    edges = ((b.first + np.arange(len(b.busy) + 1, dtype=np.int64)) << b.shift) + offset
    cum = np.concatenate([[0.0], np.cumsum(b.busy.astype(np.float64) * width)])
    target = (first + np.arange(n + 1, dtype=np.int64)) << shift
    done = np.interp(target, edges, cum, left=0.0, right=cum[-1])
    out: np.ndarray = (np.diff(done) / float(1 << shift)).astype(np.float32)
    return out
