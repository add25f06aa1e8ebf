"""The profiler helpers: GPU activity intervals from torch.profiler (CUPTI), and GPU busy time per call.

Why CUPTI at all: CUDA events bracket a stream, gaps between kernels included; only the activity records say how
long the GPU actually ran this statement's kernels. That figure is ``kernel_time`` in the result, and the truth
that ``benchmarks/timing_accuracy.py`` checks the per-call median against. torch is imported on first use only.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

from ..intervals import union_length

__all__ = ["busy_per_call", "gpu_activity_names", "gpu_intervals", "warm_profiler"]

#: Whether this process has already paid for the profiler's first start (see :func:`warm_profiler`).
_PROFILER_WARM = False


def gpu_intervals(
    prof: Any, device_index: int | None = None, launched_only: bool = True, exclude: frozenset[str] = frozenset()
) -> list[tuple[int, int]]:
    """(start_ns, end_ns) of the GPU activities (kernels, memcpy, memset) in a finished torch.profiler capture.

    With ``launched_only``, only activities whose correlation id matches a CUDA API call recorded in the same
    capture are kept: work launched before the capture started (a preload that keeps the GPU busy while the
    profiler starts) is left out by identity, never by time window. Activities named in ``exclude`` (an L2 flush's
    own kernels) are left out too.
    """
    gpu, launched = [], set()
    for ev in prof.profiler.kineto_results.events():
        if str(ev.device_type()).endswith("CUDA"):
            if device_index is None or ev.device_index() == device_index:
                gpu.append(ev)
        elif ev.correlation_id():
            launched.add(ev.correlation_id())
    keep = (lambda ev: ev.correlation_id() in launched) if launched_only and launched else (lambda ev: True)
    return [(ev.start_ns(), ev.start_ns() + ev.duration_ns()) for ev in gpu if keep(ev) and ev.name() not in exclude]


def busy_per_call(
    run: Callable[[int], None],
    calls: int,
    device_index: int | None = None,
    preload: int = 0,
    exclude: frozenset[str] = frozenset(),
) -> tuple[float, float] | None:
    """GPU busy seconds per call and GPU activities per call of ``run(calls)``, measured with CUPTI.

    ``preload`` calls are issued first, outside the capture, so that the GPU is busy (and at its sustained clocks)
    while the profiler starts: a GPU left idle for the profiler's start-up speeds up, and the figure would describe
    a GPU the statement never runs on. Returns None when no GPU activity was recorded.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    if preload:
        run(preload)
    else:
        torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run(calls)
            torch.cuda.synchronize()
    intervals = gpu_intervals(prof, device_index, exclude=exclude)
    if not intervals:
        return None
    return union_length(intervals) * 1e-9 / calls, len(intervals) / calls


def gpu_activity_names(run: Callable[[], None]) -> frozenset[str]:
    """Names of the GPU activities ``run()`` launches (profiled once)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
    return frozenset(
        ev.name() for ev in prof.profiler.kineto_results.events() if str(ev.device_type()).endswith("CUDA")
    )


def warm_profiler(device: Any) -> float | None:
    """Run one throwaway capture on ``device`` if this process has not profiled yet; the seconds it took, or None.

    CUPTI drops kernels at the start of a process's first capture (pytorch #192021), and its first start can take
    seconds (6.5 s seen on an H100 VM): the throwaway capture absorbs both, once per process. An error (another
    CUPTI subscriber such as nsys) propagates and leaves the process unwarmed.
    """
    global _PROFILER_WARM
    if _PROFILER_WARM:
        return None
    import torch

    index = torch.device(device).index
    t0 = time.perf_counter()
    busy_per_call(lambda n: torch.ones(1, device=device).add_(1), 1, index)
    startup = time.perf_counter() - t0
    _PROFILER_WARM = True
    return startup
