"""Run code under torch.profiler and return a Trace (``%%gpuprofile``'s default backend).

The cell runs inside an NVTX range *and* a ``record_function`` of the same name: torch.profiler does not record
NVTX ranges (pytorch/kineto #318), nsys does not see ``record_function``; with both, either tool labels the cell.
The NVTX range is pushed and popped around the run in ``finally``, so a failing cell leaves NVTX balanced and the
profiler stopped (the context manager stops it on the way out).
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

from ..trace import Trace
from .chrome_trace import load_trace

__all__ = ["CaptureResult", "capture", "nvtx_range"]


class CaptureResult:
    def __init__(self, trace: Trace, wall_ns: int) -> None:
        self.trace = trace
        self.wall_ns = wall_ns


class nvtx_range:
    """Push an NVTX range on enter and pop it on exit, whatever happens (no-op where nvtx is unavailable)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._pushed = False

    def __enter__(self) -> nvtx_range:
        try:
            import nvtx

            nvtx.push_range(self.label, domain="gpumagic")
            self._pushed = True
        except Exception:  # noqa: BLE001 - NVTX is a label, never a reason to fail the cell
            self._pushed = False
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pushed:
            import nvtx

            nvtx.pop_range(domain="gpumagic")


def capture(
    run: Callable[[], Any], label: str, *, cuda: bool | None = None, record_shapes: bool = True
) -> CaptureResult:
    """Profile ``run()`` (CPU ops, and CUDA kernels, memory operations and API calls where CUDA is available).

    Exceptions from ``run`` propagate after the profiler has stopped and the NVTX range is popped.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    if cuda is None:
        cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(prefix="gpumagic-", suffix=".json")
    os.close(fd)
    try:
        with warnings.catch_warnings():
            # torch's own "Profiler clears events at the end of each cycle" notice; the cell's warnings still show
            warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
            with profile(activities=activities, record_shapes=record_shapes) as prof:
                t0 = time.perf_counter_ns()
                try:
                    with nvtx_range(label), record_function(label):
                        try:
                            run()
                        finally:
                            if cuda:  # inside the range: the cell's wall time includes its GPU work
                                torch.cuda.synchronize()
                finally:
                    wall = time.perf_counter_ns() - t0
        prof.export_chrome_trace(path)
        trace = load_trace(path)
    finally:
        try:
            os.remove(path)
        except OSError:
            pass
    trace.meta.update(
        label=label,
        torch=torch.__version__,
        cuda_available=bool(cuda),
        cuda=torch.version.cuda,
    )
    if cuda and "device" not in trace.meta:
        trace.meta["device"] = torch.cuda.get_device_name()
    if not cuda:
        trace.meta.setdefault("device", "CPU")
    trace.meta.pop("source", None)
    return CaptureResult(trace, wall)
