"""A job's NCCL collectives from its ranks' compact arrays: how long each rank waited inside them,
and the shift that puts every rank on one clock.

The same rules as the full trace's, on a few numbers per NCCL kernel instead of its rows: one
collective is a kernel name and its place among the rank's kernels of that name
(``trace.collectives``); its transfer time is the shortest duration over the ranks that ran it, and
a rank's wait the rest of its duration (``analysis.rank_kernels.nccl_waits``: exact, from the
per-collective minima); the clocks of different hosts are aligned on the end of the first collective
every rank ran, the residual skew being the widest spread of the later common collectives' ends
(``trace.clock_alignment.align_on_collective``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["alignment", "nccl_frame", "waits_by_pid"]


def nccl_frame(
    parts: Sequence[tuple[dict[str, np.ndarray], np.ndarray, int]],
) -> dict[str, np.ndarray]:
    """Every rank's NCCL kernels as one set of columns: ``parts`` holds each rank's arrays, the
    job's number of each of its local NCCL names, and its pid offset. Columns: pid, code, nth_start,
    nth_end (int32 where they fit), dur, end; filled in place, one copy of each rank's numbers."""
    n = sum(len(a["pid"]) for a, _, _ in parts if a)
    out: dict[str, np.ndarray] = {
        "pid": np.empty(n, np.int64),
        "code": np.empty(n, np.int32),
        "nth_start": np.empty(n, np.int32),
        "nth_end": np.empty(n, np.int32),
        "dur": np.empty(n, np.int64),
        "end": np.empty(n, np.int64),
    }
    at = 0
    for arrays, codes, offset in parts:
        if not arrays:
            continue
        k = len(arrays["pid"])
        out["pid"][at : at + k] = arrays["pid"]
        out["pid"][at : at + k] += offset
        out["code"][at : at + k] = codes[arrays["name"]]
        for key in ("nth_start", "nth_end", "dur", "end"):
            out[key][at : at + k] = arrays[key]
        at += k
    return out


def _groups(code: np.ndarray, nth: np.ndarray) -> tuple[np.ndarray, int]:
    """Each row's collective (0..n-1) by its (name, place), and how many collectives."""
    key = code * (int(nth.max()) + 1) + nth if len(nth) else code
    uniq, inverse = np.unique(key, return_inverse=True)
    return inverse.reshape(-1), len(uniq)


def waits_by_pid(frame: dict[str, np.ndarray]) -> dict[int, int]:
    """Per pid, the ns its NCCL kernels waited for the other ranks: each collective's duration less
    the shortest over the ranks that ran it (0 where one rank ran it). In numpy over the job's rows:
    a few arrays of one number per NCCL kernel, no grouped frame."""
    if not len(frame["pid"]):
        return {}
    dur = frame["dur"]
    group, n = _groups(frame["code"].astype(np.int64), frame["nth_start"].astype(np.int64))
    least = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(least, group, dur)
    ranks = np.bincount(group, minlength=n)  # a process runs a collective once: rows are ranks
    wait = np.where(ranks[group] > 1, dur - least[group], 0)
    pids, where = np.unique(frame["pid"], return_inverse=True)
    total = np.zeros(len(pids), dtype=np.int64)
    np.add.at(total, where.reshape(-1), wait)
    return {int(p): int(w) for p, w in zip(pids, total)}


def alignment(
    frame: dict[str, np.ndarray],
    pids: Sequence[int],
    rank_of: Mapping[int, int],
    names: Sequence[str],
) -> dict[str, object]:
    """``meta["clock_alignment"]`` for processes ``pids`` (every process that ran kernels): the
    shift of each so that the first NCCL collective every one ran ends when it ends on rank 0's
    process, and the residual skew; a sentence where no collective was run by all. The arithmetic
    is ``align_on_collective``'s own (ends as float64 where some rank lacks a collective, as its
    pivot's are), so the shifts are the same to the ns."""
    pids = sorted({int(p) for p in pids})
    none: dict[str, object] = {"method": "none: no NCCL collective that every rank ran"}
    if not len(frame["pid"]) or len(pids) < 2:
        return none
    pid = frame["pid"]
    if set(np.unique(pid).tolist()) != set(pids):
        return none
    code = frame["code"].astype(np.int64)
    group, n = _groups(code, frame["nth_end"].astype(np.int64))
    col = np.searchsorted(np.asarray(pids), pid)
    ends = np.full((n, len(pids)), np.nan)
    ends[group, col] = frame["end"].astype(np.float64)
    missing = np.isnan(ends).any(axis=1)
    common = np.flatnonzero(~missing)
    if not len(common):
        return none
    if not missing.any():  # a pivot with no gap keeps integer ns, as align_on_collective's does
        whole = np.zeros(ends.shape, dtype=np.int64)
        whole[group, col] = frame["end"]
        ends = whole
    common = common[np.argsort(ends[common].min(axis=1), kind="stable")]  # in time order
    first = ends[common[0]]
    ref = pids.index(min(pids, key=lambda p: (rank_of.get(p, len(pids)), p)))
    shifts = {p: int(first[ref] - first[i]) for i, p in enumerate(pids)}
    aligned = ends[common] + np.array([shifts[p] for p in pids], dtype=np.int64)
    spread = aligned.max(axis=1) - aligned.min(axis=1)
    first_code = int(code[np.flatnonzero(group == common[0])[0]])
    return {
        "method": "the end of the first collective every rank ran",
        "collective": str(names[first_code]).split("(")[0],
        "shifts_ns": shifts,
        "residual_ns": int(spread[1:].max()) if len(common) > 1 else 0,
        "collectives": len(common),
    }
