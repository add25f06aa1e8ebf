"""``%%gpuprofile``'s runs: torch.profiler in this process, Nsight Systems or Nsight Compute in a
subprocess. The magic (:mod:`.magics`) parses the line; each backend here takes one checked
:class:`CellRun` (the prelude every backend shares: warm-up, iterations, label, source, ``-o``),
captures, shows the report and returns the cell's value."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.display import display

from ..edges import UserValue
from .glue import (
    INTERRUPTED,
    capture_errors,
    compile_cell,
    ends_with_semicolon,
    running_cell,
    unquote,
)

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..capture import Capture
    from ..render.options import ReportOptions
    from .config import GpuMagicsConfig

__all__ = ["CellRun", "profile_in_process_or_nsys", "profile_ncu"]

NCU_ONLY = ("--kernels", "--launch-count", "--ncu-set", "--no-clock-control")


@dataclass(frozen=True)
class CellRun:
    """What every ``%%gpuprofile`` backend takes from the line and the cell, checked once."""

    label: str
    source: str
    warmup: int
    iters: int
    output: str | None
    #: the cell as the user wrote it (``source`` is IPython's transform: ``%time x`` becomes
    #: ``get_ipython().run_line_magic(...)``), for the by-line view's source column
    written: str = ""

    @classmethod
    def from_args(
        cls, config: GpuMagicsConfig, shell: InteractiveShell, args: argparse.Namespace, cell: str
    ) -> CellRun:
        """Check -w, -n, -o and the cell body; the label (``-l``, else ``cell:N``) and the source
        as IPython transforms it. Marks the running cell for the report's BokehJS."""
        from ..render import embed

        warmup = config.profile_warmup if args.warmup is None else args.warmup
        if warmup < 0:
            raise UsageError("%%gpuprofile: -w must be 0 or more")
        if args.iters < 1:
            raise UsageError("%%gpuprofile: -n must be at least 1")
        if args.output is not None and not args.output.isidentifier():
            raise UsageError(f"%%gpuprofile: -o needs a variable name, not {args.output!r}")
        if not cell.strip():
            raise UsageError("%%gpuprofile needs code in the cell body")
        embed.ONCE.current_cell = lambda: running_cell(shell)
        label = args.label or f"cell:{shell.execution_count}"
        return cls(label, shell.transform_cell(cell), warmup, args.iters, args.output, cell)

    def value(self, value: UserValue) -> UserValue:
        """The cell's value as IPython would show it: hidden by a trailing ';'."""
        return None if value is None or ends_with_semicolon(self.source) else value


def profile_in_process_or_nsys(
    config: GpuMagicsConfig, shell: InteractiveShell, args: argparse.Namespace, cell: str
) -> UserValue:
    """``%%gpuprofile`` (torch.profiler here) and ``--nsys`` (Nsight Systems in a subprocess): the
    capture, the report, its history row and ``--vs``'s diff."""
    run = CellRun.from_args(config, shell, args, cell)
    report_options = config.report_options(
        top=args.top, timeline=False if args.no_timeline else None
    )
    _refuse_misplaced_options(args, report_options.top)
    from ..api.diff import versus_saved
    from ..capture.chrome.reader import check_writable
    from ..history.profiles import ProfileRecorder

    backend, runnable, options, prefix, where = _backend_for(config, shell, args, run)
    with capture_errors(prefix, said=bool(args.nsys), fallback=INTERRUPTED):
        if args.trace:
            check_writable(args.trace, "--trace")  # before the capture, not after it
        # an unknown --vs reference is said before the cell runs
        saver = ProfileRecorder(config.history, label=args.label, vs=unquote(args.vs))
        captured = backend.capture(
            runnable,
            run.label,
            namespace=shell.user_ns,
            warmup=run.warmup,
            iters=run.iters,
            options=options,
        )
    if args.nsys and where:
        captured.notes.insert(0, where)
    if args.counters and not args.nsys:
        from ..gpu_activity.pm_sampling import in_process_counters_line

        captured.notes.insert(0, in_process_counters_line())
    shown = time.perf_counter()
    _name_the_cells(captured.trace.meta, run, shell)
    show_report(shell, captured, run, report_options, trace_path=args.trace)
    if captured.phases is not None:
        captured.phases.add("report", time.perf_counter() - shown)
        if args.phases:
            display(captured.phases)
    outcome = saver.record(captured, run.source, args.trace)  # saved to the history
    outcome.print()
    versus = versus_saved(outcome)
    if versus is not None:
        display(versus)
    return run.value(captured.value)  # IPython shows it as the cell's Out[n], after the report


def _refuse_misplaced_options(args: argparse.Namespace, top: int) -> None:
    """Options of another tool, a --top below 1, or no PyTorch: said before anything runs."""
    ncu_only = (args.kernels, args.launch_count is not None, args.ncu_set, args.no_clock_control)
    if any(ncu_only) or args.ncu_args:
        raise UsageError(f"%%gpuprofile: {', '.join(NCU_ONLY)} go with --ncu")
    if top < 1:
        raise UsageError("%%gpuprofile: --top must be at least 1")
    if not args.nsys and (args.setup or args.nsys_args or args.timeout is not None or args.phases):
        raise UsageError(
            "%%gpuprofile: --setup, --nsys-args, --timeout and --phases go with --nsys"
        )
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UsageError("%%gpuprofile needs PyTorch (torch.profiler): pip install torch") from None


