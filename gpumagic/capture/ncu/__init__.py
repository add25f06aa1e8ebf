"""Nsight Compute: ``backend.capture`` runs a cell under ncu (a first pass that finds the kernels,
``rank``; the profiled process started beside it, ``early``), ``read`` turns a report into tables
and ``tensor`` reads its tensor-core work.
"""

from __future__ import annotations

from typing import Any

__all__ = ["capture"]


def __getattr__(name: str) -> Any:
    # The face's one name, loaded on first use: a reader of this folder's files (a job's worker
    # reading exports, say) need not import the backend's subprocess machinery.
    if name == "capture":
        from .backend import capture

        return capture
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
