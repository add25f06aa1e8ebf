"""Two memory runs' peaks side by side: what a ``%%gpuprofile --memory`` saves to the history (a
summary of its peak, a few KB of plain values) and what ``--vs`` says against a saved one.

The summary holds the peak's bytes and time, its breakdown by category and by module (the largest
:data:`MODULES_KEPT` modules, the rest in one ``(other modules)`` row, so the parts still add up to
the peak), the allocated and reserved bytes at the end and the device's memory. The diff compares
two summaries part by part (a part missing from one side counts as 0 there), largest change first,
and says the peak's change, the categories that moved it and the modules that moved most.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from .memory_findings import format_bytes

if TYPE_CHECKING:
    from .memory import MemoryAnalysis

__all__ = ["MODULES_KEPT", "MemoryDiff", "diff_memory", "memory_summary"]

#: Modules kept by name in a saved summary (the rest are summed).
MODULES_KEPT = 200
#: A change is said from this many bytes (and this share of the peak) on.
SAID_BYTES = 1 << 20
SAID_SHARE = 0.005
OTHER = "(other modules)"


def memory_summary(m: MemoryAnalysis) -> dict[str, Any]:
    """The saved summary of one :class:`~gpumagic.analysis.memory.MemoryAnalysis`."""
    by_module = m.by("module") if "module" in m.live_at_peak else pd.DataFrame()
    modules: dict[str, int] = {}
    if len(by_module):
        kept = by_module.head(MODULES_KEPT)
        modules = {str(k): int(v) for k, v in zip(kept["module"], kept["bytes"], strict=True)}
        rest = int(by_module["bytes"].iloc[MODULES_KEPT:].sum())
        if rest:
            modules[OTHER] = rest
    return {
        "peak_bytes": int(m.peak_bytes),
        "peak_time_ms": float(m.peak_time_ms),
        "peak_reserved": int(m.peak_reserved),
        "by_category": {str(k): int(v) for k, v in m.category_at_peak.items() if v},
        "by_module": modules,
        "at_end": {str(k): int(v) for k, v in m.at_end.items()},
        "device_memory": m.device_memory,
    }


@dataclass
class MemoryDiff:
    """Two peaks compared: ``names`` (before, after), ``peaks`` (bytes), ``table`` (``part``:
    category or module, ``name``, ``before``, ``after``, ``change`` in bytes, largest change first)
    and ``lines`` (what changed, in sentences)."""

    names: tuple[str, str]
    peaks: tuple[int, int]
    table: pd.DataFrame
    lines: list[str] = field(default_factory=list)

    def to_dataframe(self) -> pd.DataFrame:
        return self.table.copy()

    def __str__(self) -> str:
        return "\n".join(self.lines)

    def __repr__(self) -> str:
        return str(self)


def _side(summary: Mapping[str, Any], part: str) -> dict[str, int]:
    return {str(k): int(v) for k, v in (summary.get(part) or {}).items()}


def _compare(part: str, a: dict[str, int], b: dict[str, int]) -> pd.DataFrame:
    names = list(dict.fromkeys([*a, *b]))
    df = pd.DataFrame(
        {
            "part": part,
            "name": names,
            "before": [a.get(n, 0) for n in names],
            "after": [b.get(n, 0) for n in names],
        }
    )
    df["change"] = df["after"] - df["before"]
    return df


def diff_memory(
    before: Mapping[str, Any], after: Mapping[str, Any], names: tuple[str, str] = ("before", "now")
) -> MemoryDiff:
    """The :class:`MemoryDiff` of two summaries (:func:`memory_summary`, or saved ones)."""
    for side, s in (("before", before), ("after", after)):
        if "peak_bytes" not in s:
            raise ValueError(f"the {side} summary has no peak_bytes: not a memory run's summary")
    pa, pb = int(before["peak_bytes"]), int(after["peak_bytes"])
    table = pd.concat(
        [
            _compare("category", _side(before, "by_category"), _side(after, "by_category")),
            _compare("module", _side(before, "by_module"), _side(after, "by_module")),
        ],
        ignore_index=True,
    )
    table = table.iloc[table["change"].abs().argsort(kind="stable")[::-1]].reset_index(drop=True)
    b = format_bytes

    def signed(n: int) -> str:
        return ("+" if n > 0 else "") + b(n)

    change = pb - pa
    rel = f" ({change / pa:+.1%})" if pa else ""
    lines = [f"Memory vs {names[0]}: peak {b(pa)} -> {b(pb)}, {signed(change)}{rel} ({names[1]})."]
    said = max(SAID_BYTES, SAID_SHARE * max(pa, pb))
    for part, word in (("category", "By category"), ("module", "By module")):
        moved = table[(table["part"] == part) & (table["change"].abs() >= said)]
        if part == "module":
            moved = moved[moved["name"] != OTHER].head(5)
        if len(moved):
            lines.append(
                f"  {word}: "
                + ", ".join(
                    f"{n} {signed(int(c))} ({b(int(x))} -> {b(int(y))})"
                    for n, c, x, y in zip(
                        moved["name"], moved["change"], moved["before"], moved["after"], strict=True
                    )
                )
                + "."
            )
    if len(lines) == 1:
        lines.append(f"  No part of the peak moved by {b(said)} or more.")
    return MemoryDiff(names=names, peaks=(pa, pb), table=table, lines=lines)
