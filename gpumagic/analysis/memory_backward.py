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
recorded. A backward that makes no new gradient (a second micro-batch, whose gradients are added
into the first's) is aligned with one that did (:func:`_repeated_backwards`). Blocks outside every
unit's backward (or in a recording without times) keep ``(no Python stack)``; so do all of them
where no backward of the recording made new gradients (``zero_grad(set_to_none=False)``), which
leaves no units to name.
"""

from __future__ import annotations

import dataclasses
import difflib
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
    sizes: np.ndarray,
) -> tuple[Owners, pd.DataFrame]:
    """``own`` with each history allocation that has no Python stack on the line of the unit whose
    backward range holds its time, marked ``(backward)``, and, where no name places it (a new
    gradient's places it on its parameter's module), on that unit (``model.blocks.2
    (backward)``); and ``ranges`` with the units' ranges of the backwards that made no new
    gradients (:func:`_repeated_backwards`). ``t_ms``, ``kinds``, ``stacks`` (the stack's index)
    and ``sizes``: per history allocation, in order; ``users``: per stack, its user frames,
    innermost first."""
    if ranges.empty or not len(t_ms):
        return own, ranges
    back = ranges[(ranges["lane"] == "module") & ranges["label"].str.endswith(BACKWARD)]
    if back.empty:
        return own, ranges
    back = back.sort_values("start_ms", kind="stable")
    starts, ends = back["start_ms"].to_numpy(float), back["end_ms"].to_numpy(float)
    labels = back["label"].to_numpy(object)
    engine = np.flatnonzero(own.hist_line == NO_STACK)
    unit = np.full(len(t_ms), "", object)
    at = np.searchsorted(starts, t_ms[engine], side="right") - 1
    inside = (at >= 0) & (t_ms[engine] <= ends[np.maximum(at, 0)])
    unit[engine[inside]] = labels[at[inside]]
    extra = _repeated_backwards(ranges, engine, unit, t_ms, sizes)
    forward = kinds == "forward"
    units = np.array([unit_of(m) for m in own.stack_module.tolist()], object)
    line_of = _call_lines(units[forward], stacks[forward], users)
    module, line = own.hist_module.copy(), own.hist_line.copy()
    for i in engine[unit[engine] != ""].tolist():
        if module[i] == NO_STACK:  # a name (a new gradient's) already places the rest
            module[i] = unit[i]
        forward_line = line_of.get(unit[i].removesuffix(BACKWARD))
        if forward_line:
            line[i] = forward_line + BACKWARD
    named = dataclasses.replace(own, hist_module=module, hist_line=line)
    return named, pd.concat([ranges, extra], ignore_index=True) if len(extra) else ranges


#: Most engine allocations of one backward aligned with another's (the alignment is quadratic
#: at worst).
MOST_ALIGNED = 50_000


def _repeated_backwards(
    ranges: pd.DataFrame, engine: np.ndarray, unit: np.ndarray, t_ms: np.ndarray, sizes: np.ndarray
) -> pd.DataFrame:
    """A backward that makes no new gradient (the second micro-batch of an accumulation: its
    gradients are added into the ones the first made) has no unit ranges of its own. The same
    model's backward allocates the same blocks in the same order (where the first stored a new
    gradient, the next allocates one of that size and adds it in), so its engine allocations are
    aligned by size with the backward whose units are known (``difflib``'s matching blocks), each
    matched one given its partner's unit (in ``unit``, in place). Returns the module ranges of the
    units so found: each from its first allocation to the next unit's first."""
    phases = ranges[(ranges["lane"] == "phase") & (ranges["label"] == "backward")]
    phases = phases.sort_values("start_ms", kind="stable")
    rows: list[tuple[str, str, float, float]] = []
    if len(phases) < 2 or not len(engine):
        return pd.DataFrame(rows, columns=["lane", "label", "start_ms", "end_ms"])
    p_start, p_end = phases["start_ms"].to_numpy(float), phases["end_ms"].to_numpy(float)
    which = np.searchsorted(p_start, t_ms[engine], side="right") - 1
    inside = (which >= 0) & (t_ms[engine] <= p_end[np.maximum(which, 0)])
    groups = [engine[inside & (which == p)] for p in range(len(phases))]
    known = [int((unit[g] != "").sum()) for g in groups]
    ref = groups[int(np.argmax(known))]
    if not max(known) or len(ref) > MOST_ALIGNED:
        return pd.DataFrame(rows, columns=["lane", "label", "start_ms", "end_ms"])
    ref_sizes = sizes[ref].tolist()
    for p, group in enumerate(groups):
        if known[p] or not len(group) or len(group) > MOST_ALIGNED:
            continue
        match = difflib.SequenceMatcher(None, ref_sizes, sizes[group].tolist(), autojunk=False)
        for a, b, n in match.get_matching_blocks():
            unit[group[b : b + n]] = unit[ref[a : a + n]]
        runs: list[tuple[str, float]] = []
        for i in group.tolist():
            if unit[i] and (not runs or runs[-1][0] != unit[i]):
                runs.append((str(unit[i]), float(t_ms[i])))
        for r, (label, begin) in enumerate(runs):
            stop = runs[r + 1][1] if r + 1 < len(runs) else float(p_end[p])
            rows.append(("module", label, begin, stop))
    return pd.DataFrame(rows, columns=["lane", "label", "start_ms", "end_ms"])
