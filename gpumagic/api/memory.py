"""``gpumagic.load_memory_snapshot``: an allocator snapshot read by the capture layer
(``capture.memory.snapshot``), analysed (``analysis.memory``) and shown by the render layer
(``render.memory_view.MemoryView``). A join above all three, so that none imports another upwards:
a reader knows no HTML, a view reads no file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..analysis.memory import analyze_memory
from ..capture.memory.snapshot import read_snapshot
from ..render.memory_view import MemoryView

if TYPE_CHECKING:
    from ..capture.memory.names import MemoryNames

__all__ = ["load_memory_snapshot"]


def load_memory_snapshot(
    path: str | os.PathLike[str] | bytes | Mapping[str, Any],
    *,
    device: int | None = None,
    device_memory: int | None = None,
    top: int = 15,
    names: MemoryNames | None = None,
) -> MemoryView:
    """Open a snapshot that ``torch.cuda.memory._dump_snapshot(path)`` wrote (or the dict
    ``_snapshot()`` returns), from this machine or any other, a run that ended in out-of-memory
    included: a :class:`MemoryView` of allocated and reserved memory over time by category, the
    exact peak and what was alive there by source line and op, and findings. ``device``: which
    device's history (default: the one with the most); ``device_memory``: the device's total bytes,
    which the snapshot does not record (the peak is then also said as a share of it); ``names``:
    what the process's names said around the recording (``gpumagic.capture.memory.names``: a
    ``MemoryNames`` of ``NameTable.from_records(...)`` tables written where it ran, and the model's
    ``module_tree``), which name its blocks and modules as ``%%gpuprofile --memory`` does."""
    snap = read_snapshot(path, device=device)
    label = (
        os.path.basename(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else "snapshot"
    )
    analysis = analyze_memory(snap, device_memory=device_memory, names=names)
    return MemoryView(analysis, label=label, top=top)
