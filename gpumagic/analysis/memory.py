"""Where the GPU memory went: allocated and reserved bytes over time, the peak, what was alive
there, by category.

Everything is counted from the allocator's history (a
:class:`~gpumagic.capture.memory.snapshot.SnapshotData`) and made to agree with the snapshot's final
state:

- **Allocated bytes** move where the allocator's counter moves (c10's CUDACachingAllocator): up by
  the block at ``alloc``, down at ``free_requested``. An entry names the request, the counter the
  block, so each request is rounded up to the allocator's 512-byte blocks; an allocation still alive
  at the end takes its block's own size from the final segments. What was already allocated when the
  history starts is read off the end state: the blocks in use at the end that the history never
  allocated, plus the blocks the history frees without having allocated them. The curve therefore
  starts at the true level and ends at the snapshot's own allocated total.
- **Reserved bytes** (memory the allocator holds from CUDA) move by
  ``segment_alloc``/``segment_free``; they start at the final segments' total less the history's net
  change.
- **The peak** is the exact maximum over every entry (never over the decimated samples drawn), with
  the allocations alive at that entry: each allocation is paired with the free of the same address
  that follows it.
- **Categories** (:data:`CATEGORIES`): each allocation gets exactly one, so the categories sum to
  the allocated bytes at every sample. From the kind of code on its stack (:mod:`.memory_sites`) and
  its lifetime: optimizer code makes *optimizer state* if the block outlives the history, else
  *temporaries*; backward code (the autograd engine) makes *gradients* if the block outlives its
  backward pass (it is still alive when code other than backward next allocates), else
  *temporaries*; forward code makes *activations* if the block is still alive when the next backward
  allocates (saved for backward) or, with no backward after it, at the end (a result kept), else
  *temporaries*; module construction makes *parameters*; the data loader makes *inputs*. Blocks
  allocated before the history take the category the names give their address (``names``:
  %%gpuprofile --memory names the parameters, gradients, buffers, optimizer state and tensors of
  the user's namespace, :mod:`gpumagic.capture.memory.names`; or ``known``, a plain address ->
  category map), else the one their recorded stack gives, else *unknown*. A history recorded
  without stacks makes every category *unknown* but what the names say.
- **Owners** (:mod:`.memory_owners`): each block's tensor name, module, source line and op, with the
  same rows in every breakdown for what nothing places; the **time axis** (:mod:`.memory_ranges`):
  phases, modules and ``record_function`` ranges from the history itself; the **estimates** of
  what would change the peak (:mod:`.memory_levers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .finding import Finding
from .memory_backward import name_backward
from .memory_findings import findings_of, format_bytes, repeated_allocations
from .memory_levers import levers_of
from .memory_owners import owners
from .memory_ranges import ranges_of, when
from .memory_sites import site_of

if TYPE_CHECKING:
    from ..capture.memory.names import MemoryNames
    from ..capture.memory.snapshot import SnapshotData

__all__ = ["CATEGORIES", "MemoryAnalysis", "analyze_memory", "block_bytes", "format_bytes"]

CATEGORIES = (
    "parameters",
    "optimizer state",
    "inputs",
    "activations",
    "gradients",
    "temporaries",
    "unknown",
)
_CAT = {c: i for i, c in enumerate(CATEGORIES)}
_ALLOC, _FREE, _SEG_ALLOC, _SEG_FREE, _OOM = 0, 1, 3, 4, 5
#: Samples drawn at most (each keeps its bucket's highest and lowest level); the exact peak is
#: always among them.
MAX_POINTS = 2000


def block_bytes(size: np.ndarray) -> np.ndarray:
    """The allocator's count for requests of ``size`` bytes: rounded up to 512, at least 512."""
    return np.maximum(512, -(-size // 512) * 512)


@dataclass
class MemoryAnalysis:
    """The memory of one recording. Levels are bytes; times milliseconds from the first entry (entry
    numbers when the snapshot has no times: ``has_times``).

    ``samples``: the drawn points (``time_ms``, ``allocated``, ``reserved``, one column per category
    summing to ``allocated``); ``peak_bytes``/``peak_time_ms``/``peak_reserved`` at the exact peak;
    ``live_at_peak``: one row per allocation alive there (``bytes``, ``category``, ``module``,
    ``name``, ``line``, ``op``, ``allocated_ms``, ``freed_ms``: NaN for "before the history" and
    "not freed"); ``oom``: the failed request (``bytes``, ``device_free``, ``time_ms``,
    ``allocated``, ``reserved``) or None, with ``live_at_oom``; ``live_at_end``: the same at the
    history's last entry; ``start_named``: how much of ``start_allocated`` the names placed;
    ``ranges``: what the cell was doing along the time axis (``lane``,
    ``label``, ``start_ms``, ``end_ms``: :mod:`.memory_ranges`); ``at_end``: allocated and reserved
    at the snapshot, ``empty_cache_bytes``: what ``torch.cuda.empty_cache()`` would hand back
    then."""

    samples: pd.DataFrame
    events: int
    peak_bytes: int
    peak_time_ms: float
    peak_reserved: int
    live_at_peak: pd.DataFrame
    start_allocated: int
    start_reserved: int
    at_end: dict[str, int]
    empty_cache_bytes: int
    category_at_peak: dict[str, int]
    oom: dict[str, Any] | None = None
    live_at_oom: pd.DataFrame | None = None
    live_at_end: pd.DataFrame = field(default_factory=pd.DataFrame)
    ranges: pd.DataFrame = field(default_factory=pd.DataFrame)
    start_named: int = 0
    repeats: pd.DataFrame = field(default_factory=pd.DataFrame)
    device_memory: int | None = None
    has_times: bool = True
    stacks_recorded: bool = True
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source: str = ""
    device: int = 0

    def by(self, column: str, at: str = "peak") -> pd.DataFrame:
        """The live allocations at the peak (or ``at="oom"``, ``at="end"``) grouped by ``column``
        ("category", "module", "name", "line", "op"): ``bytes``, ``count``, ``share`` of the
        allocated total, largest first. Each sums to the allocated bytes there; "line", "op" and
        "module" hold the blocks nothing places in the same rows, ``(before the recording)`` and
        ``(no Python stack)`` (:mod:`.memory_owners`; "module" keeps there only what no name
        places)."""
        live = {"oom": self.live_at_oom, "end": self.live_at_end}.get(at)
        live = self.live_at_peak if live is None else live
        if live.empty:
            return pd.DataFrame(columns=[column, "bytes", "count", "share"])
        g = live.groupby(column, sort=False)["bytes"].agg(["sum", "count"]).reset_index()
        g.columns = [column, "bytes", "count"]
        g = g.sort_values("bytes", ascending=False, kind="stable").reset_index(drop=True)
        total = int(live["bytes"].sum())
        g["share"] = g["bytes"] / total if total else 0.0
        return g


def _pairs(snap: SnapshotData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the history's alloc and free entries: (alloc rows, the row freeing each or -1, free rows
    with no alloc)."""
    rows = np.flatnonzero((snap.action == _ALLOC) | (snap.action == _FREE))
    order = rows[np.lexsort((rows, snap.addr[rows]))]
    a, act = snap.addr[order], snap.action[order]
    paired = np.zeros(len(order), bool)
    if len(order) > 1:
        paired[1:] = (a[1:] == a[:-1]) & (act[1:] == _FREE) & (act[:-1] == _ALLOC)
    free_of = np.full(len(snap.action), -1, np.int64)
    free_of[order[:-1][paired[1:]]] = order[1:][paired[1:]]
    allocs = np.flatnonzero(snap.action == _ALLOC)
    orphan = order[(act == _FREE) & ~paired]
    return allocs, free_of[allocs], np.sort(orphan)


def _next_kind(alloc_rows: np.ndarray, is_kind: np.ndarray, n: int) -> np.ndarray:
    """For each alloc (in row order) the row of the next alloc after it whose ``is_kind`` is set (n
    if none)."""
    nxt = np.where(is_kind, alloc_rows, n)
    out = np.minimum.accumulate(nxt[::-1])[::-1]
    return np.append(out[1:], n)


def _categories(kinds: np.ndarray, rows: np.ndarray, ends: np.ndarray, n: int) -> np.ndarray:
    """One category code per history allocation from its kind of code and its lifetime (the module's
    rules)."""
    back = kinds == "backward"
    next_other = _next_kind(rows, ~back, n)
    next_back = _next_kind(rows, back, n)
    alive_end = ends >= n
    cat = np.full(len(rows), _CAT["temporaries"], np.int8)
    cat[(kinds == "optimizer") & alive_end] = _CAT["optimizer state"]
    cat[back & (ends > next_other)] = _CAT["gradients"]
    fwd = kinds == "forward"
    cat[fwd & (next_back < n) & (ends > next_back)] = _CAT["activations"]
    cat[fwd & (next_back >= n) & alive_end] = _CAT["activations"]
    cat[kinds == "parameters"] = _CAT["parameters"]
    cat[kinds == "inputs"] = _CAT["inputs"]
    return cat


def _sample_rows(level: np.ndarray, must: list[int], max_points: int) -> np.ndarray:
    """Rows to draw: all of them if few, else each bucket's highest and lowest, plus ``must`` (the
    peak, the oom)."""
    n = len(level)
    if n <= max_points:
        return np.arange(n)
    buckets = max_points // 2
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    starts = edges[:-1]
    hi = np.maximum.reduceat(level, starts)
    lo = np.minimum.reduceat(level, starts)
    # the first row of each bucket at its high and its low
    pos = np.arange(n)
    bucket = np.repeat(np.arange(buckets), np.diff(edges))
    is_hi = level == hi[bucket]
    is_lo = level == lo[bucket]
    first_hi = np.full(buckets, n, np.int64)
    first_lo = np.full(buckets, n, np.int64)
    np.minimum.at(first_hi, bucket[is_hi], pos[is_hi])
    np.minimum.at(first_lo, bucket[is_lo], pos[is_lo])
    rows = np.concatenate([first_hi, first_lo, [0, n - 1], np.array(must, np.int64)])
    return np.unique(rows[(rows >= 0) & (rows < n)])


#: Said where names come without the models' module tree (a snapshot named after the fact).
NO_MODULE_TREE = (
    "The names came without the models' module tree: the blocks a module's forward made are not "
    "put on modules and show as '(outside any module)' unless a name places them "
    "(%%gpuprofile --memory takes it from the live models; "
    "MemoryNames(..., modules=module_tree(ns)) carries it)."
)


def analyze_memory(
    snap: SnapshotData,
    device_memory: int | None = None,
    known: Mapping[int, str] | None = None,
    max_points: int = MAX_POINTS,
    failed_request: int | None = None,
    names: MemoryNames | None = None,
) -> MemoryAnalysis:
    """The :class:`MemoryAnalysis` of one snapshot. ``device_memory``: the device's total bytes (the
    snapshot does not say); ``known``: categories of blocks allocated before the history, by
    address; ``max_points``: samples; ``failed_request``: the bytes of an allocation that raised
    ``OutOfMemoryError`` where the history holds no ``oom`` entry for it (a request larger than the
    device is refused before the allocator records one): the failure is then placed at the history's
    end, with what was alive there. ``names``: what the user's names said at the recording's start
    and end (``capture.memory.names``): blocks from before the recording take their category, name
    and module from them, blocks still alive at the end their name, and the blocks a module's
    forward made that module."""
    n = len(snap)
    notes = list(snap.notes)
    if names is not None and not len(names.modules) and (len(names.start) or len(names.end)):
        notes.append(NO_MODULE_TREE)
    sites = [site_of(snap.stack_frames(i)) for i in range(len(snap.stacks))]
    # index -1: an allocation with no Python frames, made by the autograd engine's thread
    site_kind = np.array([s.kind for s in sites] + ["backward"], dtype=object)
    blocks = snap.blocks
    final_alloc = blocks["allocated"]
    fb_addr, fb_size, fb_stack = (
        blocks["addr"][final_alloc],
        blocks["size"][final_alloc],
        blocks["stack"][final_alloc],
    )

    allocs, ends, orphans = _pairs(snap)
    ends = np.where(ends < 0, n, ends)
    sizes = block_bytes(snap.size[allocs])
    live_end = ends >= n
    final_size = dict(zip(fb_addr.tolist(), fb_size.tolist(), strict=True))
    if live_end.any():  # alive at the end: the block's own size, as the allocator counts it
        idx = np.flatnonzero(live_end)
        sizes[idx] = [
            final_size.get(a, s)
            for a, s in zip(snap.addr[allocs[idx]].tolist(), sizes[idx].tolist())
        ]
    stacked = snap.stack[allocs]
    stacks_recorded = bool(n == 0 or (stacked >= 0).any() or len(allocs) == 0)
    if not stacks_recorded:
        notes.append(
            "The history was recorded without stack traces: every allocation's category is unknown."
        )
    kinds = site_kind[stacked]
    cats = (
        _categories(kinds, allocs, ends, n)
        if stacks_recorded
        else np.full(len(allocs), _CAT["unknown"], np.int8)
    )

    # blocks allocated before the history: freed in it without an alloc, or alive at the end and
    # never allocated
    alive_addrs = set(snap.addr[allocs[live_end]].tolist())
    before_end = np.array([a not in alive_addrs for a in fb_addr.tolist()], bool)
    pre_addr = np.concatenate([snap.addr[orphans], fb_addr[before_end]])
    pre_size = np.concatenate([block_bytes(snap.size[orphans]), fb_size[before_end]])
    pre_end = np.concatenate([orphans, np.full(int(before_end.sum()), n, np.int64)])
    pre_stack = np.concatenate([np.full(len(orphans), -1, np.int32), fb_stack[before_end]])
    known = known or {}
    own = owners(snap, sites, stacks_recorded, allocs, live_end, pre_addr, pre_stack, names)
    if not stacks_recorded:  # the names, where they know, say what the stacks cannot
        named = own.hist_cat != ""
        cats[named] = [_CAT[c] for c in own.hist_cat[named]]
    pre_cat = np.empty(len(pre_addr), np.int8)
    for i, (a, s) in enumerate(zip(pre_addr.tolist(), pre_stack.tolist(), strict=True)):
        name = known.get(a) or own.pre_cat[i] or None
        if name is None and s >= 0:
            kind = sites[s].kind
            name = {
                "parameters": "parameters",
                "optimizer": "optimizer state",
                "inputs": "inputs",
            }.get(kind)
            name = name or {"backward": "gradients", "forward": "activations"}.get(kind)
        pre_cat[i] = _CAT.get(name or "unknown", _CAT["unknown"])
    start_allocated = int(pre_size.sum())

    # per-entry change of allocated bytes, and its category
    delta = np.zeros(n, np.int64)
    ev_cat = np.full(n, _CAT["unknown"], np.int8)
    delta[allocs] = sizes
    ev_cat[allocs] = cats
    freed = ends < n
    delta[ends[freed]] -= sizes[freed]
    ev_cat[ends[freed]] = cats[freed]
    pre_freed = pre_end < n
    delta[pre_end[pre_freed]] -= pre_size[pre_freed]
    ev_cat[pre_end[pre_freed]] = pre_cat[pre_freed]
    level = start_allocated + np.cumsum(delta)

    seg = np.zeros(n, np.int64)
    is_sa, is_sf = snap.action == _SEG_ALLOC, snap.action == _SEG_FREE
    seg[is_sa], seg[is_sf] = snap.size[is_sa], -snap.size[is_sf]
    end_reserved = int(snap.segments["total"].sum())
    start_reserved = end_reserved - int(seg.sum())
    if start_reserved < 0:
        notes.append(
            "The history's segment entries do not add up to the final segments: reserved "
            "memory is drawn "
            "from the history alone, starting at zero."
        )
        start_reserved = 0
    reserved = start_reserved + np.cumsum(seg)

    end_allocated = int(fb_size.sum())
    if n and int(level[-1]) != end_allocated:
        notes.append(
            f"The history ends at {format_bytes(int(level[-1]))} allocated, the snapshot's "
            f"blocks at "
            f"{format_bytes(end_allocated)}: some entries are missing (a full history buffer "
            f"drops the oldest)."
        )

    peak = int(np.argmax(level)) if n else -1
    peak_bytes = int(level[peak]) if n else start_allocated
    t0 = int(snap.time_us[0]) if n else 0
    t_ms = (snap.time_us - t0) / 1000.0 if snap.has_times else snap.time_us.astype(float)

    ranges = pd.DataFrame()
    if n and snap.has_times:
        notes_ms = [((a - t0) / 1000.0, (b - t0) / 1000.0) for _, a, b in snap.annotations]
        ranges = ranges_of(
            t_ms[allocs],
            kinds if stacks_recorded else np.full(len(allocs), "", object),
            own.stack_module,
            own.grad_module,
            [(name, a, b) for (name, _, _), (a, b) in zip(snap.annotations, notes_ms)],
            float(t_ms[-1]),
        )
        users = [s.users for s in sites] + [()]
        own, ranges = name_backward(own, ranges, t_ms[allocs], kinds, stacked, users, sizes)

    def live_at(row: int) -> pd.DataFrame:
        in_hist = (allocs <= row) & (ends > row)
        in_pre = pre_end > row

        def both(h: np.ndarray, p: np.ndarray) -> np.ndarray:
            return np.concatenate([h[in_hist], p[in_pre]])

        return pd.DataFrame(
            {
                "bytes": both(sizes, pre_size),
                "category": [CATEGORIES[c] for c in both(cats, pre_cat)],
                "module": both(own.hist_module, own.pre_module),
                "name": both(own.hist_name, own.pre_name),
                "line": both(own.hist_line, own.pre_line),
                "op": both(own.hist_op, own.pre_op),
                "allocated_ms": np.concatenate(
                    [t_ms[allocs[in_hist]], np.full(int(in_pre.sum()), np.nan)]
                ),
                "freed_ms": np.concatenate(
                    [_time_or_nan(t_ms, ends[in_hist], n), _time_or_nan(t_ms, pre_end[in_pre], n)]
                ),
            }
        ).sort_values("bytes", ascending=False, kind="stable", ignore_index=True)

    live_peak = live_at(peak) if n else live_at(-1)
    live_last = live_at(n - 1) if n else live_peak
    oom_rows = np.flatnonzero(snap.action == _OOM)
    oom = live_oom = None
    if len(oom_rows):
        r = int(oom_rows[-1])
        oom = {
            "row": r,
            "bytes": int(snap.size[r]),
            "device_free": int(snap.device_free.get(r, 0)),
            "time_ms": float(t_ms[r]),
            "allocated": int(level[r]),
            "reserved": int(reserved[r]),
            "count": len(oom_rows),
        }
        live_oom = live_at(r)
    elif (
        failed_request is not None
    ):  # at the last entry; with none (its one allocation failed), at the start
        r = n - 1
        at = (
            (float(t_ms[r]), int(level[r]), int(reserved[r]))
            if n
            else (0.0, start_allocated, start_reserved)
        )
        oom = {
            "row": r,
            "bytes": int(failed_request),
            "device_free": 0,
            "time_ms": at[0],
            "allocated": at[1],
        }
        oom |= {"reserved": at[2], "count": 1, "from_error": True}
        live_oom = live_at(r)

    rows = (
        _sample_rows(level, [peak] + ([oom["row"]] if oom else []), max_points)
        if n
        else np.array([], int)
    )
    samples = pd.DataFrame(
        {"time_ms": t_ms[rows], "allocated": level[rows], "reserved": reserved[rows]}
    )
    start_cat = np.bincount(pre_cat, weights=pre_size, minlength=len(CATEGORIES)).astype(np.int64)
    for c, name in enumerate(CATEGORIES):
        d = np.where(ev_cat == c, delta, 0)
        samples[name] = start_cat[c] + np.cumsum(d)[rows] if n else []
    cat_peak = {
        c: int(live_peak.loc[live_peak["category"] == c, "bytes"].sum()) for c in CATEGORIES
    }

    seg = snap.segments
    empty = ~seg["expandable"] & (seg["allocated"] == 0) & (seg["active"] == 0)
    result = MemoryAnalysis(
        samples=samples,
        events=n,
        peak_bytes=peak_bytes,
        peak_time_ms=float(t_ms[peak]) if n else 0.0,
        peak_reserved=int(reserved[peak]) if n else start_reserved,
        live_at_peak=live_peak,
        start_allocated=start_allocated,
        start_reserved=start_reserved,
        at_end={"allocated": end_allocated, "reserved": end_reserved},
        empty_cache_bytes=int(seg["total"][empty].sum()),
        category_at_peak=cat_peak,
        oom=oom,
        live_at_oom=live_oom,
        live_at_end=live_last,
        start_named=int(pre_size[own.pre_name != ""].sum()),
        device_memory=device_memory,
        has_times=snap.has_times,
        stacks_recorded=stacks_recorded,
        notes=notes,
        source=snap.source,
        device=snap.device,
        ranges=ranges,
    )
    line_of = np.array([s.line for s in sites] + [""], dtype=object)
    op_of = np.array([s.op for s in sites] + [""], dtype=object)
    temp = cats == _CAT["temporaries"]
    result.repeats = repeated_allocations(
        line_of[stacked][temp], op_of[stacked][temp], sizes[temp], allocs[temp], ends[temp]
    )
    result.findings = findings_of(result) + _when(result) + levers_of(result, names)
    return result


def _when(m: MemoryAnalysis) -> list[Finding]:
    """Where the peak falls on the time axis: the phase, the module, the innermost range."""
    at = when(m.ranges, m.peak_time_ms)
    if not at:
        return []
    parts = [f"in {at['phase']}"] if "phase" in at else []
    parts += [f"in {at['module']}"] if "module" in at else []
    parts += [f"inside {at['annotation']!r}"] if "annotation" in at else []
    return [
        Finding(
            "memory_when",
            "info",
            f"The peak ({format_bytes(m.peak_bytes)} at {m.peak_time_ms:.1f} ms) falls "
            + ", ".join(parts)
            + ".",
            dict(at),
        )
    ]


def _time_or_nan(t_ms: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    out = np.full(len(rows), np.nan)
    ok = rows < n
    out[ok] = t_ms[rows[ok]]
    return out
