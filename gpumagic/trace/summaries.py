"""The summary tables of a Trace, as functions of its DataFrames: what ``nsys stats`` reports, and
the op table.

They use the definitions and column names of ``nsys stats`` (cuda_gpu_kern_sum, cuda_api_sum,
nvtx_sum, osrt_sum, cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum), so a number here can be checked
against the tool people already trust: Time (%) of the summed total, Total/Avg/Med/Min/Max, StdDev
as the *sample* standard deviation (0 for one instance), grouped by full name, sorted by total time.
``Trace`` calls them once and keeps the answer.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "duration_summary",
    "group_codes",
    "grouped_durations",
    "mark_not_recorded",
    "memop_size_summary",
    "not_recorded",
    "nsys_memop_name",
    "op_summary",
]


#: The ``attrs`` key under which a summary carries the sentence that its capture did not record what
#: it counts.
NOT_RECORDED = "not_recorded"


def mark_not_recorded(df: pd.DataFrame, sentence: str) -> pd.DataFrame:
    """``df`` carrying ``sentence`` (the capture did not record what it summarises, and how to
    record it): where it is empty it is unknown, not zero, and a table of it says so instead of "0
    calls"."""
    df.attrs[NOT_RECORDED] = sentence
    return df


def not_recorded(df: pd.DataFrame) -> str | None:
    """The sentence a summary carries where its capture did not record what it summarises; else
    None."""
    return df.attrs.get(NOT_RECORDED) if df is not None else None


def duration_summary(
    df: pd.DataFrame, keys: list[str], count_col: str, name_cols: list[str]
) -> pd.DataFrame:
    """nsys stats' duration summary: grouped by ``keys`` (shown as ``name_cols``), sorted by total
    time."""
    if df.empty:
        return grouped_durations(
            np.empty(0, np.int64), np.empty(0, np.int64), [], count_col, name_cols
        )
    codes, names = group_codes(df, keys)
    dur = df["end"].to_numpy(dtype="int64") - df["start"].to_numpy(dtype="int64")
    return grouped_durations(codes, dur, names, count_col, name_cols)


def group_codes(df: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, list[Any]]:
    """Each row's group number (0..n-1, by first appearance; missing names form a group) and each
    group's key values: one column of names per key. A categorical column is grouped by its codes,
    without touching a string."""
    if len(keys) == 1:
        col = df[keys[0]]
        if isinstance(col.dtype, pd.CategoricalDtype) and not (col.cat.codes.to_numpy() < 0).any():
            codes = col.cat.codes.to_numpy()
            used = np.flatnonzero(np.bincount(codes, minlength=len(col.cat.categories)))
            lut = np.full(len(col.cat.categories), -1, dtype=np.int64)
            lut[used] = np.arange(len(used))
            return lut[codes], [np.asarray(col.cat.categories, dtype=object)[used]]
        codes, uniques = pd.factorize(col, use_na_sentinel=False)
        return codes.astype(np.int64, copy=False), [np.asarray(uniques, dtype=object)]
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(df[keys]), use_na_sentinel=False)
    return codes.astype(np.int64, copy=False), [
        np.asarray(uniques.get_level_values(i), dtype=object) for i in range(len(keys))
    ]


