"""Memory runs in the history: each ``%%gpuprofile --memory``'s peak summary saved beside the
timings and profiles (``kind = 'memory'``), under ``-l NAME``, and ``--vs``'s reference.

What is saved is the summary the caller made (``analysis.memory_diff.memory_summary``: the peak by
category and by module, a few KB as compressed JSON), never the allocator's history. As with
profiles, ``--vs last`` is the previous memory run on the same device, whatever its cell; a label
or an id is looked up before the cell runs; and a store that cannot be written costs one line on
stderr, never the view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .profiles import SummaryRecorder, summary_row, unpack_summary
from .provenance import provenance
from .saving import UnknownReferenceError
from .store import MEMORY

__all__ = ["MemoryOutcome", "MemoryRecorder", "UnknownMemoryRunError", "memory_row"]


class UnknownMemoryRunError(UnknownReferenceError):
    """``%%gpuprofile --memory --vs REF``: no memory run with that label or id."""

    template = "--vs {ref}: no memory run with that label or id in {path}{known}"
    none_yet = "no labelled memory runs yet: %%gpuprofile --memory -l NAME"


def memory_row(
    summary: Mapping[str, Any], cell: str, context: Mapping[str, Any], *, label: str | None = None
) -> dict[str, Any]:
    """The row of one memory run (``summary``: its peak's summary; ``context``: its
    provenance)."""
    return summary_row(MEMORY, summary, cell, context, label)


@dataclass
class MemoryOutcome:
    """What saving a memory run gave: its row id; with ``--vs``, the saved reference's summary and
    both names (the caller compares them); lines for the output and notes for stderr."""

    ids: list[int] = field(default_factory=list)
    reference: dict[str, Any] | None = None
    names: tuple[str, str] = ("", "")
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class MemoryRecorder(SummaryRecorder):
    """Saves one ``%%gpuprofile --memory``'s summary to the history at ``setting`` under ``label``
    and, with ``vs`` (``last``, a label or a memory run's id), hands back that run's summary."""

    profiles = kind = MEMORY
    noun = "memory run"
    unknown = UnknownMemoryRunError

    def record(  # type: ignore[override]
        self, summary: Mapping[str, Any], cell: str, device: str, device_index: int | None = None
    ) -> MemoryOutcome:
        """Save ``summary`` (measured on ``device``); the reference's summary with ``vs``."""
        out = MemoryOutcome(notes=self.notes)
        if self.path is None:
            return out
        context = provenance(device, "allocator", {"device_index": device_index})
        row = memory_row(summary, cell, context, label=self.label)
        ref = self._saved_with_reference(row, out)
        if ref is None:
            return out
        out.reference = unpack_summary(ref.get("summary"))
        out.names = self._names(ref, row)
        return out
