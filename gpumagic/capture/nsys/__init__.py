"""Nsight Systems: ``backend.capture`` runs a cell in a subprocess under nsys, ``warm`` keeps one
child under nsys per kernel, ``inplace`` profiles where the kernel itself runs under nsys,
``ranks`` (with ``rank_launch``) runs ``--nproc`` ranks, and ``sqlite`` reads an export into a
Trace (``columns``, ``processes``, ``gpu_metrics`` and ``narrow`` are its parts).
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
