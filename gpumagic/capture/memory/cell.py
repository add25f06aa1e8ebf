"""The caching allocator's history for one cell (``%%gpuprofile --memory``), taken without
disturbing the process.

The cell warms up first (outside the recording: lazy init, cuBLAS workspaces, autotuning and the
optimizer's state are not the cell's steady memory), then runs with the allocator recording its
history, with Python stacks. A snapshot is dumped to a private temporary file, read back by the same
reader as ``gpumagic.load_memory_snapshot``, and the file removed (its path is said if it cannot
be).

What is left as it was found (DESIGN: observing without disturbing):

- **The user's own recording.** PyTorch can say whether the allocator records its history
  (``torch._C._cuda_isHistoryEnabled``) but not with which settings, and turning recording on again
  would replace them. So where it is on, nothing is changed: the snapshot reads the entries the cell
  added to the user's history, found by counting back from the end as many allocations and frees as
  the allocator's own counters say the cell made (the approach of ``timing/peak_memory.py``); taking
  the snapshot appends one ``snapshot`` entry to it, as any snapshot does. Where PyTorch cannot say,
  nothing is recorded and the reason is raised before the cell runs. Where it is off, recording is
  turned on for the cell (``context="alloc"``, ``stacks="python"``: stacks of allocations only, no
  C++ frames; ``free_completed`` skipped where PyTorch can skip actions) and off again, the cell
  raising or not; turning it off discards the history it kept, as it was empty before.
- **The peak counters.** Nothing here resets them; ``max_memory_allocated()`` after the cell is what
  the cell left. The counters are read before and after, only to check the history against them.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ...edges import UserValue
from ...errors import GpuMagicError
from ..cell import Cell, namespace_or_new
from .names import MemoryNames, ModuleTree, NameTable, module_tree, name_storages
from .snapshot import ALLOC, FREE_REQUESTED, SnapshotData, read_snapshot

__all__ = [
    "HISTORY_ENTRIES",
    "MemoryCapture",
    "MemoryRecordingError",
    "capture_memory",
]

#: Most history entries kept while recording for a cell (each allocation and each free is one).
HISTORY_ENTRIES = 2_000_000


class MemoryRecordingError(GpuMagicError, RuntimeError):
    """The allocator's history cannot be recorded here: ``reason``."""

    template = "%%gpuprofile --memory: {reason}"


@dataclass
class MemoryCapture:
    """One cell's recording: the ``snapshot`` (the cell's entries only), ``names`` (what the
    namespace's names said at its start and end: ``capture.memory.names``), ``device_memory``,
    ``notes``, the ``error`` the cell raised (None if it finished) and its ``value``;
    ``peak_counter``: the allocator's own peak after the cell when the cell raised it (else
    None); ``device_name`` and ``device_index``: where it ran."""

    snapshot: SnapshotData
    names: MemoryNames = field(default_factory=MemoryNames)
    device_memory: int | None = None
    notes: list[str] = field(default_factory=list)
    error: BaseException | None = None
    value: UserValue = None
    peak_counter: int | None = None
    device_name: str = ""
    device_index: int | None = None


def _counts(torch: ModuleType, device: int) -> tuple[int, int, int]:
    stats = torch.cuda.memory.memory_stats_as_nested_dict(device)
    n = stats["allocation"]["all"]
    return int(n["allocated"]), int(n["freed"]), int(stats["allocated_bytes"]["all"]["peak"])


def _cell_start(snap: SnapshotData, allocs: int, frees: int) -> int | None:
    """The row where the cell's entries begin: the last ``allocs`` allocs and ``frees`` frees; None
    if the history does not hold exactly them (a full buffer, skipped actions, a thread allocating
    meanwhile)."""
    seen_a = seen_f = 0
    if allocs == frees == 0:
        return len(snap)
    for row in range(len(snap) - 1, -1, -1):
        a = snap.action[row]
        seen_a += a == ALLOC
        seen_f += a == FREE_REQUESTED
        if seen_a >= allocs and seen_f >= frees:
            return row if (seen_a, seen_f) == (allocs, frees) else None
    return None


def _names(namespace: Mapping[str, Any], device: int, notes: list[str]) -> NameTable:
    """The storages the namespace names on ``device``; an empty table (and a note) if walking it
    fails: naming is for the view, never a reason to lose the recording."""
    try:
        return name_storages(namespace, device)
    except Exception as exc:  # noqa: BLE001 - a user object whose attributes raise
        notes.append(f"The namespace's tensors could not be named ({type(exc).__name__}: {exc}).")
        return NameTable()