def grouped_durations(
    codes: np.ndarray, dur: np.ndarray, names: list[Any], count_col: str, name_cols: list[str]
) -> pd.DataFrame:
    """The duration summary of rows given as integers: ``codes[i]`` is row i's group (0..n-1, every
    group present), ``dur[i]`` its duration in ns, ``names`` one sequence per name column with each
    group's name. One sort on (group, duration) gives every statistic, the medians included, in
    numpy: no per-row Python, whatever the size.
    """
    cols = [
        "Time (%)",
        "Total Time (ns)",
        count_col,
        "Avg (ns)",
        "Med (ns)",
        "Min (ns)",
        "Max (ns)",
        "StdDev (ns)",
    ]
    if not len(codes):
        return pd.DataFrame(columns=[*cols, *name_cols])
    codes = np.asarray(codes, dtype=np.int64)
    dur = np.asarray(dur, dtype=np.int64)
    n = len(names[0])
    d = _sorted_by_group(codes, dur, n)
    count = np.bincount(codes, minlength=n)
    last = np.cumsum(count) - 1
    first = last - count + 1
    total = np.add.reduceat(d, first)
    mean = total / count
    mid = first + (count - 1) // 2
    median = (d[mid] + d[first + count // 2]) / 2  # the middle one, or the mean of the middle two
    dev = d - np.repeat(mean, count)
    var = np.add.reduceat(dev * dev, first) / np.maximum(count - 1, 1)
    out = pd.DataFrame(
        {
            "Total Time (ns)": total,
            count_col: count,
            "Avg (ns)": mean,
            "Med (ns)": median,
            "Min (ns)": d[first],
            "Max (ns)": d[last],
            "StdDev (ns)": np.where(count > 1, np.sqrt(var), 0.0),
        }
    )
    grand = int(total.sum())
    out.insert(0, "Time (%)", out["Total Time (ns)"] / grand * 100 if grand else 0.0)
    for col, values in zip(name_cols, names):
        out[col] = pd.Series(list(values))
    out = out.sort_values(
        ["Total Time (ns)", name_cols[-1]], ascending=[False, True], kind="stable"
    )
    return out.reset_index(drop=True)[[*cols, *name_cols]]


def _sorted_by_group(codes: np.ndarray, dur: np.ndarray, n: int) -> np.ndarray:
    """The durations sorted by (group, duration). Group and duration packed into one int64 and
    sorted where they fit (the usual case: several times faster than a lexsort), else a lexsort."""
    lo = int(dur.min())
    bits = max((int(dur.max()) - lo).bit_length(), 1)
    if max(n - 1, 1).bit_length() + bits <= 62:
        key = (codes << bits) | (dur - lo)
        key.sort()
        return np.asarray((key & ((1 << bits) - 1)) + lo)
    return np.asarray(dur[np.lexsort((dur, codes))])


def memop_size_summary(memops: pd.DataFrame) -> pd.DataFrame:
    """cuda_gpu_mem_size_sum: bytes moved per memory operation kind, in MB (10^6 bytes) as nsys
    prints them. Bytes a trace does not give (NaN: ROCm's Kineto copies) are unknown: a kind with
    none known has no total (NaN, shown empty), never 0 MB; Count counts every operation."""
    cols = [
        "Total (MB)",
        "Count",
        "Avg (MB)",
        "Med (MB)",
        "Min (MB)",
        "Max (MB)",
        "StdDev (MB)",
        "Operation",
    ]
    if memops.empty:
        return pd.DataFrame(columns=cols)
    mb = pd.to_numeric(memops["bytes"], errors="coerce").astype(float) / 1e6
    d = memops.assign(_op=memops["kind"].map(nsys_memop_name), _mb=mb.where(mb >= 0))
    g = d.groupby("_op", sort=False)["_mb"]
    out = pd.DataFrame(
        {
            "Total (MB)": g.sum(min_count=1),
            "Count": g.size(),
            "Avg (MB)": g.mean(),
            "Med (MB)": g.median(),
            "Min (MB)": g.min(),
            "Max (MB)": g.max(),
            "StdDev (MB)": g.std(ddof=1).fillna(0.0),
        }
    )
    out["Operation"] = out.index
    out.index.name = None
    return out.sort_values(["Total (MB)", "Operation"], ascending=[False, True]).reset_index(
        drop=True
    )[cols]


def launching_op_rows(ops: pd.DataFrame, kernels: pd.DataFrame, api: pd.DataFrame) -> np.ndarray:
    """Per kernel row, the position in ``ops`` of the innermost op that enclosed its launch (kernel
    -> launching API call by correlation -> innermost op enclosing that call on the same thread); -1
    where there is none. An op that ends when the call starts does not enclose it. One sweep per
    thread: O(n log n)."""
    out = np.full(len(kernels), -1, dtype=np.int64)
    if kernels.empty or api.empty or ops.empty:
        return out
    launch = api.dropna(subset=["correlation"]).drop_duplicates("correlation")
    order = ops.assign(_row=np.arange(len(ops))).sort_values(
        ["thread", "start", "end"], ascending=[True, True, False]
    )
    op_of_corr: dict[int, int] = {}
    threads = order["thread"].to_numpy()
    bounds = np.flatnonzero(np.r_[True, threads[1:] != threads[:-1], True])
    for lo, hi in pairwise(bounds):
        part = order.iloc[lo:hi]
        calls = launch[launch["thread"] == threads[lo]].sort_values("start")
        starts, ends, rows = (part[c].to_numpy() for c in ("start", "end", "_row"))
        stack: list[int] = []
        i = 0
        for corr, t in zip(calls["correlation"].to_numpy(), calls["start"].to_numpy()):
            while i < len(starts) and starts[i] <= t:
                while stack and ends[stack[-1]] <= starts[i]:
                    stack.pop()
                stack.append(i)
                i += 1
            while stack and ends[stack[-1]] <= t:
                stack.pop()
            if stack:
                op_of_corr[int(corr)] = int(rows[stack[-1]])
    for j, c in enumerate(kernels["correlation"].to_numpy()):
        if c == c:  # not NaN
            out[j] = op_of_corr.get(int(c), -1)
    return out


def op_summary(ops: pd.DataFrame, kernels: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """Torch ops aggregated by name: calls, CPU total, self CPU (minus children), and the GPU time
    of the kernels they launched (:func:`launching_op_rows`). Sorted by self CPU, the column that
    shows host overhead. One sweep per thread: O(n log n)."""
    cols = ["Name", "Calls", "CPU total (ns)", "Self CPU (ns)", "GPU (ns)", "Input shapes"]
    if ops.empty:
        return pd.DataFrame(columns=cols)
    ops = ops.sort_values(["thread", "start", "end"], ascending=[True, True, False]).reset_index(
        drop=True
    )
    start = ops["start"].to_numpy(dtype="int64")
    end = ops["end"].to_numpy(dtype="int64")
    dur = end - start
    child = np.zeros(len(ops), dtype="int64")
    threads = ops["thread"].to_numpy()
    bounds = np.flatnonzero(np.r_[True, threads[1:] != threads[:-1], True])
    for lo, hi in pairwise(bounds):
        stack: list[int] = []
        for i in range(lo, hi):
            while stack and end[stack[-1]] <= start[i]:
                stack.pop()
            if stack:
                child[stack[-1]] += dur[i]
            stack.append(i)
    launched = launching_op_rows(ops, kernels, api)
    kdur = (
        (kernels["end"] - kernels["start"]).to_numpy(dtype="int64")
        if not kernels.empty
        else np.empty(0, "int64")
    )
    seen = launched >= 0
    gpu = np.bincount(launched[seen], weights=kdur[seen], minlength=len(ops)).astype("int64")
    df = pd.DataFrame(
        {"Name": ops["name"], "dur": dur, "self": dur - child, "gpu": gpu, "shapes": ops["shapes"]}
    )
    g = df.groupby("Name", sort=False)
    out = pd.DataFrame(
        {
            "Calls": g.size(),
            "CPU total (ns)": g["dur"].sum(),
            "Self CPU (ns)": g["self"].sum(),
            "GPU (ns)": g["gpu"].sum(),
            "Input shapes": g["shapes"].first().fillna(""),
        }
    )
    out["Name"] = out.index
    out.index.name = None
    return out.sort_values("Self CPU (ns)", ascending=False).reset_index(drop=True)[cols]


def nsys_memop_name(kind: str) -> str:
    return {
        "HtoD": "[CUDA memcpy Host-to-Device]",
        "DtoH": "[CUDA memcpy Device-to-Host]",
        "DtoD": "[CUDA memcpy Device-to-Device]",
        "HtoH": "[CUDA memcpy Host-to-Host]",
        "PtoP": "[CUDA memcpy Peer-to-Peer]",
        "memset": "[CUDA memset]",
    }.get(str(kind), f"[CUDA {kind}]")
