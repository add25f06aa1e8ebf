"""What the cell was doing along the memory's time axis, read from the allocator's own history, so
the clocks agree by construction (no second recorder, nothing to align):

- **phase**: forward, backward, optimizer, from the kind of code each allocation came from
  (:mod:`.memory_sites`: the autograd engine's thread has no Python stack; ``torch/optim`` is the
  optimizer; the rest is forward). A phase runs from its first allocation to the next phase's; the
  optimizer's from the start of its own ``Optimizer.step`` range where that came first.
- **module**: in forward, the repeated unit (``model.blocks.2``, :func:`.memory_levers.unit_of`)
  whose forward made a run of allocations, from its first to the allocation after its last; in
  backward, where the gradients are new blocks named at the end (``zero_grad(set_to_none=True)``,
  PyTorch's default), the unit whose gradients a run of allocations made, from where the previous
  unit's ended: ``model.blocks.2 (backward)``.
- **annotation**: the ``record_function`` ranges the allocator noted (the optimizer's ``step`` and
  ``zero_grad``, a user's own), clipped to the recording.

Each is as fine as the allocations: a stretch of code that allocates nothing is drawn as part of the
range before it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .memory_levers import unit_of

__all__ = ["LANES", "ranges_of", "when"]

#: The lanes, top to bottom.
LANES = ("phase", "module", "annotation")
_PHASE = {"backward": "backward", "optimizer": "optimizer"}


def _runs(labels: list[str]) -> list[tuple[int, int, str]]:
    """(first, last, label) of each run of equal, non-empty labels."""
    out: list[tuple[int, int, str]] = []
    for i, lab in enumerate(labels):
        if not lab:
            continue
        if out and out[-1][2] == lab and out[-1][1] == i - 1:
            out[-1] = (out[-1][0], i, lab)
        else:
            out.append((i, i, lab))
    return out


def ranges_of(
    t_ms: np.ndarray,
    kinds: np.ndarray,
    modules: np.ndarray,
    grad_modules: np.ndarray,
    annotations: list[tuple[str, float, float]],
    end_ms: float,
) -> pd.DataFrame:
    """The ranges (``lane``, ``label``, ``start_ms``, ``end_ms``) of one recording, from its
    allocations in order: their times, kinds of code, the module whose forward made each ("" where
    none) and, for new gradients, their module ("" otherwise); ``annotations`` in ms."""
    n = len(t_ms)
    rows: list[tuple[str, str, float, float]] = []

    def after(i: int) -> float:
        return float(t_ms[i + 1]) if i + 1 < n else end_ms

    # no kind (a history without stacks): no phase
    phases = [_PHASE.get(k, "forward") if k else "" for k in kinds.tolist()]
    runs = _runs(phases)
    starts = [float(t_ms[a]) for a, _, _ in runs]
    for r, (_, _, lab) in enumerate(runs):
        # the optimizer's own range, where it began before the step's first allocation
        if lab == "optimizer" and r:
            after_prev = float(t_ms[runs[r - 1][1]])
            began = [s for name, s, _ in annotations if name.startswith("Optimizer.step")]
            began = [s for s in began if after_prev <= s <= starts[r]]
            starts[r] = min(began, default=starts[r])
    for r, (_, _, lab) in enumerate(runs):
        stop = starts[r + 1] if r + 1 < len(runs) else end_ms
        rows.append(("phase", lab, starts[r], stop))
    fwd = [unit_of(m) if p == "forward" else "" for m, p in zip(modules.tolist(), phases)]
    rows += [("module", lab, float(t_ms[a]), after(b)) for a, b, lab in _runs(fwd)]
    back = [unit_of(m) if p == "backward" else "" for m, p in zip(grad_modules.tolist(), phases)]
    # runs of new gradients of one unit, the allocations between them (temporaries) not counted
    grads = [i for i, x in enumerate(back) if x]
    start = None
    for a, b, lab in _runs([back[i] for i in grads]):
        first, last = grads[a], grads[b]
        phase_start = _phase_start(rows, float(t_ms[first]))
        begin = start if start is not None and start >= phase_start else phase_start
        rows.append(("module", f"{lab} (backward)", begin, after(last)))
        start = after(last)
    lo = 0.0  # the recording's first entry
    for name, s, e in annotations:
        if e >= lo and s <= end_ms:
            rows.append(("annotation", name, max(s, lo), min(e, end_ms)))
    return pd.DataFrame(rows, columns=["lane", "label", "start_ms", "end_ms"])


def _phase_start(rows: list[tuple[str, str, float, float]], t: float) -> float:
    """Where the backward phase holding ``t`` began."""
    for lane, lab, s, e in rows:
        if lane == "phase" and lab == "backward" and s <= t <= e:
            return s
    return t


def when(ranges: pd.DataFrame, t: float) -> dict[str, str]:
    """Per lane, the innermost range holding ``t`` (lanes with none left out)."""
    if ranges.empty:
        return {}
    hit = ranges[(ranges["start_ms"] <= t) & (t <= ranges["end_ms"])]
    hit = hit.assign(width=hit["end_ms"] - hit["start_ms"]).sort_values("width", kind="stable")
    return {lane: str(g["label"].iloc[0]) for lane, g in hit.groupby("lane", sort=False)}
