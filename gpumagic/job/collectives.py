"""A job's NCCL collectives from its ranks' compact arrays: how long each rank waited inside them,
and the shift that puts every rank on one clock.

The same rules as the full trace's, on a few numbers per NCCL kernel instead of its rows: one
collective is a kernel name and its place among the rank's kernels of that name
(``trace.collectives``); its transfer time is the shortest duration over the ranks that ran it, and
a rank's wait the rest of its duration (``analysis.rank_kernels.nccl_waits``: exact, from the
per-collective minima); the clocks of different hosts are aligned on the end of the first collective
every rank ran, the residual skew being the widest spread of the later common collectives' ends
(``capture.clock_alignment.align_on_collective``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["alignment", "nccl_frame", "waits_by_pid"]


def nccl_frame(parts: Sequence[tuple[dict[str, np.ndarray], np.ndarray, int]]) -> pd.DataFrame:
    """Every rank's NCCL kernels in one frame: ``parts`` holds each rank's arrays, the job's number
    of each of its local NCCL names, and its pid offset. Columns: pid, code, nth_start, nth_end,
    dur, end."""
    cols: dict[str, list[np.ndarray]] = {
        k: [] for k in ("pid", "code", "nth_start", "nth_end", "dur", "end")
    }
    for arrays, codes, offset in parts:
        if not arrays:
            continue
        cols["pid"].append(arrays["pid"].astype(np.int64) + offset)
        cols["code"].append(codes[arrays["name"]])
        for k in ("nth_start", "nth_end", "dur", "end"):
            cols[k].append(arrays[k])
    if not cols["pid"]:
        return pd.DataFrame({k: np.empty(0, np.int64) for k in cols})
    return pd.DataFrame({k: np.concatenate(v).astype(np.int64) for k, v in cols.items()})


def waits_by_pid(frame: pd.DataFrame) -> dict[int, int]:
    """Per pid, the ns its NCCL kernels waited for the other ranks: each collective's duration less
    the shortest over the ranks that ran it (0 where one rank ran it)."""
    if frame.empty:
        return {}
    g = frame.groupby(["code", "nth_start"])
    transfer = g["dur"].transform("min")
    ranks = g["pid"].transform("nunique")
    wait = np.where(ranks > 1, frame["dur"] - transfer, 0)
    out = pd.Series(wait, index=frame.index).groupby(frame["pid"]).sum()
    return {int(p): int(w) for p, w in out.items()}


def alignment(
    frame: pd.DataFrame, pids: Sequence[int], rank_of: Mapping[int, int], names: Sequence[str]
) -> dict[str, object]:
    """``meta["clock_alignment"]`` for processes ``pids`` (every process that ran kernels): the
    shift of each so that the first NCCL collective every one ran ends when it ends on rank 0's
    process, and the residual skew; a sentence where no collective was run by all."""
    pids = sorted({int(p) for p in pids})
    if frame.empty:
        return {"method": "none: no NCCL collective that every rank ran"}
    ends = frame.pivot_table(
        index=["code", "nth_end"], columns="pid", values="end", aggfunc="first"
    )
    common = ends.dropna()
    if common.empty or len(pids) < 2 or set(common.columns) != set(pids):
        return {"method": "none: no NCCL collective that every rank ran"}
    common = common.loc[common.min(axis=1).sort_values().index]
    first = common.iloc[0]
    ref = min(pids, key=lambda p: (rank_of.get(p, len(pids)), p))
    shifts = {p: int(first[ref] - first[p]) for p in pids}
    aligned = common + pd.Series(shifts)
    spread = aligned.max(axis=1) - aligned.min(axis=1)
    residual = int(spread.iloc[1:].max()) if len(aligned) > 1 else 0
    return {
        "method": "the end of the first collective every rank ran",
        "collective": str(names[int(common.index[0][0])]).split("(")[0],
        "shifts_ns": shifts,
        "residual_ns": residual,
        "collectives": len(common),
    }
