"""What the silicon says about each heavy kernel: one verdict from its sampled counters
(``trace.meta["counters"]``, ``trace/counters.py``), with the numbers behind it.

The rules read the counters as fractions of their peaks, in this order: DRAM read + write at 60% of
peak bandwidth or more is memory-bound; else the tensor pipe active half the time or more is
tensor-core bound; else SM issue at 60% or more is compute-bound (the SIMT pipes); else fewer than
half the SMs active is an occupancy problem (too few blocks, or a tail); else neither memory nor
compute is near its peak: latency-bound (dependent loads, synchronization, small work per launch).
A name whose calls are shorter than two sampling periods is marked as read from shared samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..trace import Trace
from ..trace.by_code import attribution, range_names
from ..trace.counters import grouped_means, kernel_integrals

__all__ = ["CODE_COLUMNS", "code_counters", "counters_table", "verdict"]

MEMORY_BOUND = 60.0
TENSOR_BOUND = 50.0
ISSUE_BOUND = 60.0
SMS_IDLE = 50.0
#: A group of work that fills less of the sampling periods it touches than this reads its
#: neighbours' counters as much as its own: its verdict says so.
OWN_SHARE = 0.5


def _pct(value: float | None) -> float:
    return float(value) if value is not None and value == value else 0.0


def verdict(row: dict[str, Any]) -> str:
    """One line for one kernel name's counters, e.g. 'memory-bound: DRAM 84% of peak (read 42%,
    write 42%), tensor pipe 4%'."""
    read, write = _pct(row.get("dram_read")), _pct(row.get("dram_write"))
    dram, tensor = read + write, _pct(row.get("tensor_active"))
    issue, active = _pct(row.get("sm_issue")), _pct(row.get("sm_active"))
    if dram >= MEMORY_BOUND:
        text = (
            f"memory-bound: DRAM {dram:.0f}% of peak (read {read:.0f}%, write {write:.0f}%), "
            f"tensor pipe {tensor:.0f}%"
        )
    elif tensor >= TENSOR_BOUND:
        text = f"tensor-core bound: tensor pipe {tensor:.0f}% active, DRAM {dram:.0f}% of peak"
    elif issue >= ISSUE_BOUND:
        text = f"compute-bound: SM issue {issue:.0f}%, DRAM {dram:.0f}% of peak"
    elif active < SMS_IDLE:
        text = f"SMs idle: {active:.0f}% of SMs active (too few blocks, or a tail)"
    else:
        text = (
            f"latency-bound: SM issue {issue:.0f}%, DRAM {dram:.0f}% of peak, tensor pipe "
            f"{tensor:.0f}%: neither near its peak"
        )
    if row.get("own") is not None and row["own"] < OWN_SHARE:
        text += (
            f"; its kernels fill {row['own']:.0%} of the sampling periods they touch (the rest: "
            "idle or other work)"
        )
    elif row.get("short") and row.get("own") is None:
        text += " (calls shorter than two samples: read from shared samples)"
    return text


def counters_table(trace: Trace, top: int | None = None) -> pd.DataFrame:
    """The counters of ``trace`` per kernel name, heaviest first: Time (%), Instances, SM Active
    (%), SM Issue (%), Tensor Active (%), DRAM Read (%), DRAM Write (%), Warps (%), GPC (MHz),
    Verdict, Name. Empty where the capture sampled none."""
    rows = trace.meta.get("counters") or []
    cols = [
        "Time (%)",
        "Instances",
        "SM Active (%)",
        "SM Issue (%)",
        "Tensor Active (%)",
        "DRAM Read (%)",
        "DRAM Write (%)",
        "Warps (%)",
        "GPC (MHz)",
        "Verdict",
        "Name",
    ]
    if not rows:
        return pd.DataFrame(columns=cols)
    keys = ["Name", "Instances", "Total Time (ns)", *_SHOWN_KEYS.values(), "warps", "gpc_mhz"]
    df = pd.DataFrame(rows).reindex(columns=keys)
    total = df["Total Time (ns)"].sum() or 1.0
    out = pd.DataFrame(
        {
            "Time (%)": 100.0 * df["Total Time (ns)"] / total,
            "Instances": df["Instances"],
            "SM Active (%)": df["sm_active"],
            "SM Issue (%)": df["sm_issue"],
            "Tensor Active (%)": df["tensor_active"],
            "DRAM Read (%)": df["dram_read"],
            "DRAM Write (%)": df["dram_write"],
            "Warps (%)": df["warps"],
            "GPC (MHz)": df["gpc_mhz"],
            "Verdict": [verdict(r) for r in rows],
            "Name": df["Name"],
        }
    )
    out = out.sort_values("Time (%)", ascending=False).reset_index(drop=True)
    return out.head(top) if top else out


#: The columns of :func:`code_counters` (the first is "Module" or "Line").
CODE_COLUMNS = [
    "Pass",
    "Time (%)",
    "Time (ns)",
    "Kernels",
    "SM Active (%)",
    "SM Issue (%)",
    "Tensor Active (%)",
    "DRAM Read (%)",
    "DRAM Write (%)",
    "Verdict",
]
_SHOWN_KEYS = {
    "SM Active (%)": "sm_active",
    "SM Issue (%)": "sm_issue",
    "Tensor Active (%)": "tensor_active",
    "DRAM Read (%)": "dram_read",
    "DRAM Write (%)": "dram_write",
}


