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

from ..capture.memory.snapshot import OOM
from .finding import Finding
from .memory_backward import name_backward
from .memory_findings import findings_of, format_bytes, repeated_allocations
from .memory_history import (
    CATEGORIES,
    CATEGORY_CODE,
    Allocations,
    BlocksBefore,
    Levels,
    Live,
    allocations,
    block_bytes,
    blocks_before,
    categories_before,
    levels_of,
    pair_allocations,
)
from .memory_levers import levers_of
from .memory_owners import Owners, owners
from .memory_ranges import ranges_of, when
from .memory_sites import Site, site_of

if TYPE_CHECKING:
    from ..capture.memory.names import MemoryNames
    from ..capture.memory.snapshot import SnapshotData

__all__ = ["CATEGORIES", "MemoryAnalysis", "analyze_memory", "block_bytes", "format_bytes"]

#: Samples drawn at most (each keeps its bucket's highest and lowest level); the exact peak is
#: always among them.
MAX_POINTS = 2000


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
_NO_STACKS = (
    "The history was recorded without stack traces: every allocation's category is unknown."
)
_RESERVED_FROM_ZERO = (
    "The history's segment entries do not add up to the final segments: reserved memory is drawn "
    "from the history alone, starting at zero."
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
    sites = [site_of(snap.stack_frames(i)) for i in range(len(snap.stacks))]
    rows, ends, orphans = pair_allocations(snap)
    hist = allocations(snap, sites, rows, np.where(ends < 0, n, ends))
    before = blocks_before(snap, hist, orphans)
    alive_at_end = hist.ends >= n
    own = owners(
        snap,
        sites,
        hist.stacks_recorded,
        hist.rows,
        alive_at_end,
        before.addr,
        before.stacks,
        names,
    )
    hist.place_by_names(own.hist_cat)
    before.cats = categories_before(before, own.pre_cat, sites, known or {})
    levels = levels_of(snap, hist, before)
    t_ms = _times_ms(snap)
    own, ranges = _time_axis(snap, sites, hist, own, t_ms)
    live = Live(hist, before, own, t_ms, n)
    peak = int(np.argmax(levels.allocated)) if n else -1
    oom = _oom(snap, t_ms, levels, failed_request)
    live_peak = live.at(peak)
    end_allocated = int(snap.blocks["size"][snap.blocks["allocated"]].sum())
    result = MemoryAnalysis(
        samples=_samples(levels, before, t_ms, [peak] + ([oom["row"]] if oom else []), max_points),
        events=n,
        peak_bytes=int(levels.allocated[peak]) if n else levels.start_allocated,
        peak_time_ms=float(t_ms[peak]) if n else 0.0,
        peak_reserved=int(levels.reserved[peak]) if n else levels.start_reserved,
        live_at_peak=live_peak,
        start_allocated=levels.start_allocated,
        start_reserved=levels.start_reserved,
        at_end={"allocated": end_allocated, "reserved": int(snap.segments["total"].sum())},
        empty_cache_bytes=_empty_cache_bytes(snap.segments),
        category_at_peak={
            c: int(live_peak.loc[live_peak["category"] == c, "bytes"].sum()) for c in CATEGORIES
        },
        oom=oom,
        live_at_oom=live.at(oom["row"]) if oom else None,
        live_at_end=live.at(n - 1),
        start_named=int(before.sizes[own.pre_name != ""].sum()),
        device_memory=device_memory,
        has_times=snap.has_times,
        stacks_recorded=hist.stacks_recorded,
        notes=_notes(snap, names, hist.stacks_recorded, levels, end_allocated),
        source=snap.source,
        device=snap.device,
        ranges=ranges,
    )
    result.repeats = _repeats(sites, hist)
    result.findings = findings_of(result) + _when(result) + levers_of(result, names)
    return result


def _times_ms(snap: SnapshotData) -> np.ndarray:
    """Each entry's time in milliseconds from the first (its entry number where the snapshot has no
    times)."""
    if not snap.has_times:
        return snap.time_us.astype(float)
    t0 = int(snap.time_us[0]) if len(snap) else 0
    return (snap.time_us - t0) / 1000.0


def _time_axis(
    snap: SnapshotData, sites: list[Site], hist: Allocations, own: Owners, t_ms: np.ndarray
) -> tuple[Owners, pd.DataFrame]:
    """What the cell was doing along the time axis (:mod:`.memory_ranges`), and ``own`` with the
    allocations of a backward pass placed on its unit (:func:`.memory_backward.name_backward`);
    no ranges where the history is empty or has no times."""
    if not len(snap) or not snap.has_times:
        return own, pd.DataFrame()
    t0 = int(snap.time_us[0])
    ranges = ranges_of(
        t_ms[hist.rows],
        hist.kinds if hist.stacks_recorded else np.full(len(hist.rows), "", object),
        own.stack_module,
        own.grad_module,
        [(name, (a - t0) / 1000.0, (b - t0) / 1000.0) for name, a, b in snap.annotations],
        float(t_ms[-1]),
    )
    users = [s.users for s in sites] + [()]
    return name_backward(own, ranges, t_ms[hist.rows], hist.kinds, hist.stacks, users, hist.sizes)


def _oom(
    snap: SnapshotData, t_ms: np.ndarray, levels: Levels, failed_request: int | None
) -> dict[str, Any] | None:
    """The failed request: the history's last ``oom`` entry, else ``failed_request`` placed at the
    last entry (at the start where there is none: its one allocation failed), else None."""
    oom_rows = np.flatnonzero(snap.action == OOM)
    if len(oom_rows):
        r = int(oom_rows[-1])
        return {
            "row": r,
            "bytes": int(snap.size[r]),
            "device_free": int(snap.device_free.get(r, 0)),
            "time_ms": float(t_ms[r]),
            "allocated": int(levels.allocated[r]),
            "reserved": int(levels.reserved[r]),
            "count": len(oom_rows),
        }
    if failed_request is None:
        return None
    r = len(snap) - 1
    at = (
        (float(t_ms[r]), int(levels.allocated[r]), int(levels.reserved[r]))
        if len(snap)
        else (0.0, levels.start_allocated, levels.start_reserved)
    )
    return {
        "row": r,
        "bytes": int(failed_request),
        "device_free": 0,
        "time_ms": at[0],
        "allocated": at[1],
        "reserved": at[2],
        "count": 1,
        "from_error": True,
    }


def _samples(
    levels: Levels, before: BlocksBefore, t_ms: np.ndarray, must: list[int], max_points: int
) -> pd.DataFrame:
    """The drawn points (:func:`_sample_rows`, ``must`` among them): time, allocated and reserved
    bytes, and one column per category summing to the allocated bytes."""
    n = len(levels.allocated)
    rows = _sample_rows(levels.allocated, must, max_points) if n else np.array([], int)
    samples = pd.DataFrame(
        {
            "time_ms": t_ms[rows],
            "allocated": levels.allocated[rows],
            "reserved": levels.reserved[rows],
        }
    )
    start = np.bincount(before.cats, weights=before.sizes, minlength=len(CATEGORIES))
    for c, name in enumerate(CATEGORIES):
        moved = np.where(levels.delta_cat == c, levels.delta, 0)
        samples[name] = int(start[c]) + np.cumsum(moved)[rows] if n else []
    return samples


def _empty_cache_bytes(segments: Mapping[str, np.ndarray]) -> int:
    """What ``torch.cuda.empty_cache()`` would hand back: the segments with nothing in them (an
    expandable segment is never handed back whole)."""
    empty = ~segments["expandable"] & (segments["allocated"] == 0) & (segments["active"] == 0)
    return int(segments["total"][empty].sum())


def _notes(
    snap: SnapshotData,
    names: MemoryNames | None,
    stacks_recorded: bool,
    levels: Levels,
    end_allocated: int,
) -> list[str]:
    """What a reader should know of how the figures were had: the snapshot's own notes, then names
    without a module tree, a history without stacks, segment entries that do not add up, and a
    history that does not end at the snapshot's allocated total."""
    notes = list(snap.notes)
    if names is not None and not len(names.modules) and (len(names.start) or len(names.end)):
        notes.append(NO_MODULE_TREE)
    if not stacks_recorded:
        notes.append(_NO_STACKS)
    if not levels.reserved_adds_up:
        notes.append(_RESERVED_FROM_ZERO)
    last = int(levels.allocated[-1]) if len(levels.allocated) else end_allocated
    if last != end_allocated:
        notes.append(
            f"The history ends at {format_bytes(last)} allocated, the snapshot's blocks at "
            f"{format_bytes(end_allocated)}: some entries are missing (a full history buffer "
            "drops the oldest)."
        )
    return notes


def _repeats(sites: list[Site], hist: Allocations) -> pd.DataFrame:
    """The temporaries made again and again at one site
    (:func:`.memory_findings.repeated_allocations`)."""
    line_of = np.array([s.line for s in sites] + [""], dtype=object)[hist.stacks]
    op_of = np.array([s.op for s in sites] + [""], dtype=object)[hist.stacks]
    temp = hist.cats == CATEGORY_CODE["temporaries"]
    return repeated_allocations(
        line_of[temp], op_of[temp], hist.sizes[temp], hist.rows[temp], hist.ends[temp]
    )


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
