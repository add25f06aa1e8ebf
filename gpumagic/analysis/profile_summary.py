"""What a diff needs of one run, and nothing more: a profile's summaries per rank, small enough to
keep and to save.

A diff compares two runs kernel by kernel; holding two million-kernel Traces to do it would cost
twice their tables. :func:`summarize` reduces a Trace to one row per kernel name per rank (calls,
time, the order it first ran in and the op that launched it where the capture says), one row per
launching op, per memory-operation kind, and per rank the figures a run is judged by (GPU busy, the
window and its idle part, host synchronisations, NCCL wait and transfer). It is JSON-able
(:meth:`ProfileSummary.to_dict`): the history keeps a profile's summaries, not its trace.

**Reconciled.** Per rank, GPU busy = kernel time + memory-operation time + ``overlap_ns`` (<= 0:
time when two of them ran at once, counted once in GPU busy). A diff's rows are the kernels, the
memory operations and that overlap, so they add up exactly to the difference in GPU busy time.

Where a reader can supply a big export's few needed columns without building its tables (``Narrow``:
the kernels' names, starts and ends, the host synchronisations, the first CUDA API call), the
summary is made from those.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..edges import JsonValue
from ..trace import Trace, id_column
from ..trace.intervals import union_by_group, union_ns
from ..trace.summaries import launching_op_rows
from .finding import api_names, kernel_facts
from .ranks import is_multi, processes, rank_figures
from .transfers import SYNC_APIS

__all__ = ["SYNC_APIS", "Narrow", "ProfileSummary", "summarize"]

#: The meta a diff states first when the two runs differ in it, and how it is named.
ENV_KEYS = {
    "device": "device",
    "compute_capability": "compute capability",
    "cuda_driver_version": "CUDA driver",
    "cuda": "CUDA",
    "torch": "torch",
    "backend": "capture",
    "nsys_version": "nsys",
}
_KERNEL_COLS = ["rank", "name", "calls", "ns", "first", "op", "shapes"]
_OP_COLS = ["rank", "op", "calls", "kernels", "ns"]
_MEMOP_COLS = ["rank", "kind", "count", "bytes", "ns"]
#: One row per module (``Trace.by_module``, tree order, the outside row last) of a run of one
#: process: its GPU time forward and backward, its children included.
_MODULE_COLS = ["rank", "module", "depth", "fwd_ns", "bwd_ns"]
_RANK_COLS = [
    "rank",
    "busy_ns",
    "wall_ns",
    "window",
    "kernel_ns",
    "memop_ns",
    "overlap_ns",
    "kernels",
]
_RANK_COLS += ["sync_calls", "sync_ns", "nccl_ns", "nccl_wait_ns"]


@dataclass(frozen=True)
class Narrow:
    """A big single-process, single-GPU export's few columns, read without its tables: each kernel's
    name (``codes`` into ``names``), start and end; the host synchronisations ((calls, ns) by name,
    or together); the first CUDA API call's start (None: none). The memory operations are few and
    come from the Trace."""

    codes: np.ndarray
    names: list[str]
    start: np.ndarray
    end: np.ndarray
    syncs: dict[str, tuple[int, int]]
    api_first: int | None


@dataclass
class ProfileSummary:
    """One run's summaries per rank (``rank``: "rank 0", "process 1", or "" for a run of one process
    and GPU).

    ``kernels``: rank, name, calls, ns, first (the place of its first launch among the rank's kernel
    names), op and shapes (of the op that launched most of its time; "" where not known). ``ops``:
    rank, op, calls (op calls that launched kernels), kernels, ns (their kernels' time). ``memops``:
    rank, kind, count, bytes, ns. ``ranks``: busy_ns, wall_ns and window (the analysis window),
    kernel_ns, memop_ns, overlap_ns, kernels, sync_calls, sync_ns, nccl_ns, nccl_wait_ns (-1: not
    known, one rank captured). ``env``: device, versions, capture backend, label, source."""

    env: dict[str, Any]
    ranks: pd.DataFrame
    kernels: pd.DataFrame
    ops: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_OP_COLS))
    memops: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_MEMOP_COLS))
    #: What the capture recorded (kernels, memops, api, ops, ...); ops absent: launching ops are not
    #: known.
    recorded: list[str] = field(default_factory=list)
    #: rank, module, depth, fwd_ns, bwd_ns: the by-module view's rows (empty where the trace has no
    #: module information, and for several processes).
    modules: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_MODULE_COLS))

    @property
    def busy_ns(self) -> int:
        return int(self.ranks["busy_ns"].sum())

    @property
    def ops_known(self) -> bool:
        return "ops" in self.recorded and not self.ops.empty

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form (:meth:`from_dict` reads it back)."""
        tables = {
            k: getattr(self, k).to_dict(orient="list")
            for k in ("ranks", "kernels", "ops", "memops", "modules")
        }
        return {"version": 1, "env": _plain(self.env), "recorded": list(self.recorded), **tables}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileSummary:
        cols = {
            "ranks": _RANK_COLS,
            "kernels": _KERNEL_COLS,
            "ops": _OP_COLS,
            "memops": _MEMOP_COLS,
            "modules": _MODULE_COLS,
        }
        tables = {
            k: pd.DataFrame(data.get(k) or {c: [] for c in c_}, columns=c_)
            for k, c_ in cols.items()
        }
        return cls(
            env=dict(data.get("env") or {}), recorded=list(data.get("recorded") or []), **tables
        )


def _plain(value: object) -> JsonValue:
    """Meta as JSON takes it: numbers, text, lists and dicts."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def _env(trace: Trace) -> dict[str, Any]:
    meta = trace.meta
    env = {k: meta.get(k) for k in ENV_KEYS if meta.get(k) is not None}
    for k in ("label", "source"):
        if meta.get(k):
            env[k] = meta[k] if isinstance(meta[k], str) else [str(s) for s in meta[k]]
    plain: dict[str, Any] = _plain(env)
    return plain


def summarize(trace: Trace, narrow: Narrow | None = None) -> ProfileSummary:
    """A Trace's summaries per rank (``narrow``: a big export's columns read without its tables, see
    :class:`Narrow`; used only for a trace of one process on one GPU without a cell label)."""
    if narrow is not None:
        return _from_narrow(trace, narrow)
    return trace.memo("diff.summary", lambda: _from_trace(trace))


# --- from a whole Trace
# ---------------------------------------------------------------------------------------------
def _from_trace(trace: Trace) -> ProfileSummary:
    multi = is_multi(trace)
    if multi:
        procs = processes(trace)
        labels = dict(zip(procs["pid"].astype(int), procs["label"]))
        order = list(procs["label"])
    else:
        labels, order = {}, [""]
    k = trace.kernels
    facts = kernel_facts(trace)
    kpid = id_column(k["pid"]) if len(k) else np.empty(0, np.int64)
    krank = _rank_index(kpid, labels, order)
    context = _launch_context(
        trace
    )  # one kernel-to-op sweep for both the kernel rows and the op rows
    kernels = _kernel_rows(facts.codes, facts.names, facts.durations, krank, order, context)
    m = trace.memops
    mrank = _rank_index(id_column(m["pid"]) if len(m) else np.empty(0, np.int64), labels, order)
    memops = _memop_rows(m, mrank, order)
    ranks = pd.DataFrame({"rank": order})
    ranks["busy_ns"] = _busy_by_rank(trace, labels, order)
    if multi:
        fig = (
            rank_figures(trace)
            .groupby("label", sort=False)
            .agg(wall_ns=("span_ns", "max"), window=("window", "first"))
        )
        ranks["wall_ns"] = [int(fig["wall_ns"].get(r, 0)) for r in order]
        ranks["window"] = [str(fig["window"].get(r, "cuda")) for r in order]
    else:
        f = trace.figures()
        ranks["wall_ns"], ranks["window"] = int(f["wall_ns"]), f["window"]
    ranks["kernel_ns"] = np.bincount(krank, weights=facts.durations, minlength=len(order)).astype(
        np.int64
    )
    ranks["memop_ns"] = [int(memops.loc[memops["rank"] == r, "ns"].sum()) for r in order]
    ranks["overlap_ns"] = ranks["busy_ns"] - ranks["kernel_ns"] - ranks["memop_ns"]
    ranks["kernels"] = np.bincount(krank, minlength=len(order)).astype(np.int64)
    calls, ns = _syncs(trace, labels, order)
    ranks["sync_calls"], ranks["sync_ns"] = calls, ns
    nccl = facts.where(lambda d: d.family == "nccl")
    ranks["nccl_ns"] = np.bincount(
        krank[nccl], weights=facts.durations[nccl], minlength=len(order)
    ).astype(np.int64)
    ranks["nccl_wait_ns"] = _nccl_waits(trace, krank, order) if multi else -1
    ops = _op_rows(context, facts.durations, krank, order)
    return ProfileSummary(
        _env(trace),
        ranks[_RANK_COLS],
        kernels,
        ops,
        memops,
        sorted(_recorded(trace)),
        _module_rows(trace) if not multi else pd.DataFrame(columns=_MODULE_COLS),
    )


def _module_rows(trace: Trace) -> pd.DataFrame:
    """The by-module rows of a run of one process (``Trace.by_module``), named as its view names
    them; none where the trace cannot tell modules apart."""
    if trace.ops.empty:
        return pd.DataFrame(columns=_MODULE_COLS)
    rows = trace.by_module()
    if rows.empty:
        return pd.DataFrame(columns=_MODULE_COLS)
    out = rows[["module", "depth", "fwd_ns", "bwd_ns"]].assign(rank="")
    return out[_MODULE_COLS].reset_index(drop=True)


def _recorded(trace: Trace) -> set[str]:
    """The kinds the capture recorded; "ops" only where it holds some (an nsys export records
    none)."""
    kinds = {
        kind for kind in ("kernels", "memops", "api", "ops", "nvtx", "osrt") if trace.recorded(kind)
    }
    return kinds if trace.rows("ops") else kinds - {"ops"}


def _rank_index(pid: np.ndarray, labels: dict[int, str], order: list[str]) -> np.ndarray:
    """Each row's place in ``order`` (0 for a single-rank trace)."""
    if not labels:
        return np.zeros(len(pid), dtype=np.int64)
    place = {p: order.index(lbl) for p, lbl in labels.items()}
    return np.array([place.get(int(p), 0) for p in pid], dtype=np.int64)


