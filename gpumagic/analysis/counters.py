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

import pandas as pd

__all__ = ["counters_table", "verdict"]

MEMORY_BOUND = 60.0
TENSOR_BOUND = 50.0
ISSUE_BOUND = 60.0
SMS_IDLE = 50.0


def _pct(value: Any) -> float:
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
    if row.get("short"):
        text += " (calls shorter than two samples: read from shared samples)"
    return text


def counters_table(trace: Any, top: int | None = None) -> pd.DataFrame:
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
    df = pd.DataFrame(rows)
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
