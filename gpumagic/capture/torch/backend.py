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

import os
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from types import CodeType
from typing import Any

from ...gpu_activity.profiler_start import inductor_import_deferred, mark_started
from ...trace.coverage import recorded_kinds
from .. import Capture
from ..cell import Cell, loop_notes, namespace_or_new, run_cell
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
from ..marks.cell_lines import capped_lines, marked_cell, reset_runs
from ..marks.code_marks import moved_ranges
from ..marks.function_ranges import function_ranges, function_table, with_their_globals
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
    from torch.profiler import ProfilerActivity, profile, record_function

    opts = options or TorchProfilerOptions()
    cuda = torch.cuda.is_available() if opts.cuda is None else opts.cuda
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    ns = namespace_or_new(namespace)
    runnable = marked_cell(cell) if isinstance(cell, str) and opts.module_ranges else Cell.of(cell)
    reset_runs()  # each line's ranges counted from this capture's first run
    refuse_if_running()
    refuse_profiler_calls(runnable.source, ns)
    prof: Any = None
    # the functions the cell calls, marked with their lines in the captured runs
    table = function_table(ns, runnable.source) if opts.module_ranges else []
    functions: list[dict[str, Any]] = []

    @contextmanager
    def outside() -> Iterator[None]:
        with watch_for_profilers() as seen:
            yield
        refuse_started(seen)
        refuse_if_running(after_warmup=True)

    @contextmanager
    def inside() -> Iterator[None]:
        nonlocal prof
        prof = profile(
            activities=activities,
            record_shapes=opts.record_shapes,
            with_modules=opts.with_modules,
            with_stack=opts.with_stack,
        )
        around = ExitStack()
        try:
            with (
                deferred_interrupts()
            ):  # a Ctrl-C while it starts: it starts, then it is stopped (finally)
                with quiet_profiler_stderr(), warnings.catch_warnings():
                    # torch's own "Profiler clears events at the end of each cycle" notice
                    warnings.filterwarnings(
                        "ignore", message=".*Profiler clears events at the end of each cycle"
                    )
                    with (
                        inductor_import_deferred()
                    ):  # its hasattr(torch, "_inductor") would import Inductor
                        prof.__enter__()
                if cuda:
                    mark_started()
                around.callback(_stop, prof)
                around.enter_context(refuse_nested_profilers())
                around.enter_context(nvtx_range(label))
                around.enter_context(record_function(label))
                if opts.module_ranges:
                    around.enter_context(module_ranges(with_their_globals(ns, table)))
                    functions[:] = around.enter_context(function_ranges(ns, table))
            yield
        finally:
            with deferred_interrupts():  # a Ctrl-C while it stops waits until it has stopped
                around.close()

    value = run_cell(
        runnable,
        ns,
        warmup,
        iters,
        inside,
        torch.cuda.synchronize if cuda else lambda: None,
        outside,
    )
    path = None
    try:
        with (
            deferred_interrupts()
        ):  # a Ctrl-C here cannot leave the file behind: it is named before it is raised
            fd, path = tempfile.mkstemp(prefix="gpumagic-", suffix=".json")
            os.close(fd)
        prof.export_chrome_trace(path)
        trace = load_trace(path)
    finally:
        if path is not None:
            try:
                os.remove(path)
            except OSError:
                pass
    trace.meta.update(
        label=label, torch=torch.__version__, cuda_available=bool(cuda), cuda=torch.version.cuda
    )
    # what the profiler was asked to record, whatever the trace holds: CUDA kernels asked for and
    # missing were dropped (an error the self-check names), not left unrecorded
    trace.meta["recorded"] = recorded_kinds(
        {"ops", "nvtx", *(("kernels", "memops", "api") if cuda else ())}
    )
    if cuda and "device" not in trace.meta:
        trace.meta["device"] = torch.cuda.get_device_name()
    if not cuda:
        trace.meta.setdefault("device", "CPU")
    trace.meta.pop("source", None)
    code_meta(trace, runnable, ns, opts)
    if functions:
        trace.meta.setdefault("code", {})["functions"] = functions
    fused = fused_descriptions(fused_from_loaded_code(trace.kernels["name"].unique()))
    if fused:  # what each Inductor kernel fused, from the output code the compiled graphs run
        trace.meta["fused"] = fused
    return Capture(trace, notes=loop_notes(warmup, iters), value=value)


def code_meta(trace: Any, cell: Cell, namespace: Mapping[str, Any], opts: Any) -> None:
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


def _stop(prof: Any) -> None:
    with quiet_profiler_stderr():
        prof.__exit__(None, None, None)
