"""Trace: the one data model that both capture backends (torch.profiler, nsys) produce, and its summaries.

Plain pandas DataFrames with fixed columns; every time is an integer nanosecond on one clock. The summaries use the
definitions and column names of ``nsys stats`` (cuda_gpu_kern_sum, cuda_api_sum, nvtx_sum, osrt_sum,
cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum), so a number here can be checked against the tool people already
trust: Time (%) of the summed total, Total/Avg/Med/Min/Max, StdDev as the *sample* standard deviation (0 for one
instance), grouped by full name, sorted by total time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .intervals import union_length

__all__ = ["COLUMNS", "Trace", "nesting_depth", "union_ns"]

COLUMNS: dict[str, list[str]] = {
    "kernels": [
        "name",
        "start",
        "end",
        "device",
        "stream",
        "correlation",
        "grid",
        "block",
        "registers",
        "shared_memory",
    ],
    "memops": ["kind", "name", "bytes", "start", "end", "device", "stream", "correlation"],
    "api": ["name", "start", "end", "thread", "correlation"],
    "ops": ["name", "start", "end", "thread", "depth", "shapes", "external_id"],
    "nvtx": ["text", "start", "end", "thread", "depth", "domain", "style"],
    "osrt": ["name", "start", "end", "thread"],
}

_INT_COLUMNS = {"start", "end", "bytes", "correlation", "depth", "registers", "shared_memory", "external_id"}


def empty_frame(table: str) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="int64" if c in _INT_COLUMNS else "object") for c in COLUMNS[table]})


def frame(table: str, rows: Iterable[dict[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """A table with exactly its fixed columns (missing ones filled), integer times."""
    df = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if df.empty:
        return empty_frame(table)
    for c in COLUMNS[table]:
        if c not in df.columns:
            df[c] = None
    df = df[COLUMNS[table]]
    for c in ("start", "end"):
        df[c] = df[c].astype("int64")
    return df.reset_index(drop=True)


def union_ns(starts: Iterable[int], ends: Iterable[int]) -> int:
    """Length covered by intervals (overlaps once): GPU busy time."""
    return union_length(zip(starts, ends))


def nesting_depth(df: pd.DataFrame, group: str = "thread") -> pd.Series:
    """Depth of each interval inside the enclosing intervals of the same group (0 = outermost), by a stack sweep."""
    depth = pd.Series(0, index=df.index, dtype="int64")
    if df.empty:
        return depth
    for _, g in df.sort_values(["start", "end"], ascending=[True, False]).groupby(group, sort=False):
        stack: list[int] = []
        for idx, s, e in zip(g.index, g["start"].to_numpy(), g["end"].to_numpy()):
            while stack and stack[-1] <= s:
                stack.pop()
            depth[idx] = len(stack)
            stack.append(e)
    return depth


def _duration_summary(df: pd.DataFrame, keys: list[str], count_col: str, name_cols: list[str]) -> pd.DataFrame:
    """nsys stats' duration summary: grouped by ``keys`` (shown as ``name_cols``), sorted by total time."""
    cols = [
        "Time (%)",
        "Total Time (ns)",
        count_col,
        "Avg (ns)",
        "Med (ns)",
        "Min (ns)",
        "Max (ns)",
        "StdDev (ns)",
        *name_cols,
    ]
    if df.empty:
        return pd.DataFrame(columns=cols)
    d = df.assign(_dur=(df["end"] - df["start"]).astype("int64"))
    g = d.groupby(keys, sort=False, dropna=False)["_dur"]
    out = pd.DataFrame(
        {
            "Total Time (ns)": g.sum(),
            count_col: g.count(),
            "Avg (ns)": g.mean(),
            "Med (ns)": g.median(),
            "Min (ns)": g.min(),
            "Max (ns)": g.max(),
            "StdDev (ns)": g.std(ddof=1).fillna(0.0),
        }
    )
    total = out["Total Time (ns)"].sum()
    out.insert(0, "Time (%)", out["Total Time (ns)"] / total * 100 if total else 0.0)
    out = out.reset_index().rename(columns=dict(zip(keys, name_cols)))
    out = out.sort_values(["Total Time (ns)", name_cols[-1]], ascending=[False, True]).reset_index(drop=True)
    return out[cols]


