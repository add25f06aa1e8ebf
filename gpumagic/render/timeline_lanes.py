"""The timeline's lanes: which events make which lane, top to bottom, before anything is drawn.

One lane per NVTX/range thread, CPU thread (torch ops), CUDA API thread and GPU stream; with
several processes or GPUs, the lanes of each rank in a group of their own (:func:`lane_groups`). A
lane holds its events as numbers and describes only the ones drawn (:class:`Lane`), and
:func:`bucket` merges a lane's events into time buckets past its glyph budget: a million kernels
never become a million rows of text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.finding import kernel_labels
from ..analysis.ranks import is_multi, processes
from ..kernels import decode
from ..trace import Trace, id_column
from ..trace.launching_ops import kernel_launch_apis

__all__ = ["MAX_DEPTH", "Lane", "bucket", "lane_groups", "lanes"]

#: Nesting levels a host lane draws (deeper ranges and ops share the last one).
MAX_DEPTH = 6


def _stream_key(value: object) -> tuple[int, float, str]:
    """Streams sort as numbers (7, 13, 17, 143), names after them."""
    s = str(value)
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*", s)
    return (0, float(m.group(1)), "") if m else (1, 0.0, s)


@dataclass
class Lane:
    """One lane's events as numbers (start, end, depth) and how to describe any of them: the text of
    an event (name, raw name, family, extra) is made only for the events that are drawn, never for a
    million."""

    start: np.ndarray
    end: np.ndarray
    depth: np.ndarray
    describe: Callable[[np.ndarray], pd.DataFrame]

    def __len__(self) -> int:
        return len(self.start)


def bucket(lane: Lane, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The events to draw: all of them up to ``limit``; beyond, one box per time bucket (``limit``
    buckets over the lane) and depth, spanning its events and standing for its longest one. (event
    index, start, end, count)."""
    n = len(lane)
    if n <= limit:
        return np.arange(n), lane.start, lane.end, np.ones(n, dtype=np.int64)
    t0 = int(lane.start.min())
    width = max(1, (int(lane.end.max()) - t0) // limit + 1)
    key = ((lane.start - t0) // width) * (MAX_DEPTH + 1) + lane.depth
    # events in start order on one level (a GPU stream, API calls) come grouped already; nested or
    # unordered ones are sorted by bucket, longest first
    ordered = not (key[1:] < key[:-1]).any()
    order = np.arange(n) if ordered else np.lexsort((lane.start - lane.end, key))
    k, start, end = key[order], lane.start[order], lane.end[order]
    first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    count = np.diff(np.r_[first, n])
    dur = end - start
    longest = np.repeat(np.maximum.reduceat(dur, first), count)
    # the first longest (ties: earlier)
    pick = np.minimum.reduceat(np.where(dur == longest, np.arange(n), n), first)
    return order[pick], np.minimum.reduceat(start, first), np.maximum.reduceat(end, first), count


def _groups(
    values: pd.Series, key: Callable[[Any], Any] | None = None
) -> list[tuple[Any, np.ndarray]]:
    """(value, row positions) for each distinct value, values in sorted order (by ``key``), rows in
    table order."""
    codes, uniques = pd.factorize(values)  # missing values (-1) belong to no lane
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
    found = [(uniques[i], order[bounds[i] : bounds[i + 1]]) for i in range(len(uniques))]
    return sorted(found, key=lambda vi: key(vi[0]) if key else vi[0])


def _ints(df: pd.DataFrame, col: str) -> np.ndarray:
    values: np.ndarray = df[col].to_numpy(dtype="int64")
    return values


def _host_lane(
    df: pd.DataFrame,
    rows: np.ndarray,
    name: str,
    family: str,
    extra: Callable[[pd.DataFrame], pd.Series],
    depth: bool,
) -> Lane:
    """A lane of host events (NVTX ranges, torch ops, API calls) from rows of ``df``."""
    g = df.iloc[rows]

    def describe(idx: np.ndarray) -> pd.DataFrame:
        e = g.iloc[idx]
        return pd.DataFrame(
            {
                "name": e[name].astype(str).to_numpy(),
                "raw": "",
                "family": family,
                "extra": extra(e).to_numpy(),
            }
        )

    d = np.minimum(_ints(g, "depth"), MAX_DEPTH) if depth else np.zeros(len(g), dtype=np.int64)
    return Lane(_ints(g, "start"), _ints(g, "end"), d, describe)


def _gpu_lanes(
    trace: Trace, k: pd.DataFrame, m: pd.DataFrame, prefix: str = "", by_device: bool = False
) -> list[tuple[str, str, Lane]]:
    """One lane per GPU stream (per GPU and stream with ``by_device``): its kernels and memory
    operations."""
    parts = [df for df in (k, m) if not df.empty]
    if not parts:
        return []
    both = pd.concat([df[["start", "end", "stream", "device"]] for df in parts], ignore_index=True)
    n_k = len(k)
    labels = kernel_labels(trace) if n_k else {}
    launches = kernel_launch_apis(trace)
    families = {n: decode(n, launches.get(n)).family for n in labels}

    def describe(idx: np.ndarray) -> pd.DataFrame:
        ki, mi = idx[idx < n_k], idx[idx >= n_k] - n_k
        out = []
        if len(ki):
            e = k.iloc[ki]
            names = e["name"].astype(object)
            grid = e["grid"].astype(object).fillna("?").astype(str)
            block = e["block"].astype(object).fillna("?").astype(str)
            out.append(
                pd.DataFrame(
                    {
                        "name": names.map(labels).to_numpy(),
                        "raw": names.astype(str).str.slice(0, 240).to_numpy(),
                        "family": names.map(families).to_numpy(),
                        "extra": ("grid " + grid + ", block " + block).to_numpy(),
                    },
                    index=np.flatnonzero(idx < n_k),
                )
            )
        if len(mi):
            e = m.iloc[mi]
            out.append(
                pd.DataFrame(
                    {
                        "name": e["kind"].astype(str).to_numpy(),
                        "raw": e["name"].astype(str).to_numpy(),
                        "family": "memop",
                        "extra": (e["bytes"].astype(str) + " bytes").to_numpy(),
                    },
                    index=np.flatnonzero(idx >= n_k),
                )
            )
        return pd.concat(out).sort_index().reset_index(drop=True)

    lanes = []
    start, end = _ints(both, "start"), _ints(both, "end")
    # by_device: one lane per (GPU, stream), the pair as one number, named and sorted through its
    # parts
    order: Callable[[Any], Any]
    named: Callable[[Any], str]
    if by_device:
        dev, devs = pd.factorize(both["device"].astype(object).fillna(-1))
        stream, streams = pd.factorize(both["stream"].astype(object).fillna(-1))
        key = pd.Series(dev.astype(np.int64) * (len(streams) + 1) + stream)
        pair = lambda v: (devs[v // (len(streams) + 1)], streams[v % (len(streams) + 1)])  # noqa: E731
        order = lambda v: (_stream_key(pair(v)[0]), _stream_key(pair(v)[1]))  # noqa: E731
        named = lambda v: f"{prefix}GPU {pair(v)[0]} \u00b7 stream {pair(v)[1]}"  # noqa: E731
    else:
        key, order = both["stream"].astype(object), _stream_key
        named = lambda v: f"{prefix}stream {v}" if prefix else f"GPU stream {v}"  # noqa: E731
    for value, rows in _groups(key, key=order):
        flat = np.zeros(len(rows), dtype=np.int64)
        lane = Lane(start[rows], end[rows], flat, partial(_describe_rows, describe, rows))
        lanes.append((named(value), "gpu", lane))
    return lanes


def _describe_rows(
    describe: Callable[[np.ndarray], pd.DataFrame], rows: np.ndarray, idx: np.ndarray
) -> pd.DataFrame:
    """``describe`` of a lane's events ``idx``, where the lane holds the ``rows`` of the table."""
    return describe(rows[idx])


def _host_lanes(
    nv: pd.DataFrame, ops: pd.DataFrame, api: pd.DataFrame, prefix: str
) -> list[tuple[str, str, Lane]]:
    """NVTX ranges, torch ops and CUDA API calls, one lane per thread each."""
    lanes: list[tuple[str, str, Lane]] = []
    for th, rows in _groups(nv["thread"]) if not nv.empty else ():
        lane = _host_lane(nv, rows, "text", "nvtx", lambda e: e["domain"].astype(str), depth=True)
        lanes.append((f"{prefix}ranges (thread {th})", "nvtx", lane))
    for th, rows in _groups(ops["thread"]) if not ops.empty else ():
        shapes = lambda e: e["shapes"].fillna("").astype(str).replace("nan", "")  # noqa: E731
        lane = _host_lane(ops, rows, "name", "ops", shapes, depth=True)
        lanes.append((f"{prefix}CPU ops (thread {th})", "ops", lane))
    for th, rows in _groups(api["thread"]) if not api.empty else ():
        corr = lambda e: "correlation " + e["correlation"].astype(str)  # noqa: E731
        lane = _host_lane(api, rows, "name", "api", corr, depth=False)
        lanes.append((f"{prefix}CUDA API (thread {th})", "api", lane))
    return lanes


def lane_groups(trace: Trace) -> list[tuple[str, list[tuple[str, str, Lane]]]]:
    """The lanes from top to bottom, in named groups: one group ("", NVTX ranges, torch ops and CUDA
    API calls per thread, then GPU streams) for a single process on one GPU; with several processes
    or GPUs, one group per rank, in rank order, named and each lane named after its rank ("rank 0
    \u00b7 stream 7"), then the host lanes of processes that ran no GPU work ("other processes")."""
    tables = {name: getattr(trace, name) for name in ("nvtx", "ops", "api", "kernels", "memops")}
    if not is_multi(trace):
        return [
            (
                "",
                _host_lanes(tables["nvtx"], tables["ops"], tables["api"], "")
                + _gpu_lanes(trace, *_gpu(tables)),
            )
        ]
    procs = processes(trace)
    pids = {
        name: id_column(df["pid"]) if "pid" in df.columns else np.full(len(df), -1, dtype=np.int64)
        for name, df in tables.items()
    }
    known = procs["pid"].to_numpy(dtype=np.int64)
    devices = trace.gpu_units()[1].groupby("pid")["device"].nunique()
    groups = []
    for pid, label in zip(known.tolist(), procs["label"]):
        mine = {name: df[pids[name] == pid] for name, df in tables.items()}
        # one process on several GPUs: lanes by GPU
        prefix = f"{label} \u00b7 " if len(known) > 1 else ""
        lanes = _host_lanes(mine["nvtx"], mine["ops"], mine["api"], prefix)
        lanes += _gpu_lanes(trace, *_gpu(mine), prefix, by_device=bool(devices.get(pid, 1) > 1))
        groups.append((str(label), lanes))
    rest = {name: df[~np.isin(pids[name], known)] for name, df in tables.items()}
    others = _host_lanes(rest["nvtx"], rest["ops"], rest["api"], "other processes \u00b7 ")
    return groups + ([("other processes", others)] if others else [])


def _gpu(tables: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame]:
    return tables["kernels"], tables["memops"]


def lanes(trace: Trace) -> list[tuple[str, str, Lane]]:
    """(label, kind, events) from top to bottom (:func:`_lane_groups`, flattened)."""
    return [lane for _, group in lane_groups(trace) for lane in group]
