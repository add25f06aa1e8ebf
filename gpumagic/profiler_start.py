"""torch.profiler's one-time start in a process, paid once, where gpumagic uses torch.profiler.

Why: kineto's first start in a process took 5-8 s on an H100 host (CUPTI's own start, driven directly, 0.03 s), and
the first capture of a process drops kernels at its start (pytorch #192021). Kernel times now come from CUPTI directly
(:mod:`gpumagic.cupti_direct`); torch.profiler is the fallback there (:mod:`gpumagic.gpu_activity`) and the engine of
``%%gpuprofile``, which needs CPU ops. Before the fallback's first capture, one throwaway capture absorbs both costs,
and its seconds are kept for the note that says what the start cost and how to avoid it. A ``%%gpuprofile`` capture
counts as the start (:func:`mark_started`).

A module of its own below both of its users (``gpumagic.gpu_activity`` and the capture backends).
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["mark_started", "profiler_state", "warm_profiler"]

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"warm": False, "startup": None}


def profiler_state() -> str:
    """``"ready"`` (torch.profiler has started in this process) or ``"cold"``."""
    return "ready" if _STATE["warm"] else "cold"


def mark_started() -> None:
    """A torch.profiler CUDA capture ran in this process (``%%gpuprofile``): the one-time start is paid."""
    _STATE["warm"] = True


def _throwaway_capture(device: Any) -> None:
    """One capture of one tiny kernel on a stream of its own, waited for on that stream only."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    device = torch.device(device)
    side = torch.cuda.Stream(device)
    with torch.cuda.device(device), torch.cuda.stream(side):
        x = torch.ones(1, device=device)
        side.synchronize()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with profile(activities=[ProfilerActivity.CUDA]):
                x.add_(1)
                side.synchronize()


def warm_profiler(device: Any, capture: Callable[[Any], None] = _throwaway_capture) -> float | None:
    """Start torch.profiler if this process has not yet; the seconds it took, or None where it had started before.

    An error (another CUPTI subscriber such as nsys) propagates and leaves the process unstarted.
    """
    with _LOCK:
        if _STATE["warm"]:
            return None
        t0 = time.perf_counter()
        capture(device)
        _STATE["warm"] = True
        _STATE["startup"] = time.perf_counter() - t0
        return _STATE["startup"]