@dataclass
class Trace:
    """What ran: kernels, memory operations, CUDA API calls, torch ops, NVTX ranges, OS runtime calls, and meta
    (device name, SM count, backend and version, capture window)."""

    kernels: pd.DataFrame = field(default_factory=lambda: empty_frame("kernels"))
    memops: pd.DataFrame = field(default_factory=lambda: empty_frame("memops"))
    api: pd.DataFrame = field(default_factory=lambda: empty_frame("api"))
    ops: pd.DataFrame = field(default_factory=lambda: empty_frame("ops"))
    nvtx: pd.DataFrame = field(default_factory=lambda: empty_frame("nvtx"))
    osrt: pd.DataFrame = field(default_factory=lambda: empty_frame("osrt"))
    meta: dict[str, Any] = field(default_factory=dict)

    # --- nsys stats summaries ---------------------------------------------------------------------------------
    def kernel_summary(self) -> pd.DataFrame:
        """cuda_gpu_kern_sum: one row per kernel name."""
        return _duration_summary(self.kernels, ["name"], "Instances", ["Name"])

    def api_summary(self) -> pd.DataFrame:
        """cuda_api_sum: one row per CUDA runtime/driver API function."""
        return _duration_summary(self.api, ["name"], "Num Calls", ["Name"])

    def osrt_summary(self) -> pd.DataFrame:
        """osrt_sum: one row per OS runtime function (nsys captures only)."""
        return _duration_summary(self.osrt, ["name"], "Num Calls", ["Name"])

    def nvtx_summary(self) -> pd.DataFrame:
        """nvtx_sum: one row per range text and style (push/pop or start/end)."""
        nv = self.nvtx.assign(style=self.nvtx["style"].fillna("PushPop"))
        return _duration_summary(nv, ["style", "text"], "Instances", ["Style", "Range"])

    def memop_summary(self) -> pd.DataFrame:
        """cuda_gpu_mem_time_sum: one row per memory operation kind."""
        df = self.memops.assign(_op=self.memops["kind"].map(_nsys_memop_name))
        return _duration_summary(df, ["_op"], "Count", ["Operation"])

    def memop_size_summary(self) -> pd.DataFrame:
        """cuda_gpu_mem_size_sum: bytes moved per memory operation kind, in MB (10^6 bytes) as nsys prints them."""
        cols = ["Total (MB)", "Count", "Avg (MB)", "Med (MB)", "Min (MB)", "Max (MB)", "StdDev (MB)", "Operation"]
        if self.memops.empty:
            return pd.DataFrame(columns=cols)
        d = self.memops.assign(
            _op=self.memops["kind"].map(_nsys_memop_name), _mb=self.memops["bytes"].astype(float) / 1e6
        )
        g = d.groupby("_op", sort=False)["_mb"]
        out = pd.DataFrame(
            {
                "Total (MB)": g.sum(),
                "Count": g.count(),
                "Avg (MB)": g.mean(),
                "Med (MB)": g.median(),
                "Min (MB)": g.min(),
                "Max (MB)": g.max(),
                "StdDev (MB)": g.std(ddof=1).fillna(0.0),
            }
        )
        out["Operation"] = out.index
        out.index.name = None
        return out.sort_values(["Total (MB)", "Operation"], ascending=[False, True]).reset_index(drop=True)[cols]

    # --- derived figures --------------------------------------------------------------------------------------
    def gpu_intervals(self) -> pd.DataFrame:
        """Kernels and memory operations together: everything that occupies the GPU."""
        k = self.kernels[["start", "end"]]
        m = self.memops[["start", "end"]]
        return pd.concat([k, m], ignore_index=True) if not m.empty else k

    def gpu_busy_ns(self) -> int:
        iv = self.gpu_intervals()
        return union_ns(iv["start"].to_numpy(), iv["end"].to_numpy())

    def window(self) -> tuple[int, int]:
        """The capture window: meta's when given, else the span of everything recorded."""
        if "window" in self.meta:
            s, e = self.meta["window"]
            return int(s), int(e)
        spans = [df for df in (self.kernels, self.memops, self.api, self.ops, self.nvtx, self.osrt) if not df.empty]
        if not spans:
            return 0, 0
        return int(min(df["start"].min() for df in spans)), int(max(df["end"].max() for df in spans))

    def cell_window(self) -> tuple[int, int]:
        """The cell's own range (its NVTX / record_function range, named in meta['label']), extended to the end of
        the GPU work that ran after the host left the range (launches are asynchronous); else the whole window."""
        label = self.meta.get("label")
        if label and not self.nvtx.empty:
            r = self.nvtx[self.nvtx["text"].astype(str).str.endswith(str(label))]
            if not r.empty:
                start, end = int(r["start"].min()), int(r["end"].max())
                gpu = self.gpu_intervals()
                after = gpu[gpu["start"] >= start]
                if not after.empty:
                    end = max(end, int(after["end"].max()))
                return start, end
        return self.window()

    def gpu_span_ns(self) -> int:
        """First GPU activity start to last GPU activity end."""
        iv = self.gpu_intervals()
        if iv.empty:
            return 0
        return int(iv["end"].max() - iv["start"].min())

    # --- persistence ------------------------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(
            {
                "meta": self.meta,
                **{t: json.loads(getattr(self, t).to_json(orient="split", index=False)) for t in COLUMNS},
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Trace:
        data = json.loads(text)
        tables = {}
        for t in COLUMNS:
            d = data.get(t)
            tables[t] = frame(t, pd.DataFrame(d["data"], columns=d["columns"])) if d and d["data"] else empty_frame(t)
        return cls(meta=data.get("meta", {}), **tables)

    def __repr__(self) -> str:
        return (
            f"<Trace {self.meta.get('backend', '?')} on {self.meta.get('device', '?')}: {len(self.kernels)} kernels, "
            f"{len(self.memops)} memops, {len(self.api)} API calls, {len(self.ops)} ops, {len(self.nvtx)} ranges>"
        )


def _nsys_memop_name(kind: str) -> str:
    return {
        "HtoD": "[CUDA memcpy Host-to-Device]",
        "DtoH": "[CUDA memcpy Device-to-Host]",
        "DtoD": "[CUDA memcpy Device-to-Device]",
        "HtoH": "[CUDA memcpy Host-to-Host]",
        "PtoP": "[CUDA memcpy Peer-to-Peer]",
        "memset": "[CUDA memset]",
    }.get(str(kind), f"[CUDA {kind}]")
