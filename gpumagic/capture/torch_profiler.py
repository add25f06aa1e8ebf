"""Run a cell under torch.profiler and return its Trace (``%%gpuprofile``'s default backend).

The captured runs sit inside an NVTX range *and* a ``record_function`` of the same name: torch.profiler does not
record NVTX ranges (pytorch/kineto #318), nsys does not see ``record_function``; with both, either tool labels the
cell. The range is pushed and popped in ``finally`` and the profiler is a context manager, so a failing cell leaves
NVTX balanced and the profiler stopped.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import CodeType
from typing import Any

from . import Capture
from .cell import Cell, loop_notes, namespace_or_new, run_cell
from .chrome_trace import load_trace
from .options import ITERS, WARMUP, TorchProfilerOptions

__all__ = ["capture", "nvtx_range"]


@contextmanager
def nvtx_range(label: str) -> Iterator[None]:
    """An NVTX range in the ``gpumagic`` domain around the block, popped whatever happens (no-op without nvtx)."""
    pushed = False
    try:
        import nvtx

        nvtx.push_range(label, domain="gpumagic")
        pushed = True
    except Exception:  # noqa: BLE001 - NVTX is a label, never a reason to fail the cell
        pass
    try:
        yield
    finally:
        if pushed:
            nvtx.pop_range(domain="gpumagic")


def capture(
    cell: Cell | str | CodeType | Callable[[], Any],
    label: str,
    *,
    namespace: Mapping[str, Any] | None = None,
    warmup: int = WARMUP,
    iters: int = ITERS,
    options: TorchProfilerOptions | None = None,
) -> Capture:
    """Run ``cell`` ``warmup`` times, then ``iters`` times under torch.profiler (CPU ops; CUDA kernels, memory
    operations and API calls where CUDA is available). Exceptions from the cell propagate after the profiler has
    stopped and the NVTX range is popped; the cell's assignments land in ``namespace``."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    opts = options or TorchProfilerOptions()
    cuda = torch.cuda.is_available() if opts.cuda is None else opts.cuda
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    ns = namespace_or_new(namespace)
    prof: Any = None

    @contextmanager
    def inside() -> Iterator[None]:
        nonlocal prof
        with warnings.catch_warnings():
            # torch's own "Profiler clears events at the end of each cycle" notice; the cell's warnings still show
            warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
            with profile(activities=activities, record_shapes=opts.record_shapes) as prof:  # noqa: SIM117
                with nvtx_range(label), record_function(label):
                    yield

    run_cell(Cell.of(cell), ns, warmup, iters, inside, torch.cuda.synchronize if cuda else lambda: None)
    fd, path = tempfile.mkstemp(prefix="gpumagic-", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        trace = load_trace(path)
    finally:
        try:
            os.remove(path)
        except OSError:
            pass
    trace.meta.update(label=label, torch=torch.__version__, cuda_available=bool(cuda), cuda=torch.version.cuda)
    if cuda and "device" not in trace.meta:
        trace.meta["device"] = torch.cuda.get_device_name()
    if not cuda:
        trace.meta.setdefault("device", "CPU")
    trace.meta.pop("source", None)
    return Capture(trace, notes=loop_notes(warmup, iters))
