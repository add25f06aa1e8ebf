"""Profiles in the history: each ``%%gpuprofile``'s summaries saved beside the timings, and
``--vs``.

What is saved is what a diff needs (:class:`~gpumagic.analysis.profile_summary.ProfileSummary`: per
kernel name and launching op, calls and time; per rank, GPU busy, the window, syncs and NCCL), not
the trace: a few KB compressed where the trace is MBs, and a diff against it later needs nothing
else. Where the capture kept a trace (``--trace``, or nsys' report), its path is saved too, to open
it again. A profile row is ``kind = 'profile'`` in the same table, so ``gpumagic.history()`` lists
it with the timings, and the timings' own lookups leave it out.

``--vs last`` is the previous profile saved on the same device, whatever its cell: the usual loop is
"change the cell, run it again, see what moved", and the changed cell's text is no longer the saved
one's. A label or an id is looked up before the cell runs (an unknown one costs no run); the diff is
shown after the report.

As :mod:`.saving`: a store that cannot be written costs one line on stderr, never the report.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .provenance import provenance
from .rows import pack_samples, row_start
from .saving import Recorder, UnknownReferenceError
from .store import PROFILE, Store

if TYPE_CHECKING:
    from ..analysis.profile_summary import ProfileSummary
    from ..trace import Trace


class Captured(Protocol):
    """What a profile is saved from: any backend's capture (or a report) holding its Trace."""

    trace: Trace


__all__ = [
    "ProfileOutcome",
    "ProfileRecorder",
    "UnknownProfileError",
    "pack_summary",
    "profile_row",
    "summary_row",
    "unpack_summary",
]


class UnknownProfileError(UnknownReferenceError):
    """``%%gpuprofile --vs REF``: no profile with that label or id."""

    template = "--vs {ref}: no profile with that label or id in {path}{known}"
    none_yet = "no labelled profiles yet: -l NAME"


def pack_summary(summary: Mapping[str, Any]) -> bytes:
    """A summary's dict as stored: compact JSON, zlib level 1 (fast; kernel names repeat, so it
    shrinks ~5x)."""
    return zlib.compress(json.dumps(summary, separators=(",", ":")).encode(), 1)


def unpack_summary(blob: bytes | memoryview | None) -> dict[str, Any] | None:
    return json.loads(zlib.decompress(bytes(blob))) if blob else None


def summary_row(
    kind: str, summary: Mapping[str, Any], cell: str, context: Mapping[str, Any], label: str | None
) -> dict[str, Any]:
    """The row of a run saved as its summary (a profile, a memory run): the columns every row
    starts with, no samples (the timings' lookups leave it out by its kind) and the summary
    packed."""
    return {
        **row_start(context, kind, cell, label),
        "samples": pack_samples([]),
        "n_samples": 0,
        "summary": pack_summary(dict(summary)),
    }


def profile_row(
    summary: ProfileSummary,
    cell: str,
    context: Mapping[str, Any],
    *,
    label: str | None = None,
    trace_path: str | None = None,
) -> dict[str, Any]:
    """The row of one profile (``summary``: a ``ProfileSummary``); ``context``: its provenance."""
    ranks = summary.ranks
    wall = max((int(w) for w in ranks["wall_ns"]), default=0) if len(ranks) else 0
    return {
        **summary_row(PROFILE, summary.to_dict(), cell, context, label),
        "trace_path": trace_path,
        "gpu_busy": summary.busy_ns * 1e-9,
        "wall": wall * 1e-9 if wall > 0 else None,
        "kernels": int(summary.kernels["calls"].sum()) if len(summary.kernels) else 0,
    }


def _kept_trace(capture: Captured, trace_path: str | None) -> str | None:
    """The trace the user can open again: the ``--trace`` file written, else the report nsys
    kept."""
    if trace_path and os.path.exists(trace_path):
        return os.path.abspath(trace_path)
    files = getattr(capture, "files", None) or {}
    return files.get("report") or files.get("sqlite")


def row_name(row: Mapping[str, Any]) -> str:
    """How a saved row is named in ``--vs``'s output: ``#12 base``, or ``#12`` without a label."""
    return f"#{row.get('id')} {row['label']}" if row.get("label") else f"#{row.get('id')}"


@dataclass
class ProfileOutcome:
    """What saving a profile gave: its row id; with ``--vs``, the saved reference's summaries and
    both names (the caller draws the diff: the history knows results, not how to compare or draw
    them); lines for the output and notes for stderr."""

    ids: list[int] = field(default_factory=list)
    reference: dict[str, Any] | None = None
    summary: ProfileSummary | None = None
    names: tuple[str, str] = ("", "")
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def print(self) -> None:
        """Print the lines (stdout) and notes (stderr)."""
        for line in self.lines:
            print(line)
        for note in self.notes:
            print(note, file=sys.stderr)


class SummaryRecorder(Recorder):
    """A recorder of one summary row per run (a profile, a memory run) with ``--vs``: ``last`` is
    the latest row of its kind on the same device, whatever its cell."""

    #: the rows' kind in the store, and what one is called in ``--vs``'s lines
    kind = PROFILE
    noun = "profile"

    def _last_saved(self, store: Store, row: Mapping[str, Any]) -> dict[str, Any] | None:
        return store.last_profile(row["device_key"], kind=self.kind)

    def _names(self, ref: Mapping[str, Any], row: Mapping[str, Any]) -> tuple[str, str]:
        """The reference's name and this run's (its label where it could not be saved)."""
        return row_name(ref), row_name(row) if row["id"] else (self.label or "now")


class ProfileRecorder(SummaryRecorder):
    """Saves one ``%%gpuprofile``'s summaries to the history at ``setting`` under ``label`` and,
    with ``vs`` (``last``, a label or a profile id), diffs it against that saved profile."""

    profiles = True
    unknown = UnknownProfileError

    def record(  # type: ignore[override]
        self, capture: Captured, cell: str, trace_path: str | None = None
    ) -> ProfileOutcome:
        """Save the profile of ``capture`` (a backend's Capture, or anything with a ``trace``); the
        diff with ``vs``. The summaries are made here, once, and serve both the row and the diff."""
        out = ProfileOutcome(notes=self.notes)
        if self.path is None:
            return out
        from ..analysis.profile_summary import summarize

        trace = capture.trace
        summary = summarize(trace)
        meta = trace.meta
        device = meta.get("device")
        device = str(
            device[0] if isinstance(device, (list, tuple)) and device else device or "unknown"
        )
        context = provenance(device, str(meta.get("backend") or "unknown"), meta)
        row = profile_row(
            summary, cell, context, label=self.label, trace_path=_kept_trace(capture, trace_path)
        )
        ref = self._saved_with_reference(row, out)
        if ref is None:
            return out
        saved = unpack_summary(ref.get("summary"))
        if saved is None:
            out.lines.append(
                f"vs {row_name(ref)}: that profile's summaries were not saved; nothing to compare"
            )
            return out
        out.reference, out.summary, out.names = saved, summary, self._names(ref, row)
        return out