def _kernel_parts(trace: Trace) -> pd.DataFrame | None:
    """Each kernel's metric integrals (``trace/counters.py``), in ``trace.kernels``' order; None
    where the capture sampled no counters."""
    samples = trace.meta.get("counter_samples")
    period = trace.meta.get("counters_period_ns")
    if samples is None or not len(samples) or not period:
        return None
    return trace.memo(
        "counters.kernel_integrals",
        lambda: kernel_integrals(trace.kernels, samples, float(period)).reset_index(drop=True),
    )


def code_counters(
    trace: Trace, by: str = "module", top: int | None = None, names: dict[str, str] | None = None
) -> pd.DataFrame:
    """The sampled counters over the user's own code, heaviest first: per module (``by=
    "module"``: its kernels and its children's, forward and backward apart, named as ``by_module``
    names them, or by ``names``) or per line of the cell (``by="line"``: backward work on the line
    whose forward made it), each with the share of the kernel time, the counters' time-weighted
    means over its kernels and one verdict. Empty where the capture sampled no counters or the
    trace holds no module or line information."""
    first = "Module" if by == "module" else "Line"
    empty = pd.DataFrame(columns=[first, *CODE_COLUMNS])
    parts = _kernel_parts(trace)
    if parts is None or trace.kernels.empty:
        return empty
    attr = attribution(trace, memops=False)
    items = attr.items.reset_index(drop=True)
    if len(items) != len(parts):
        return empty
    period = float(trace.meta["counters_period_ns"])
    passes = np.where(items["backward"].to_numpy(dtype=bool), "backward", "forward")
    if by == "module":
        if not attr.has_modules:
            return empty
        shown = names or range_names(trace) or trace.meta.get("module_names") or {}
        keys, rows = _module_keys(items["module"].tolist())
        label = [shown.get(k, k) for k in keys]
        parts, durations, passes = parts.iloc[rows], items["dur"].to_numpy()[rows], passes[rows]
    else:
        if not attr.lines:
            return empty
        held = items["line"].notna().to_numpy()
        label = [_line_label(k, attr.line_text) for k in items["line"][held]]
        parts, durations, passes = parts[held], items["dur"].to_numpy()[held], passes[held]
    if not len(label):
        return empty
    groups = [pd.Series(label, name=first), pd.Series(passes, name="Pass")]
    table = grouped_means(durations, parts.reset_index(drop=True), groups, period).reset_index()
    starts = trace.kernels["start"].to_numpy(dtype="float64")
    picked = rows if by == "module" else np.flatnonzero(held)
    table["own"] = _own_shares(starts[picked], starts[picked] + durations, label, passes, period)
    total = float(items["dur"].sum()) or 1.0
    out = pd.DataFrame(
        {
            first: table[first],
            "Pass": table["Pass"],
            "Time (%)": 100.0 * table["Total Time (ns)"] / total,
            "Time (ns)": table["Total Time (ns)"].astype("int64"),
            "Kernels": table["Instances"].astype("int64"),
            **{col: table[key] for col, key in _SHOWN_KEYS.items()},
            "Verdict": [verdict(r) for r in table.to_dict("records")],
        }
    )
    out = out.sort_values("Time (ns)", ascending=False, kind="stable").reset_index(drop=True)
    return out.head(top) if top else out


def _own_shares(
    starts: np.ndarray, ends: np.ndarray, label: list[str], passes: np.ndarray, period: float
) -> list[float]:
    """Per group (label, pass), in :func:`grouped_means`' order: its kernel time over the time of
    the sampling periods its kernels touch. 1 where its work filled every period it was read from;
    small where it shared them with other work."""
    frame = pd.DataFrame({"g": label, "p": passes, "b0": starts // period, "b1": ends // period})
    frame["dur"] = ends - starts
    out = []
    for _, g in frame.groupby(["g", "p"], sort=False):
        b0, b1 = g["b0"].to_numpy(), g["b1"].to_numpy()
        order = np.argsort(b0, kind="stable")
        b0, b1 = b0[order], b1[order]
        reach = np.maximum.accumulate(b1)
        fresh = np.concatenate([[True], b0[1:] > reach[:-1]])
        run = np.cumsum(fresh) - 1
        lo = b0[fresh]
        hi = np.zeros(len(lo))
        np.maximum.at(hi, run, b1)
        touched = float((hi - lo + 1).sum()) * period
        out.append(min(1.0, float(g["dur"].sum()) / touched) if touched else 0.0)
    return out


def _module_keys(modules: list[Any]) -> tuple[list[str], np.ndarray]:
    """Each kernel once under its module and once under every module above it (a module's row
    holds its children's work): the module paths and the kernel rows they take."""
    keys: list[str] = []
    rows: list[int] = []
    for i, path in enumerate(modules):
        if path is None or path != path:
            continue
        parts = str(path).split(".")
        for j in range(1, len(parts) + 1):
            keys.append(".".join(parts[:j]))
            rows.append(i)
    return keys, np.asarray(rows, dtype=np.int64)


def _line_label(key: int | str, text: dict[Any, str]) -> str:
    source = text.get(key, "")
    return f"{key}: {source}" if isinstance(key, int) else str(source or key)
