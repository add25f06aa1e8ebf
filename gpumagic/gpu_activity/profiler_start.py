"""torch.profiler's one-time start in a process, paid once, where gpumagic uses torch.profiler.

Why: kineto's first start in a process took 5-8 s on an H100 host (CUPTI's own start, driven
directly, 0.03 s), and the first capture of a process drops kernels at its start (pytorch #192021).
Kernel times now come from CUPTI directly (:mod:`gpumagic.gpu_activity.cupti_direct`);
torch.profiler is the fallback there (:mod:`gpumagic.gpu_activity`) and the engine of
``%%gpuprofile``, which needs CPU ops. Before the fallback's first capture, one throwaway capture
absorbs both costs, and its seconds are kept for the note that says what the start cost and how to
avoid it. A ``%%gpuprofile`` capture counts as the start (:func:`mark_started`).

Most of that first start was not kineto's: torch.profiler's ``prepare_trace`` asks ``hasattr(torch,
"_inductor")`` to read one Inductor setting, and ``torch``'s lazy-module ``__getattr__`` answers by
importing Inductor, which imports dynamo, sympy and torch.distributed's FSDP: 2-3 s of a 3.1 s first
start on an H200 (cProfile and ``py-spy dump --native`` of the start,
``benchmarks/kineto_first_start.py``). Where Inductor is not loaded its settings cannot have been
changed, so the answer is known without the import: :func:`inductor_import_deferred` lets gpumagic's
own profiler start skip it, and leaves every other ``torch._inductor`` access (the user's own
profiler included) as it was.

A module of its own below both of its users (``gpumagic.gpu_activity`` and the capture backends).
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..edges import TorchValue

__all__ = [
    "inductor_import_deferred",
    "mark_started",
    "profiler_state",
    "profiling",
    "warm_profiler",
]

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"warm": False, "startup": None}


def profiler_state() -> str:
    """``"ready"`` (torch.profiler has started in this process) or ``"cold"``."""
    return "ready" if _STATE["warm"] else "cold"


@contextmanager
def inductor_import_deferred() -> Iterator[None]:
    """While a gpumagic profiler starts, ``hasattr(torch, "_inductor")`` answers False instead of
    importing Inductor.

    Only where Inductor is not loaded (its settings are then the defaults torch.profiler reads them
    for: CUDA graphs off) and torch keeps its lazy modules in a set, as every release since 2.0
    does; otherwise nothing changes. The entry is back in torch's table when the block ends, however
    it ends.
    """
    torch = sys.modules.get("torch")
    lazy = getattr(torch, "_lazy_modules", None)
    if "torch._inductor" in sys.modules or not isinstance(lazy, set) or "_inductor" not in lazy:
        yield
        return
    lazy.discard("_inductor")
    try:
        yield
    finally:
        lazy.add("_inductor")


@contextmanager
def profiling(prof: TorchValue) -> Iterator[TorchValue]:
    """``with prof:`` for a torch.profiler of gpumagic's own: started without importing Inductor
    (:func:`inductor_import_deferred`), stopped however the block ends."""
    with inductor_import_deferred():
        prof.__enter__()
    try:
        yield prof
    finally:
        prof.__exit__(None, None, None)


def mark_started() -> None:
    """A torch.profiler CUDA capture ran in this process (``%%gpuprofile``): the one-time start is
    paid."""
    _STATE["warm"] = True


def _throwaway_capture(device: TorchValue) -> None:
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
            with profiling(profile(activities=[ProfilerActivity.CUDA])):
                x.add_(1)
                side.synchronize()


def warm_profiler(
    device: TorchValue, capture: Callable[[TorchValue], None] = _throwaway_capture
) -> float | None:
    """Start torch.profiler if this process has not yet; the seconds it took, or None where it had
    started before.

    An error (another CUPTI subscriber such as nsys) propagates and leaves the process unstarted.
    """
    with _LOCK:
        if _STATE["warm"]:
            return None
        t0 = time.perf_counter()
        capture(device)
        _STATE["warm"] = True
        took = time.perf_counter() - t0
        _STATE["startup"] = took
        return took
