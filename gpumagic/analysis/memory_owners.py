"""Who owns each block of one recording: its tensor's name, its module, its source line and its op,
with one rule for the blocks nothing can place, so that every breakdown of the peak holds the same
blocks in its special rows.

- A block allocated **before the recording** reads ``(before the recording)`` as its line and op
  (unless the allocator kept its stack, which then says); its name and module come from the names
  taken when the recording began (``model.blocks.0.mlp.0.weight`` in ``model.blocks.0.mlp.0``),
  else it reads ``(before the recording)`` there too.
- A block allocated **with no Python stack** (the autograd engine's thread) reads ``(no Python
  stack)`` as its line and op; its name and module come from the names taken at the end when it
  is still alive then (a new gradient), else ``(no Python stack)``.
- Any other block has its stack's line and op; its module is the module whose forward made it
  (:mod:`.memory_modules`), else the one its end name gives, else ``(outside any module)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .memory_modules import allocation_modules

if TYPE_CHECKING:
    from ..capture.memory.names import MemoryNames
    from ..capture.memory.snapshot import SnapshotData
    from .memory_sites import Site

__all__ = ["BEFORE", "NOT_RECORDED", "NO_MODULE", "NO_STACK", "NO_USER_LINE", "Owners", "owners"]

BEFORE = "(before the recording)"
NO_STACK = "(no Python stack)"
NOT_RECORDED = "(stacks not recorded)"
NO_USER_LINE = "(no frame outside PyTorch)"
NO_MODULE = "(outside any module)"
#: Named kinds whose module is the tensor's owner even when a stack says otherwise.
_OWNED = {"parameters", "gradients", "optimizer state"}


@dataclass
class Owners:
    """Labels for the history's allocations (``hist_*``, in allocation order) and the blocks from
    before it (``pre_*``): ``line``, ``op``, ``name`` ("" when unnamed) and ``module``; ``pre_cat``
    and ``hist_cat``: the category the names give ("" when they give none); ``stack_module``: per
    history allocation the module whose forward made it (""), ``grad_module``: the module of a
    gradient the end's names give it ("")."""

    hist_line: np.ndarray
    hist_op: np.ndarray
    hist_name: np.ndarray
    hist_module: np.ndarray
    hist_cat: np.ndarray
    pre_line: np.ndarray
    pre_op: np.ndarray
    pre_name: np.ndarray
    pre_module: np.ndarray
    pre_cat: np.ndarray
    stack_module: np.ndarray
    grad_module: np.ndarray


def _site_labels(
    sites: Sequence[Site], frames_of: Sequence[int], stacks_recorded: bool, missing: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per stack index (the last entry for -1): (line, op)."""
    if not stacks_recorded:
        n = len(sites) + 1
        return np.full(n, NOT_RECORDED, object), np.full(n, NOT_RECORDED, object)
    line, op = [], []
    for s, python in zip(sites, frames_of, strict=True):
        if not python:
            line.append(NO_STACK)
            op.append(NO_STACK)
        else:
            line.append(s.line or NO_USER_LINE)
            op.append(s.op)
    return np.array([*line, missing], object), np.array([*op, missing], object)


def owners(
    snap: SnapshotData,
    sites: Sequence[Site],
    stacks_recorded: bool,
    allocs: np.ndarray,
    alive_at_end: np.ndarray,
    pre_addr: np.ndarray,
    pre_stack: np.ndarray,
    names: MemoryNames | None,
) -> Owners:
    """The :class:`Owners` of one recording (see the module's docstring)."""
    python = [
        any(
            f[0].endswith(".py") or (f[0].startswith("<") and f[1] > 0)
            for f in snap.stack_frames(i)
        )
        for i in range(len(snap.stacks))
    ]
    h_line, h_op = _site_labels(sites, python, stacks_recorded, NO_STACK)
    p_line, p_op = _site_labels(sites, python, stacks_recorded, BEFORE)
    h_stack = snap.stack[allocs]
    start = names.start.lookup() if names is not None else {}
    end = names.end.lookup() if names is not None else {}
    stack_module = (
        allocation_modules(snap, allocs, names.modules)
        if names is not None and stacks_recorded
        else np.full(len(allocs), "", object)
    )
    n = len(allocs)
    h_name, h_cat = np.full(n, "", object), np.full(n, "", object)
    special = {BEFORE, NO_STACK, NOT_RECORDED}
    fallback = np.array([ln if ln in special else NO_MODULE for ln in h_line.tolist()], object)
    h_module = np.where(stack_module != "", stack_module, fallback[h_stack])
    addrs = snap.addr[allocs]
    for i in np.flatnonzero(alive_at_end).tolist() if end else ():  # named at the end
        got = end.get(int(addrs[i]))
        if got is not None:
            h_name[i], h_cat[i] = got[0], got[1]
            if got[1] in _OWNED or not stack_module[i]:
                h_module[i] = got[2]
    m = len(pre_addr)
    p_name, p_module, p_cat = (np.full(m, "", object) for _ in range(3))
    pre_lines = p_line[pre_stack].tolist()
    for i, a in enumerate(pre_addr.tolist()):
        got = start.get(a)
        if got is None:
            p_module[i] = pre_lines[i] if pre_lines[i] in special else NO_MODULE
        else:
            p_name[i], p_cat[i], p_module[i] = got
    return Owners(
        hist_line=h_line[h_stack],
        hist_op=h_op[h_stack],
        hist_name=h_name,
        hist_module=h_module,
        hist_cat=h_cat,
        pre_line=np.array(pre_lines, object),
        pre_op=p_op[pre_stack],
        pre_name=p_name,
        pre_module=p_module,
        pre_cat=p_cat,
        stack_module=stack_module,
        grad_module=np.where(h_cat == "gradients", h_module, ""),
    )
