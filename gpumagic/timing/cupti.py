"""GPU busy time per call from the activity records of a short pass (CUPTI, directly or through
torch.profiler).

Why CUPTI at all: CUDA events bracket a stream, gaps between kernels included; only the activity
records say how long the GPU actually ran this statement's kernels. That figure is ``kernel_time``
in the result, and the truth that ``benchmarks/timing_accuracy.py`` checks the per-call median
against. The records come from :func:`gpumagic.gpu_activity.record`: CUPTI driven directly (0.03 s
to start) where ``cupti-python`` is installed, else torch.profiler (seconds, once per process).
torch is imported on first use only.
"""

from __future__ import annotations

from collections.abc import Callable

from ..gpu_activity import record
from ..gpu_activity.cupti_direct import Recording
from ..trace.intervals import union_length

__all__ = ["busy_per_call", "gpu_activity_names", "record_calls", "span_and_busy_per_call"]


def record_calls(
    run: Callable[[int], None], calls: int, preload: int = 0, direct: bool = True
) -> Recording:
    """The activity records of ``run(calls)``, ``preload`` calls issued first, outside the
    recording.

    The preload keeps the GPU busy (and at its sustained clocks) while the recording starts: a GPU
    left idle speeds up, and the figure would describe a GPU the statement never runs on. Its work
    is left out by identity (its launches are not in the recording), never by time window.
    """
    import torch

    if preload:
        run(preload)
    else:
        torch.cuda.synchronize()

    def captured() -> None:
        run(calls)
        torch.cuda.synchronize()

    return record(captured, direct=direct)


def busy_per_call(
    rec: Recording,
    calls: int,
    device_index: int | None = None,
    exclude: frozenset[str] = frozenset(),
) -> tuple[float, float] | None:
    """GPU busy seconds per call and GPU activities per call in a recording of ``calls`` calls; None
    without any. Activities named in ``exclude`` (an L2 flush's own kernels) are left out."""
    intervals = rec.intervals(device_index, exclude)
    if not intervals:
        return None
    return union_length(intervals) * 1e-9 / calls, len(intervals) / calls


def span_and_busy_per_call(
    run: Callable[[int], None],
    calls: int,
    device_index: int | None = None,
    preload: int = 0,
    direct: bool = True,
) -> tuple[float, float] | None:
    """The two truths of one recording of ``run(calls)``: (span, busy) seconds per call.

    Span: first activity start to last activity end, over the calls: what back-to-back calls cost on
    the stream, gaps between kernels included (the truth of the per-call median). Busy: the union of
    the activity intervals over the calls (the truth of the kernel time). Taken from the same
    recording, so the same clocks. None without activity.
    """
    intervals = record_calls(run, calls, preload, direct).intervals(device_index)
    if not intervals:
        return None
    span = max(e for _, e in intervals) - min(s for s, _ in intervals)
    return span * 1e-9 / calls, union_length(intervals) * 1e-9 / calls


def gpu_activity_names(run: Callable[[], None]) -> frozenset[str]:
    """Names of the GPU activities ``run()`` launches (recorded once)."""
    import torch

    torch.cuda.synchronize()

    def captured() -> None:
        run()
        torch.cuda.synchronize()

    return frozenset(a.name for a in record(captured).gpu())
