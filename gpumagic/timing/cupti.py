"""The profiler helpers: GPU activity intervals from torch.profiler (CUPTI), and GPU busy time per call.

Why CUPTI at all: CUDA events bracket a stream, gaps between kernels included; only the activity records say how
long the GPU actually ran this statement's kernels. That figure is ``kernel_time`` in the result, and the truth
that ``benchmarks/timing_accuracy.py`` checks the per-call median against. torch is imported on first use only.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from ..intervals import union_length
from ..profiler_start import profiler_state, start_background_warm, wait_for_profiler, warm_profiler

__all__ = [
    "busy_per_call",
    "gpu_activity_names",
    "gpu_intervals",
    "profiler_state",
    "span_and_busy_per_call",
    "start_background_warm",
    "wait_for_profiler",
    "warm_profiler",
]


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


def _captured_intervals(
    run: Callable[[int], None], calls: int, device_index: int | None, preload: int, exclude: frozenset[str]
) -> list[tuple[int, int]]:
    """The GPU activity intervals of ``run(calls)`` under a CUDA-only profiler capture, ``preload`` calls first."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    wait_for_profiler()  # never two captures at once: a background first start may still be running
    if preload:
        run(preload)
    else:
        torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run(calls)
            torch.cuda.synchronize()
    return gpu_intervals(prof, device_index, exclude=exclude)


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
    intervals = _captured_intervals(run, calls, device_index, preload, exclude)
    if not intervals:
        return None
    return union_length(intervals) * 1e-9 / calls, len(intervals) / calls


def span_and_busy_per_call(
    run: Callable[[int], None], calls: int, device_index: int | None = None, preload: int = 0
) -> tuple[float, float] | None:
    """The two truths of one capture of ``run(calls)``: (span, busy) seconds per call.

    Span: first activity start to last activity end, over the calls: what back-to-back calls cost on the stream,
    gaps between kernels included (the truth of the per-call median). Busy: the union of the activity intervals over
    the calls (the truth of the kernel time). Taken from the same capture, so the same clocks. None without activity.
    """
    intervals = _captured_intervals(run, calls, device_index, preload, frozenset())
    if not intervals:
        return None
    span = max(e for _, e in intervals) - min(s for s, _ in intervals)
    return span * 1e-9 / calls, union_length(intervals) * 1e-9 / calls


def gpu_activity_names(run: Callable[[], None]) -> frozenset[str]:
    """Names of the GPU activities ``run()`` launches (profiled once)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    wait_for_profiler()
    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
    return frozenset(
        ev.name() for ev in prof.profiler.kineto_results.events() if str(ev.device_type()).endswith("CUDA")
    )
