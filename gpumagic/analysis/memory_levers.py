"""What would change the peak: the common levers, each a sentence with numbers from the named
breakdown of the peak, and each an estimate (said so in the sentence: none of it was run).

- **Precision**: the parameters, their gradients and the optimizer state the names show in 32-bit
  floats would take half in bf16. Numerics change; mixed precision that keeps an fp32 master copy
  saves less, and the sentence says so.
- **Activation checkpointing**: the activations alive at the peak, by the model's repeated units
  (the shallowest modules in a list or sequence, ``model.blocks.3``; where there are none, the
  model's children). With each unit checkpointed only its input stays between forward and
  backward, and one unit's activations come back at a time while it is recomputed, so the saving
  is at most the units' activations less the largest unit's.
- **The batch dimension**: activations, temporaries and inputs grow with the batch; parameters,
  gradients and optimizer state do not. Halving the batch frees about half of the first part.

Only from a recording whose blocks were named (``%%gpuprofile --memory`` in a namespace with the
model): without names the parts cannot be told apart.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .finding import Finding
from .memory_findings import MemoryFacts, format_bytes

if TYPE_CHECKING:
    from ..capture.memory.names import MemoryNames

__all__ = ["MIN_SHARE", "levers_of", "unit_of"]

#: A lever is said when what it moves is at least this share of the peak.
MIN_SHARE = 0.02
#: Units named in the checkpointing sentence.
NAMED_UNITS = 3
_GROWS = ("activations", "temporaries", "inputs")
_FIXED = ("parameters", "gradients", "optimizer state")
_INDEX = re.compile(r"^\d+$")


def unit_of(module: str) -> str:
    """The repeated unit a module belongs to: its shallowest ancestor (or itself) that is an item of
    a list or sequence (``model.blocks.3`` for ``model.blocks.3.mlp.0``), else the root's child
    (``model.head``); "" for a label that is no module (``(no Python stack)``)."""
    if not module or module.startswith("("):
        return ""
    parts = module.split(".")
    for i in range(1, len(parts)):
        if _INDEX.match(parts[i]):
            return ".".join(parts[: i + 1])
    return ".".join(parts[:2])


def _itemsizes(names: MemoryNames) -> dict[str, int]:
    out: dict[str, int] = {}
    for table in (names.end, names.start):
        rows = table.rows
        if "itemsize" in rows:
            out.update(zip(rows["name"], rows["itemsize"].astype(int), strict=True))
    return out


def _precision(live: pd.DataFrame, names: MemoryNames, peak: int) -> Finding | None:
    size = _itemsizes(names)
    fixed = live[live["category"].isin(_FIXED) & (live["name"] != "")]
    fp32 = fixed[[size.get(n, 0) == 4 for n in fixed["name"]]]
    total = int(fp32["bytes"].sum())
    if not peak or total < MIN_SHARE * peak:
        return None
    parts = fp32.groupby("category")["bytes"].sum()
    said = ", ".join(f"{c} {format_bytes(int(parts[c]))}" for c in _FIXED if c in parts)
    saved = total // 2
    return Finding(
        "memory_estimate_precision",
        "info",
        f"Estimate: {format_bytes(total)} at the peak is 32-bit ({said}); held in bf16 it would "
        f"take half, about {format_bytes(saved)} less ({saved / peak:.0%} of the peak). Mixed "
        "precision that keeps an fp32 master copy of the weights saves less; the numerics change.",
        {
            "fp32_bytes": total,
            "saved_bytes": saved,
            "by_category": {k: int(v) for k, v in parts.items()},
        },
    )


def _checkpointing(live: pd.DataFrame, peak: int) -> Finding | None:
    act = live[live["category"] == "activations"]
    units = act.assign(unit=[unit_of(m) for m in act["module"]])
    units = units[units["unit"] != ""]
    repeated = np.array([_INDEX.match(u.rsplit(".", 1)[-1]) is not None for u in units["unit"]])
    if repeated.any():  # the repeated units alone: the head or the embedding are one-offs
        units = units[repeated]
    by_unit = units.groupby("unit")["bytes"].sum().sort_values(ascending=False, kind="stable")
    if len(by_unit) < 2:
        return None
    total, largest = int(by_unit.sum()), int(by_unit.iloc[0])
    saved = total - largest
    if not peak or saved < MIN_SHARE * peak:
        return None
    top = ", ".join(f"{u} {format_bytes(int(v))}" for u, v in by_unit.head(NAMED_UNITS).items())
    more = f" and {len(by_unit) - NAMED_UNITS} more" if len(by_unit) > NAMED_UNITS else ""
    return Finding(
        "memory_estimate_checkpointing",
        "info",
        f"Estimate: {format_bytes(total)} of activations alive at the peak were made inside "
        f"{len(by_unit)} modules ({top}{more}). Checkpointing each of them "
        "(torch.utils.checkpoint) would free up to "
        f"{format_bytes(saved)} at the peak ({saved / peak:.0%}): their inputs stay and one "
        "module's activations come back at a time, for a second forward of each in backward.",
        {
            "activation_bytes": total,
            "saved_bytes": saved,
            "by_module": {str(k): int(v) for k, v in by_unit.items()},
        },
    )


def _batch(cats: dict[str, int], peak: int) -> Finding | None:
    grows = sum(cats.get(c, 0) for c in _GROWS)
    fixed = sum(cats.get(c, 0) for c in _FIXED)
    if not peak or grows < MIN_SHARE * peak:
        return None
    return Finding(
        "memory_estimate_batch",
        "info",
        f"Estimate: activations, temporaries and inputs ({format_bytes(grows)}, "
        f"{grows / peak:.0%} of the peak) grow with the batch; parameters, gradients and "
        f"optimizer state ({format_bytes(fixed)}) do not. Half the batch would free about "
        f"{format_bytes(grows // 2)}; twice the batch would need about {format_bytes(grows)} more.",
        {"grows_bytes": grows, "fixed_bytes": fixed},
    )


def levers_of(m: MemoryFacts, names: MemoryNames | None) -> list[Finding]:
    """The estimates for one :class:`~gpumagic.analysis.memory.MemoryAnalysis` (none without
    names; see the module's docstring)."""
    if names is None or not (len(names.start) or len(names.end)):
        return []
    live = m.live_at_peak
    if live.empty or "name" not in live:
        return []
    found = [
        _precision(live, names, m.peak_bytes),
        _checkpointing(live, m.peak_bytes),
        _batch(m.category_at_peak, m.peak_bytes),
    ]
    return [f for f in found if f is not None]