def _backend_for(
    config: GpuMagicsConfig, shell: InteractiveShell, args: argparse.Namespace, run: CellRun
) -> tuple[Any, Any, Any, str, str]:
    """(backend module, what it runs, its options, the error prefix, the note on where it ran):
    torch.profiler here; with --nsys, nsys in place where this kernel runs under Nsight Systems and
    the options allow it, else a subprocess (and the note says why)."""
    if not args.nsys:
        from ..capture.torch import backend

        return backend, compile_cell(shell, run.source, lines=True), None, "%%gpuprofile", ""
    from ..capture.nsys import backend as nsys_backend
    from ..capture.nsys import inplace as nsys_inplace

    options = config.nsys_options(
        setup=unquote(args.setup),
        extra_args=unquote(args.nsys_args) or None,
        timeout=args.timeout,
        nproc=args.nproc,
        counters=args.counters or None,
    )
    prefix = "%%gpuprofile --nsys"
    if nsys_inplace.session() is None:
        where = (
            "Ran in a subprocess: this kernel is not under Nsight Systems (`python -m "
            "gpumagic kernel install --nsys` installs one that profiles cells in place)."
        )
    elif (why_not := in_place_refusal(args)) is not None:
        where = f"Ran in a subprocess, not in place: {why_not}."
    else:
        return nsys_inplace, compile_cell(shell, run.source, lines=True), options, prefix, ""
    return nsys_backend, run.source, options, prefix, where


def _name_the_cells(meta: dict[str, Any], run: CellRun, shell: InteractiveShell) -> None:
    """The cell's text as written (line for line, for the by-line view), and "In [3]" for each
    function an earlier cell made."""
    written = run.written.splitlines()
    if "cell_source" in meta and len(written) == len(str(meta["cell_source"]).splitlines()):
        meta["cell_source"] = run.written
    if (meta.get("code") or {}).get("functions"):
        numbers = getattr(getattr(shell, "compile", None), "_filename_map", None)
        if isinstance(numbers, dict):
            files = {f.get("file") for f in meta["code"]["functions"]}
            meta["code"]["cells"] = {k: numbers[k] for k in files if k in numbers}


def profile_ncu(
    config: GpuMagicsConfig, shell: InteractiveShell, args: argparse.Namespace, cell: str
) -> UserValue:
    """``%%gpuprofile --ncu``: the cell under Nsight Compute in a subprocess; an NcuReport shown."""
    if args.nsys or args.trace or args.nsys_args or args.vs or args.counters:
        raise UsageError(
            "%%gpuprofile --ncu: --nsys, --trace, --nsys-args, --counters and --vs go with the "
            "other backends"
        )
    run = CellRun.from_args(config, shell, args, cell)
    import torch

    if not torch.cuda.is_available():
        raise UsageError(
            "%%gpuprofile --ncu needs a CUDA GPU: Nsight Compute measures kernels on the device, "
            "and none is visible here (torch.cuda.is_available() is False). A saved report opens "
            "with gpumagic.load_ncu(path)."
        )
    from ..capture.ncu import backend
    from ..render.ncu_view import NcuReport

    with capture_errors("%%gpuprofile --ncu", said=True, fallback=""):
        options = config.ncu_options(
            setup=unquote(args.setup),
            extra_args=unquote(args.ncu_args) or None,
            timeout=args.timeout,
            top=args.top,
            kernel_filter=unquote(args.kernels),
            launch_count=args.launch_count,
            section_set=args.ncu_set,
            clock_control="none" if args.no_clock_control else None,
        )
        got = backend.capture(
            run.source,
            run.label,
            namespace=shell.user_ns,
            warmup=run.warmup,
            iters=run.iters,
            options=options,
        )
    from ..capture.nsys.inplace import session

    if session() is not None:
        got.notes.insert(
            0,
            "Ran in a subprocess, not in place: Nsight Compute profiles only a process it starts "
            "itself (ncu's launch modes), and this kernel was started by nsys.",
        )
    report = NcuReport(
        got.data, label=run.label, notes=got.notes, seconds=got.seconds, phases=got.phases
    )
    if run.output:
        shell.user_ns[run.output] = report
    display(report)
    return run.value(got.value)


def in_place_refusal(args: argparse.Namespace) -> str | None:
    """Why a cell in a kernel under nsys runs in a subprocess after all; None where it runs in
    place."""
    if args.nproc and args.nproc > 1:
        return "--nproc runs its ranks as processes of their own"
    if args.setup:
        return "--setup is code for a subprocess (here it would change the notebook's namespace)"
    return None


def show_report(
    shell: InteractiveShell,
    captured: Capture,
    run: CellRun,
    options: ReportOptions,
    *,
    trace_path: str | None,
) -> None:
    """One way to show any backend's capture: the report, the Chrome trace if asked, ``-o``,
    display."""
    from ..render.report import ProfileReport

    report = ProfileReport(
        captured.trace,
        label=run.label,
        top=options.top,
        timeline=options.timeline,
        max_glyphs_per_lane=options.max_glyphs_per_lane,
        notes=list(captured.notes),
    )
    if run.output:
        shell.user_ns[run.output] = report  # first: a failing write below must not lose it
    failed: OSError | None = None
    if trace_path:
        try:
            report.to_chrome_trace(trace_path)
            report.notes.append(f"Chrome/Perfetto trace written to {trace_path}")
        except OSError as exc:
            failed = exc
    display(report)
    if failed is not None:
        kept = f"; the report is in {run.output}" if run.output else ""
        raise UsageError(f"%%gpuprofile --trace: {trace_path} was not written ({failed}){kept}")
