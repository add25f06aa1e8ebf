"""The allocator's history read as blocks, the ground the memory analysis (:mod:`.memory`) stands
on: each allocation paired with the free of the same address that follows it, sized as the allocator
counts it and given its category; the blocks allocated before the history; the levels of allocated
and reserved bytes after every entry; and what is alive at any entry.

The rules themselves (how a block is sized, what makes a category, where the levels start) are
:mod:`.memory`'s docstring; this module carries them out on whole arrays, one pass each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..capture.memory.snapshot import ALLOC, FREE_REQUESTED, SEGMENT_ALLOC, SEGMENT_FREE

if TYPE_CHECKING:
    from ..capture.memory.snapshot import SnapshotData
    from .memory_owners import Owners
    from .memory_sites import Site

__all__ = [
    "CATEGORIES",
    "CATEGORY_CODE",
    "Allocations",
    "BlocksBefore",
    "Levels",
    "Live",
    "allocations",
    "block_bytes",
    "blocks_before",
    "categories_before",
    "levels_of",
    "pair_allocations",
]

CATEGORIES = (
    "parameters",
    "optimizer state",
    "inputs",
    "activations",
    "gradients",
    "temporaries",
    "unknown",
)


#: Each category's code in the arrays below.
CATEGORY_CODE = {c: i for i, c in enumerate(CATEGORIES)}


def block_bytes(size: np.ndarray) -> np.ndarray:
    """The allocator's count for requests of ``size`` bytes: rounded up to 512, at least 512."""
    rounded: np.ndarray = np.maximum(512, -(-size // 512) * 512)
    return rounded


def pair_allocations(snap: SnapshotData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the history's alloc and free entries: (alloc rows, the row freeing each or -1, free rows
    with no alloc)."""
    rows = np.flatnonzero((snap.action == ALLOC) | (snap.action == FREE_REQUESTED))
    order = rows[np.lexsort((rows, snap.addr[rows]))]
    a, act = snap.addr[order], snap.action[order]
    paired = np.zeros(len(order), bool)
    if len(order) > 1:
        paired[1:] = (a[1:] == a[:-1]) & (act[1:] == FREE_REQUESTED) & (act[:-1] == ALLOC)
    free_of = np.full(len(snap.action), -1, np.int64)
    free_of[order[:-1][paired[1:]]] = order[1:][paired[1:]]
    allocs = np.flatnonzero(snap.action == ALLOC)
    orphan = order[(act == FREE_REQUESTED) & ~paired]
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
    cat = np.full(len(rows), CATEGORY_CODE["temporaries"], np.int8)
    cat[(kinds == "optimizer") & alive_end] = CATEGORY_CODE["optimizer state"]
    cat[back & (ends > next_other)] = CATEGORY_CODE["gradients"]
    fwd = kinds == "forward"
    cat[fwd & (next_back < n) & (ends > next_back)] = CATEGORY_CODE["activations"]
    cat[fwd & (next_back >= n) & alive_end] = CATEGORY_CODE["activations"]
    cat[kinds == "parameters"] = CATEGORY_CODE["parameters"]
    cat[kinds == "inputs"] = CATEGORY_CODE["inputs"]
    return cat


#: What a block allocated before the history is, from the kind of code on its stack.
_CATEGORY_OF_KIND = {
    "parameters": "parameters",
    "optimizer": "optimizer state",
    "inputs": "inputs",
    "backward": "gradients",
    "forward": "activations",
}


@dataclass
class Allocations:
    """The history's allocations, in row order: each one's row, the row that frees it (``n``, the
    history's length, where nothing does), its block's bytes, its stack (-1: none), the kind of code
    that made it and its category code."""

    rows: np.ndarray
    ends: np.ndarray
    sizes: np.ndarray
    stacks: np.ndarray
    kinds: np.ndarray
    cats: np.ndarray
    stacks_recorded: bool

    def place_by_names(self, named: np.ndarray) -> None:
        """Where the history has no stacks, the category the names give each allocation (``named``,
        "" where they give none): the names, where they know, say what the stacks cannot."""
        if self.stacks_recorded:
            return
        known = named != ""
        self.cats[known] = [CATEGORY_CODE[c] for c in named[known]]


@dataclass
class BlocksBefore:
    """The blocks allocated before the history: those it frees without allocating them, then those
    in use at the end that it never allocated. Each one's address, bytes, the row freeing it (``n``:
    alive at the end), its stack (-1: none) and its category code (set once the names are read)."""

    addr: np.ndarray
    sizes: np.ndarray
    ends: np.ndarray
    stacks: np.ndarray
    cats: np.ndarray = field(default_factory=lambda: np.empty(0, np.int8))


@dataclass
class Levels:
    """Allocated and reserved bytes after each entry, with each entry's change of allocated bytes
    and the category it moves (the per-category curves are summed from them)."""

    delta: np.ndarray
    delta_cat: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray
    start_allocated: int
    start_reserved: int
    #: whether the history's segment entries add up to the final segments
    reserved_adds_up: bool


def allocations(
    snap: SnapshotData, sites: list[Site], rows: np.ndarray, ends: np.ndarray
) -> Allocations:
    """The history's allocations (``rows``, freed at ``ends``), sized as the allocator counts them
    and categorised by the module's rules (every one *unknown* where the history has no stacks)."""
    n = len(snap)
    sizes = block_bytes(snap.size[rows])
    alive = np.flatnonzero(ends >= n)
    if len(alive):  # alive at the end: the block's own size, as the allocator counts it
        final = snap.blocks
        in_use = final["allocated"]
        final_size = dict(
            zip(final["addr"][in_use].tolist(), final["size"][in_use].tolist(), strict=True)
        )
        sizes[alive] = [
            final_size.get(a, s)
            for a, s in zip(snap.addr[rows[alive]].tolist(), sizes[alive].tolist())
        ]
    stacks = snap.stack[rows]
    recorded = bool(n == 0 or (stacks >= 0).any() or len(rows) == 0)
    # stack -1: an allocation with no Python frames, made by the autograd engine's thread
    kinds = np.array([s.kind for s in sites] + ["backward"], dtype=object)[stacks]
    cats = (
        _categories(kinds, rows, ends, n)
        if recorded
        else np.full(len(rows), CATEGORY_CODE["unknown"], np.int8)
    )
    return Allocations(rows, ends, sizes, stacks, kinds, cats, recorded)


def blocks_before(snap: SnapshotData, hist: Allocations, orphans: np.ndarray) -> BlocksBefore:
    """The blocks allocated before the history: freed in it without an alloc (``orphans``, the rows
    of those frees), or in use at the end and never allocated in it."""
    n = len(snap)
    in_use = snap.blocks["allocated"]
    addr, size, stack = (snap.blocks[k][in_use] for k in ("addr", "size", "stack"))
    alive = set(snap.addr[hist.rows[hist.ends >= n]].tolist())
    older = np.array([a not in alive for a in addr.tolist()], bool)
    return BlocksBefore(
        addr=np.concatenate([snap.addr[orphans], addr[older]]),
        sizes=np.concatenate([block_bytes(snap.size[orphans]), size[older]]),
        ends=np.concatenate([orphans, np.full(int(older.sum()), n, np.int64)]),
        stacks=np.concatenate([np.full(len(orphans), -1, np.int32), stack[older]]),
    )


def categories_before(
    before: BlocksBefore, named: np.ndarray, sites: list[Site], known: Mapping[int, str]
) -> np.ndarray:
    """One category code per block from before the history: what ``known`` says of its address,
    else what the names say (``named``, "" where they do not), else what its recorded stack's kind
    of code makes it, else *unknown*."""
    cats = np.empty(len(before.addr), np.int8)
    for i, (a, s) in enumerate(zip(before.addr.tolist(), before.stacks.tolist(), strict=True)):
        name = known.get(a) or named[i] or None
        if name is None and s >= 0:
            name = _CATEGORY_OF_KIND.get(sites[s].kind)
        cats[i] = CATEGORY_CODE.get(name or "unknown", CATEGORY_CODE["unknown"])
    return cats


def levels_of(snap: SnapshotData, hist: Allocations, before: BlocksBefore) -> Levels:
    """Allocated bytes after each entry, from what was allocated at the start (every block from
    before the history) and each alloc's and free's block; reserved bytes from the segment entries,
    starting at the final segments' total less their net change (at zero where that is negative)."""
    n = len(snap)
    delta = np.zeros(n, np.int64)
    delta_cat = np.full(n, CATEGORY_CODE["unknown"], np.int8)
    delta[hist.rows] = hist.sizes
    delta_cat[hist.rows] = hist.cats
    for ends, sizes, cats in (
        (hist.ends, hist.sizes, hist.cats),
        (before.ends, before.sizes, before.cats),
    ):
        freed = ends < n
        delta[ends[freed]] -= sizes[freed]
        delta_cat[ends[freed]] = cats[freed]
    start_allocated = int(before.sizes.sum())
    seg = np.zeros(n, np.int64)
    is_sa, is_sf = snap.action == SEGMENT_ALLOC, snap.action == SEGMENT_FREE
    seg[is_sa], seg[is_sf] = snap.size[is_sa], -snap.size[is_sf]
    start_reserved = int(snap.segments["total"].sum()) - int(seg.sum())
    return Levels(
        delta=delta,
        delta_cat=delta_cat,
        allocated=start_allocated + np.cumsum(delta),
        reserved=max(start_reserved, 0) + np.cumsum(seg),
        start_allocated=start_allocated,
        start_reserved=max(start_reserved, 0),
        reserved_adds_up=start_reserved >= 0,
    )


@dataclass
class Live:
    """Finds the allocations alive at an entry: those of the history and those from before it, with
    their owners and times."""

    hist: Allocations
    before: BlocksBefore
    own: Owners
    t_ms: np.ndarray
    n: int

    def at(self, row: int) -> pd.DataFrame:
        """The allocations alive right after entry ``row`` (-1: before the first), largest first:
        :attr:`MemoryAnalysis.live_at_peak`'s columns."""
        h, b, own = self.hist, self.before, self.own
        in_hist = (h.rows <= row) & (h.ends > row)
        in_before = b.ends > row

        def both(of_hist: np.ndarray, of_before: np.ndarray) -> np.ndarray:
            return np.concatenate([of_hist[in_hist], of_before[in_before]])

        return pd.DataFrame(
            {
                "bytes": both(h.sizes, b.sizes),
                "category": [CATEGORIES[c] for c in both(h.cats, b.cats)],
                "module": both(own.hist_module, own.pre_module),
                "name": both(own.hist_name, own.pre_name),
                "line": both(own.hist_line, own.pre_line),
                "op": both(own.hist_op, own.pre_op),
                "allocated_ms": np.concatenate(
                    [self.t_ms[h.rows[in_hist]], np.full(int(in_before.sum()), np.nan)]
                ),
                "freed_ms": np.concatenate(
                    [self._time_or_nan(h.ends[in_hist]), self._time_or_nan(b.ends[in_before])]
                ),
            }
        ).sort_values("bytes", ascending=False, kind="stable", ignore_index=True)

    def _time_or_nan(self, rows: np.ndarray) -> np.ndarray:
        out = np.full(len(rows), np.nan)
        ok = rows < self.n
        out[ok] = self.t_ms[rows[ok]]
        return out