class _Recording:
    """The allocator's history for the cell: the user's left alone, or turned on here and off by
    ``close()``."""

    def __init__(self, torch: ModuleType) -> None:
        self.torch, self.ours, self.notes = torch, False, []
        backend = getattr(torch.cuda.memory, "get_allocator_backend", lambda: "native")()
        if backend != "native":
            raise MemoryRecordingError(
                reason=f"the {backend} allocator keeps no history of allocations"
            )
        enabled = getattr(torch._C, "_cuda_isHistoryEnabled", None)
        if enabled is None:
            raise MemoryRecordingError(
                reason="this PyTorch cannot say whether the allocator already records its "
                "history, so turning it "
                "on could replace this process's own setting; nothing was run"
            )
        self.enabled = enabled
        if enabled():
            self.notes.append(
                "The allocator's history was already being recorded with this process's own "
                "settings: they are kept, "
                "and the view reads the entries the cell added (with the stacks those "
                "settings record)."
            )

    def start(self) -> None:
        if self.enabled():
            return
        memory = self.torch.cuda.memory
        settings: dict[str, Any] = {
            "context": "alloc",
            "stacks": "python",
            "max_entries": HISTORY_ENTRIES,
        }
        try:
            try:
                memory._record_memory_history("all", skip_actions=["free_completed"], **settings)
            except TypeError:  # a PyTorch before skip_actions
                memory._record_memory_history("all", **settings)
        except Exception:
            if self.enabled():  # half turned on: leave it as it was found
                memory._record_memory_history(None)
            raise
        self.ours = True

    def close(self) -> None:
        if self.ours:
            self.ours = False
            self.torch.cuda.memory._record_memory_history(None)


def _dump(torch: ModuleType, device: int, notes: list[str]) -> SnapshotData:
    fd, path = tempfile.mkstemp(prefix="gpumagic-memory-", suffix=".pickle")
    os.close(fd)
    try:
        torch.cuda.memory._dump_snapshot(path)
        return read_snapshot(path, device=device)
    finally:
        try:
            os.remove(path)
        except OSError as exc:
            notes.append(f"The snapshot file {path} could not be removed ({exc}).")


def capture_memory(
    cell: Cell | str | Any,
    label: str,
    *,
    namespace: MutableMapping[str, Any] | None = None,
    warmup: int = 1,
    iters: int = 1,
) -> MemoryCapture:
    """Warm up ``warmup`` runs, then record the allocator's history over ``iters`` runs of ``cell``.
    The cell's exception, an out-of-memory error included, is kept in ``error`` with what was
    recorded up to it (the caller shows it, then raises it again); a KeyboardInterrupt propagates
    after the recording is closed."""
    import torch

    if not torch.cuda.is_available():
        raise MemoryRecordingError(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    runnable, ns = Cell.of(cell), namespace_or_new(namespace)
    recording = _Recording(torch)
    for _ in range(warmup):
        runnable.run(ns)
    torch.cuda.synchronize()
    device = torch.cuda.current_device()
    notes = list(recording.notes)
    start_names = _names(ns, device, notes)
    try:
        modules = module_tree(ns)
    except Exception as exc:  # noqa: BLE001 - as _names
        notes.append(f"The namespace's modules could not be read ({type(exc).__name__}).")
        modules = ModuleTree()
    value = error = None
    before = _counts(torch, device)
    recording.start()
    try:
        try:
            for _ in range(iters):
                value = None
                value = runnable.run(ns)
        except Exception as exc:  # noqa: BLE001 - shown with the memory it left, then raised again by the caller
            error = exc
        try:
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - a failed cell may leave the device unable to synchronize
            notes.append(f"The device could not synchronize after the cell ({type(exc).__name__}).")
        after = _counts(torch, device)
        snap = _dump(torch, device, notes)
    finally:
        recording.close()
    start = _cell_start(snap, after[0] - before[0], after[1] - before[1])
    if start is None:
        notes.append(
            "The history does not hold exactly the cell's allocations and frees (a full "
            "history buffer, actions "
            "skipped by the process's own settings, or another thread allocating): the view "
            "shows the whole history."
        )
    elif start:
        snap = snap.tail(start)
    if iters > 1:
        notes.append(f"The cell ran {iters} times inside the recording.")
    if warmup == 0:
        notes.append(
            "No warm-up (-w 0): first-call allocations (workspaces, lazy state) are in the "
            "recording."
        )
    return MemoryCapture(
        snapshot=snap,
        names=MemoryNames(start_names, _names(ns, device, notes), modules),
        device_memory=int(torch.cuda.get_device_properties(device).total_memory),
        notes=notes,
        error=error,
        value=value,
        peak_counter=after[2] if after[2] > before[2] else None,
        device_name=str(torch.cuda.get_device_name(device)),
        device_index=device,
    )
