"""torch.profiler in this process: ``backend.capture`` runs a cell under it (``%%gpuprofile``'s
default), and ``inductor_kernels`` reads what each Inductor kernel fused.
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
