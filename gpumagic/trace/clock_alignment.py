"""Per-rank reports of different hosts on one clock: each process's times shifted so that the first
NCCL collective every rank ran ends at the same time on every rank.

A collective ends on every rank together, when the last rank has joined and the data has moved; it
is matched across ranks by its name and its place among that rank's kernels of that name (the order
NCCL requires every rank to keep: :func:`gpumagic.trace.collectives.collective_instances`). The
residual skew (the widest spread of the later common collectives' ends after the shift) says how
well one shift fits the whole capture.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import COLUMNS, Trace, id_column
from .collectives import collective_instances

__all__ = ["align_on_collective"]


def align_on_collective(trace: Trace) -> Trace:
    """``trace`` with each process's times shifted so the first NCCL collective every process ran
    ends at the same time as on the first process; ``meta["clock_alignment"]`` says which
    collective, the shifts and the residual skew (the widest spread of the later common collectives'
    ends). Unchanged, and said, where there is none."""
    from ..kernels import decode

    k = trace.kernels
    if k.empty:
        trace.meta["clock_alignment"] = {"method": "none: no kernels to align on"}
        return trace
    codes, names = pd.factorize(k["name"], use_na_sentinel=False)
    is_nccl = np.array([decode(str(n)).family == "nccl" for n in names], dtype=bool)
    nccl = is_nccl[codes]
    pid = id_column(k["pid"])
    pids = sorted(set(pid.tolist()))
    end = k["end"].to_numpy(dtype=np.int64)
    rows = collective_instances(pid, np.asarray(codes, dtype=np.int64), end, nccl)
    rows["end"] = end[rows["row"].to_numpy()]
    ends = rows.pivot_table(index=["code", "nth"], columns="pid", values="end", aggfunc="first")
    common = ends.dropna()
    if common.empty or len(pids) < 2 or set(common.columns) != set(pids):
        trace.meta["clock_alignment"] = {"method": "none: no NCCL collective that every rank ran"}
        return trace
    common = common.loc[common.min(axis=1).sort_values().index]  # in time order
    first = common.iloc[0]
    ranks = {m["pid"]: m["rank"] for m in trace.meta.get("rank_marks") or []}
    ref = min(pids, key=lambda p: (ranks.get(p, len(pids)), p))  # rank 0's clock is the job's
    shifts = {p: int(first[ref] - first[p]) for p in pids}
    aligned = common + pd.Series(shifts)
    residual = (
        int((aligned.max(axis=1) - aligned.min(axis=1)).iloc[1:].max()) if len(aligned) > 1 else 0
    )
    tables = {}
    for name in COLUMNS:
        df = getattr(trace, name)
        if df.empty or "pid" not in df.columns:
            tables[name] = df
            continue
        add = pd.Series(id_column(df["pid"])).map(shifts).fillna(0).to_numpy(dtype=np.int64)
        tables[name] = df.assign(start=df["start"] + add, end=df["end"] + add)
    name = str(names[int(common.index[0][0])])
    meta = {
        **trace.meta,
        "clock_alignment": {
            "method": "the end of the first collective every rank ran",
            "collective": name.split("(")[0],
            "shifts_ns": shifts,
            "residual_ns": residual,
            "collectives": len(common),
        },
    }
    return Trace(**tables, meta=meta)
