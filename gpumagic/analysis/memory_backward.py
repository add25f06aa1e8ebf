"""The blocks the autograd engine allocates, named after the backward that made them.

A CUDA backward runs on the autograd engine's own thread, with no Python stack, so its blocks (the
gradients of activations, the temporaries of each backward op) have no line and no module of their
own: 16-29% of a training step's peak read ``(no Python stack)``. What the recording does say is
*when* each was allocated, and the memory's time axis already has the backward of each repeated
unit on it (:mod:`.memory_ranges`: from the new gradients each unit's parameters get). So a block
the engine allocated inside ``model.blocks.2 (backward)`` is put there, by module, and by line on
the line of the cell (or script) whose forward made that unit's own blocks, marked ``(backward)``
(``<cell 5>:4 in <module> (backward)``): the backward of the work that line started.

Its reach is the unit's, not the op's: which op inside ``model.blocks.2`` allocated a block is not
recorded. Blocks outside every unit's backward (before a backward's first new gradient where no
unit's range reaches, or in a recording without times) keep ``(no Python stack)``; so do all of
them where the parameters' gradients already existed (``zero_grad(set_to_none=False)``), which
leaves the backward without units to name.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np
import pandas as pd

from .memory_levers import unit_of
from .memory_owners import NO_STACK, Owners

__all__ = ["BACKWARD", "name_backward"]

#: What marks a label as a backward's: the module's range label and the line.
BACKWARD = " (backward)"


def _call_lines(
    units: np.ndarray, stacks: np.ndarray, users: list[tuple[str, ...]]
) -> dict[str, str]:
    """Per unit, the innermost user frame every one of its forward stacks holds at the same depth
    from the outside: the line that called it."""
    seen: dict[str, set[int]] = defaultdict(set)
    for unit, stack in zip(units.tolist(), stacks.tolist(), strict=True):
        if unit:
            seen[unit].add(stack)
    out = {}
    for unit, group in seen.items():
        outsides = [users[s][::-1] for s in group if users[s]]
        if not outsides:
            continue
        shared = 0
        while all(len(o) > shared and o[shared] == outsides[0][shared] for o in outsides):
            shared += 1
        if shared:
            out[unit] = outsides[0][shared - 1]
    return out


def name_backward(
    own: Owners,
    ranges: pd.DataFrame,
    t_ms: np.ndarray,
    kinds: np.ndarray,
    stacks: np.ndarray,
    users: list[tuple[str, ...]],
) -> Owners:
    """``own`` with each history allocation that has no Python stack on the line of the unit whose
    backward range holds its time, marked ``(backward)``, and, where no name places it (a new
    gradient's places it on its parameter's module), on that unit (``model.blocks.2
    (backward)``). ``t_ms``, ``kinds`` and ``stacks`` (the stack's index):
    per history allocation, in order; ``users``: per stack, its user frames, innermost first."""
    if ranges.empty or not len(t_ms):
        return own
    back = ranges[(ranges["lane"] == "module") & ranges["label"].str.endswith(BACKWARD)]
    if back.empty:
        return own
    back = back.sort_values("start_ms", kind="stable")
    starts, ends = back["start_ms"].to_numpy(float), back["end_ms"].to_numpy(float)
    labels = back["label"].to_numpy(object)
    forward = kinds == "forward"
    units = np.array([unit_of(m) for m in own.stack_module.tolist()], object)
    line_of = _call_lines(units[forward], stacks[forward], users)
    idx = np.flatnonzero(own.hist_line == NO_STACK)
    at = np.searchsorted(starts, t_ms[idx], side="right") - 1
    inside = (at >= 0) & (t_ms[idx] <= ends[np.maximum(at, 0)])
    idx, at = idx[inside], at[inside]
    module, line = own.hist_module.copy(), own.hist_line.copy()
    unplaced = module[idx] == NO_STACK  # a name (a new gradient's) already places the rest
    module[idx[unplaced]] = labels[at[unplaced]]
    for i, label in zip(idx.tolist(), labels[at].tolist(), strict=True):
        forward_line = line_of.get(label.removesuffix(BACKWARD))
        if forward_line:
            line[i] = forward_line + BACKWARD
    return dataclasses.replace(own, hist_module=module, hist_line=line)
