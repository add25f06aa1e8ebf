"""Run a cell under torch.profiler and return its Trace (``%%gpuprofile``'s default backend).

The captured runs sit inside an NVTX range *and* a ``record_function`` of the same name:
torch.profiler does not record NVTX ranges (pytorch/kineto #318), nsys does not see
``record_function``; with both, either tool labels the cell. The range is pushed and popped in
``finally`` and the profiler stopped in ``finally`` (a second Ctrl-C waits for the stop), so a
failing or interrupted cell leaves NVTX balanced and the profiler stopped. Kineto's C-level
start/stop chatter on stderr is dropped; the cell's own stderr is left alone
(``capture/guards.py``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from types import CodeType
from typing import Any

from ...edges import TorchValue
from ...gpu_activity.profiler_start import inductor_import_deferred, mark_started
from ...trace import Trace
from ...trace.coverage import recorded_kinds
from .. import Capture
from ..cell import Cell, loop_notes
from ..chrome.reader import load_trace
from ..guards import (
    deferred_interrupts,
    quiet_profiler_stderr,
    refuse_if_running,
    refuse_nested_profilers,
    refuse_profiler_calls,
    refuse_started,
    watch_for_profilers,
)
from ..in_process import CellHere
from ..marks.cell_lines import capped_lines
from ..marks.code_marks import moved_ranges
from ..marks.function_ranges import function_ranges, with_their_globals
from ..marks.module_ranges import module_ranges
from ..options import ITERS, WARMUP, TorchProfilerOptions
from .inductor_kernels import fused_descriptions, fused_from_loaded_code

__all__ = ["capture", "nvtx_range"]


@contextmanager
def nvtx_range(label: str) -> Iterator[None]:
    """An NVTX range in the ``gpumagic`` domain around the block, popped whatever happens (no-op
    without nvtx)."""
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
    """Run ``cell`` ``warmup`` times, then ``iters`` times under torch.profiler (CPU ops; CUDA
    kernels, memory operations and API calls where CUDA is available). Exceptions from the cell
    propagate after the profiler has stopped and the NVTX range is popped; the cell's assignments
    land in ``namespace``; ``Capture.value`` is the cell's value (its trailing expression's) from
    the last captured run.

    One profiler at a time (``capture/guards.py``): a profiler already running, or one the cell
    opens, is a :class:`~gpumagic.errors.NestedProfilerError` before the cell runs, not a crash."""
    import torch

    opts = options or TorchProfilerOptions()
    cuda = torch.cuda.is_available() if opts.cuda is None else opts.cuda
    here = CellHere.prepare(cell, namespace, marked=opts.module_ranges)
    refuse_if_running()
    refuse_profiler_calls(here.cell.source, here.namespace)
    profiler = _Profiler(opts, cuda, label, here)
    sync = torch.cuda.synchronize if cuda else lambda: None
    value = here.run(warmup, iters, profiler.captured, sync, _watched_warm_up)
    trace = _exported(profiler.prof)
    _run_meta(trace, label, cuda)
    code_meta(trace, here.cell, here.namespace, opts)
    if profiler.functions:
        trace.meta.setdefault("code", {})["functions"] = profiler.functions
    fused = fused_descriptions(fused_from_loaded_code(trace.kernels["name"].unique()))
    if fused:  # what each Inductor kernel fused, from the output code the compiled graphs run
        trace.meta["fused"] = fused
    return Capture(trace, notes=loop_notes(warmup, iters), value=value)


@contextmanager
def _watched_warm_up() -> Iterator[None]:
    """The warm-up, watched for a profiler the cell starts (refused before the capture), then
    checked for one still running."""
    with watch_for_profilers() as seen:
        yield
    refuse_started(seen)
    refuse_if_running(after_warmup=True)


class _Profiler:
    """torch.profiler over the captured runs (:meth:`captured`), the cell's NVTX range and
    ``record_function`` of its label inside it, and the by-code view's ranges where
    ``module_ranges`` asks for them. ``prof``: the profiler, once started; ``functions``: the
    functions marked, as their ranges give them back."""

    def __init__(self, opts: TorchProfilerOptions, cuda: bool, label: str, here: CellHere) -> None:
        self.opts, self.cuda, self.label, self.here = opts, cuda, label, here
        self.prof: TorchValue = None
        self.functions: list[dict[str, Any]] = []

    @contextmanager
    def captured(self) -> Iterator[None]:
        """Start the profiler and enter the ranges (a Ctrl-C meanwhile: all start, then all are
        closed); close the ranges and stop the profiler however the runs end (a Ctrl-C meanwhile
        waits until it has stopped)."""
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        self.prof = profile(
            activities=activities,
            record_shapes=self.opts.record_shapes,
            with_modules=self.opts.with_modules,
            with_stack=self.opts.with_stack,
        )
        around = ExitStack()
        try:
            with deferred_interrupts():
                _start(self.prof)
                if self.cuda:
                    mark_started()
                around.callback(_stop, self.prof)
                self._enter_ranges(around)
            yield
        finally:
            with deferred_interrupts():
                around.close()

    def _enter_ranges(self, around: ExitStack) -> None:
        from torch.profiler import record_function

        around.enter_context(refuse_nested_profilers())
        around.enter_context(nvtx_range(self.label))
        around.enter_context(record_function(self.label))
        if self.opts.module_ranges:
            ns, table = self.here.namespace, self.here.functions
            around.enter_context(module_ranges(with_their_globals(ns, table)))
            self.functions[:] = around.enter_context(function_ranges(ns, table))


def _start(prof: TorchValue) -> None:
    """Start the profiler without its start-up chatter: kineto's lines on stderr, torch's "Profiler
    clears events at the end of each cycle" notice, and the Inductor import that its look for
    ``torch._inductor`` would cause."""
    with quiet_profiler_stderr(), warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*Profiler clears events at the end of each cycle"
        )
        with inductor_import_deferred():
            prof.__enter__()


def _exported(prof: TorchValue) -> Trace:
    """The profiler's events as a Trace, through a Chrome trace file removed once read (a Ctrl-C
    cannot leave it behind: it is named before one is raised)."""
    path = None
    try:
        with deferred_interrupts():
            fd, path = tempfile.mkstemp(prefix="gpumagic-", suffix=".json")
            os.close(fd)
        prof.export_chrome_trace(path)
        return load_trace(path)
    finally:
        if path is not None:
            with contextlib.suppress(OSError):
                os.remove(path)


def _run_meta(trace: Trace, label: str, cuda: bool) -> None:
    """The run's facts on ``trace``: the label, torch's and CUDA's versions, the device, and what
    the profiler was asked to record, whatever the trace holds (CUDA kernels asked for and missing
    were dropped, an error the self-check names, not left unrecorded)."""
    import torch

    trace.meta.update(
        label=label, torch=torch.__version__, cuda_available=bool(cuda), cuda=torch.version.cuda
    )
    trace.meta["recorded"] = recorded_kinds(
        {"ops", "nvtx", *(("kernels", "memops", "api") if cuda else ())}
    )
    if cuda and "device" not in trace.meta:
        trace.meta["device"] = torch.cuda.get_device_name()
    if not cuda:
        trace.meta.setdefault("device", "CPU")
    trace.meta.pop("source", None)


def code_meta(
    trace: Trace, cell: Cell, namespace: Mapping[str, Any], opts: TorchProfilerOptions
) -> None:
    """What the by-code view needs beside the trace: the cell's source (its lines' text), whether
    modules were marked (a cell that ran none says so, not "record them"), and the ranges of the
    cell's lines and modules, moved out of the range table (they are the view's, not the user's
    ranges) into ``meta["code"]``. Where the Python tracer gave module frames instead
    (``with_stack``), their dotted names matched to the namespace's models."""
    from ...trace.by_code import module_paths
    from ...trace.code_rows import dotted_names
    from ..marks.module_ranges import roots_of

    trace.meta["with_modules"] = bool(opts.module_ranges or opts.with_stack)
    if cell.source:
        trace.meta["cell_source"] = cell.source
    # the ranges are ops (_RecordFunctionFast) or, with an older torch, record_function ranges
    code = trace.meta.setdefault("code", {})
    if capped_lines():
        code["capped"] = capped_lines()
    trace.nvtx = moved_ranges(trace.nvtx, "text", code)
    trace.ops = moved_ranges(trace.ops, "name", code)
    if "modules" not in (trace.meta.get("code") or {}):
        paths = module_paths(trace)
        if paths:
            trace.meta["module_names"] = dotted_names(paths, roots_of(namespace))


def _stop(prof: TorchValue) -> None:
    with quiet_profiler_stderr():
        prof.__exit__(None, None, None)