def _launch_context(trace: Trace) -> tuple[np.ndarray, list[str], list[str]] | None:
    """Per kernel row, the row of its launching op (-1: none), and each op row's name and input
    shapes; None where the capture recorded no ops (nsys)."""
    if trace.ops.empty or trace.kernels.empty:
        return None
    rows = launching_op_rows(trace.ops, trace.kernels, trace.api)
    shapes = ["" if s is None or s != s else str(s) for s in trace.ops["shapes"]]
    return rows, [str(n) for n in trace.ops["name"]], shapes


def _kernel_rows(
    codes: np.ndarray,
    names: list[str],
    durations: np.ndarray,
    rank: np.ndarray,
    order: list[str],
    context: tuple[np.ndarray, list[str], list[str]] | None,
) -> pd.DataFrame:
    """One row per (rank, kernel name): calls, ns, its first launch's place, and the op that
    launched most of it."""
    if not len(codes):
        return pd.DataFrame(columns=_KERNEL_COLS)
    n = max(len(names), 1)
    key = rank * n + codes if len(order) > 1 else np.asarray(codes, dtype=np.int64)
    calls_all = np.bincount(key, minlength=n * len(order))
    ns_all = np.bincount(key, weights=durations, minlength=n * len(order))
    uniq = pd.unique(
        key
    )  # in order of first appearance (kernels come in start order): no sort of the rows
    out = pd.DataFrame(
        {"rank": [order[i] for i in uniq // n], "name": [names[i] for i in uniq % n]}
    )
    out["calls"], out["ns"] = (
        calls_all[uniq].astype(np.int64),
        np.rint(ns_all[uniq]).astype(np.int64),
    )
    placed: dict[
        int, int
    ] = {}  # each kernel's place among its rank's kernels, in order of first launch
    first = []
    for r in (uniq // n).tolist():
        first.append(placed.get(r, 0))
        placed[r] = first[-1] + 1
    out["first"] = np.array(first, dtype=np.int64)
    out["op"], out["shapes"] = "", ""
    if context is not None:
        op_row, op_names, op_shapes = context
        launched = op_row >= 0
        if launched.any():
            place = np.full(n * len(order), -1, dtype=np.int64)
            place[uniq] = np.arange(len(uniq))
            inverse = place[key]
            # the op that launched most of each kernel's time: (kernel, op) sums, the largest per
            # kernel
            k, op = inverse[launched], op_row[launched]
            pairs, pair_of = np.unique(k * (len(op_names) + 1) + op, return_inverse=True)
            sums = np.bincount(pair_of.ravel(), weights=durations[launched])
            pk, pop = pairs // (len(op_names) + 1), pairs % (len(op_names) + 1)
            by = np.lexsort((-sums, pk))
            top = by[np.r_[True, pk[by][1:] != pk[by][:-1]]]
            out.loc[pk[top], "op"] = [op_names[i] for i in pop[top]]
            out.loc[pk[top], "shapes"] = [op_shapes[i] for i in pop[top]]
    return out.sort_values(["rank", "ns"], ascending=[True, False], kind="stable").reset_index(
        drop=True
    )


def _grouped(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys in order of first appearance, and each row's place among them (pandas'
    groupby with ``sort=False``, without its per-call cost: a profile is summarised on every
    ``%%gpuprofile``)."""
    place, uniq = pd.factorize(keys)  # codes follow first appearance
    return np.asarray(uniq), place.astype(np.int64)


def _op_rows(
    context: tuple[np.ndarray, list[str], list[str]] | None,
    durations: np.ndarray,
    rank: np.ndarray,
    order: list[str],
) -> pd.DataFrame:
    """Per rank and launching op name: op calls that launched kernels, kernels, their time; "(no
    op)" for kernels launched outside every op. Empty where the capture recorded no ops."""
    if context is None:
        return pd.DataFrame(columns=_OP_COLS)
    op_row, op_names, _ = context
    name_code, name_of = pd.factorize(np.array([*op_names, "(no op)"], dtype=object))
    code = name_code[np.where(op_row >= 0, op_row, len(op_names))]
    keys, group = _grouped(rank * len(name_of) + code)
    n = len(keys)
    # op calls: distinct launching op rows per group (kernels outside every op count as one, as
    # nunique counts -1)
    pairs = np.unique(np.stack([group, op_row]), axis=1)
    out = pd.DataFrame(
        {
            "rank": [order[i] for i in keys // len(name_of)],
            "op": [name_of[i] for i in keys % len(name_of)],
            "calls": np.bincount(pairs[0], minlength=n).astype(np.int64),
            "kernels": np.bincount(group, minlength=n).astype(np.int64),
            "ns": np.bincount(group, weights=durations, minlength=n).astype(np.int64),
        }
    )
    return out.sort_values(["rank", "ns"], ascending=[True, False], kind="stable").reset_index(
        drop=True
    )[_OP_COLS]


def _memop_rows(m: pd.DataFrame, rank: np.ndarray, order: list[str]) -> pd.DataFrame:
    if m.empty:
        return pd.DataFrame(columns=_MEMOP_COLS)
    kind_code, kinds = pd.factorize(m["kind"].astype(str).to_numpy())
    keys, group = _grouped(rank * len(kinds) + kind_code)
    n = len(keys)
    nbytes = pd.to_numeric(m["bytes"], errors="coerce").fillna(0).to_numpy(dtype=np.int64)
    ns = (m["end"] - m["start"]).to_numpy(dtype=np.int64)
    out = pd.DataFrame(
        {
            "rank": [order[i] for i in keys // len(kinds)],
            "kind": [kinds[i] for i in keys % len(kinds)],
            "count": np.bincount(group, minlength=n).astype(np.int64),
            "bytes": np.bincount(group, weights=nbytes, minlength=n).astype(np.int64),
            "ns": np.bincount(group, weights=ns, minlength=n).astype(np.int64),
        }
    )
    return out[_MEMOP_COLS]


def _busy_by_rank(trace: Trace, labels: dict[int, str], order: list[str]) -> list[int]:
    """GPU busy per rank: the union on each of its GPUs (overlap once), summed over them; equal to
    the Trace's GPU busy in total."""
    if not labels:
        return [trace.gpu_busy_ns()]
    codes, units = trace.gpu_units()
    starts, ends = trace._gpu_arrays()
    per_unit = union_by_group(codes, starts, ends, len(units))
    busy = [0] * len(order)
    for pid, ns in zip(units["pid"].astype(int), per_unit):
        busy[order.index(labels[pid])] += int(ns)
    return busy


def _syncs(trace: Trace, labels: dict[int, str], order: list[str]) -> tuple[list[int], list[int]]:
    """Host calls waiting for the GPU, per rank: (calls, ns)."""
    calls, ns = [0] * len(order), [0] * len(order)
    if not trace.recorded("api") or not trace.rows("api"):
        return calls, ns
    if not labels and "api" in getattr(
        trace, "_unread", ()
    ):  # a big export: its API summary is a narrow read
        s = trace.api_summary()
        s = s[s["Name"].map(_unversioned).isin(SYNC_APIS)]
        return [int(s["Num Calls"].sum())], [int(s["Total Time (ns)"].sum())]
    api = trace.api
    hit = api_names(trace).isin(SYNC_APIS).to_numpy()
    rank = _rank_index(id_column(api["pid"])[hit], labels, order)
    dur = (api["end"] - api["start"]).to_numpy(dtype=np.int64)[hit]
    return (
        np.bincount(rank, minlength=len(order)).astype(int).tolist(),
        np.bincount(rank, weights=dur, minlength=len(order)).astype(np.int64).tolist(),
    )


def _nccl_waits(trace: Trace, krank: np.ndarray, order: list[str]) -> list[int]:
    from .rank_kernels import nccl_waits

    waits = nccl_waits(trace)
    per_rank: list[int] = (
        np.bincount(krank, weights=waits, minlength=len(order)).astype(np.int64).tolist()
    )
    return per_rank


def _unversioned(name: object) -> str:
    return re.sub(r"_v\d+$", "", str(name))


# --- from a big export's narrow read
# --------------------------------------------------------------------------------
def _from_narrow(trace: Trace, nw: Narrow) -> ProfileSummary:
    durations = nw.end - nw.start
    kernels = _kernel_rows(nw.codes, nw.names, durations, np.zeros(0, dtype=np.int64), [""], None)
    m = trace.memops
    memops = _memop_rows(m, np.zeros(len(m), dtype=np.int64), [""])
    ms, me = m["start"].to_numpy(dtype=np.int64), m["end"].to_numpy(dtype=np.int64)
    if len(
        ms
        # the few copies merged into the kernels (in start order) where they start: no sort of a
        # million
    ):
        at = np.searchsorted(nw.start, ms, side="right")
        starts, ends = np.insert(nw.start, at, ms), np.insert(nw.end, at, me)
    else:
        starts, ends = nw.start, nw.end
    busy = union_ns(starts, ends) if len(starts) else 0
    first = int(starts.min()) if len(starts) else 0
    if nw.api_first is not None:
        first = min(first, nw.api_first)
    kernel_ns, memop_ns = int(durations.sum()), int(memops["ns"].sum()) if len(memops) else 0
    from ..kernels import decode

    nccl_names = np.array([decode(n).family == "nccl" for n in nw.names] or [False], dtype=bool)
    nccl = nccl_names[nw.codes] if len(nw.codes) else np.zeros(0, dtype=bool)
    ranks = pd.DataFrame(
        {
            "rank": [""],
            "busy_ns": [busy],
            "wall_ns": [int(ends.max()) - first if len(ends) else 0],
            "window": ["cuda"],
            "kernel_ns": [kernel_ns],
            "memop_ns": [memop_ns],
            "overlap_ns": [busy - kernel_ns - memop_ns],
            "kernels": [len(nw.codes)],
            "sync_calls": [sum(c for c, _ in nw.syncs.values())],
            "sync_ns": [sum(t for _, t in nw.syncs.values())],
            "nccl_ns": [int(durations[nccl].sum())],
            "nccl_wait_ns": [-1],
        }
    )
    return ProfileSummary(
        _env(trace), ranks, kernels, recorded=sorted(_recorded(trace)), memops=memops
    )
