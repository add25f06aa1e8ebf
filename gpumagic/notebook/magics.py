"""IPython glue: parse the magic's options, reach the user namespace, print or display. No
measurement logic here."""

from __future__ import annotations

import sys
import tokenize
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from IPython.core.displayhook import DisplayHook
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from ..errors import CellError, GpuMagicError, Hint, TimingInterrupted
from ..timing import measure
from ..timing.statement import compile_statement
from .cell_syntax import labelled_statements, own_label, split_options, sweep_params
from .config import GpuMagicsConfig

__all__ = ["GpuMagics", "notebook_advice", "split_options"]

_INTERRUPTED = "Nothing was captured; no profiler is left running and the NVTX range is closed."


def notebook_advice(text: str, hints: Iterable[Hint]) -> str:
    """The core names a helpful setting as a keyword (``kernel_time=False``); in a notebook it is a
    ``%config``."""
    for hint in hints:
        text = text.replace(hint.script(), f"%config GpuMagics.{hint.setting} = {hint.value}")
    return text


def _usage_error(prefix: str, exc: GpuMagicError) -> UsageError:
    return UsageError(f"{prefix}: {notebook_advice(str(exc), exc.hints)}")


def _ends_with_semicolon(source: str) -> bool:
    """A trailing ';' hides a cell's value, as in any IPython cell."""
    try:
        return bool(DisplayHook.semicolon_at_end_of_expression(source))
    except (SyntaxError, tokenize.TokenError):
        return False


def _unquote(value: str | None) -> str | None:
    """magic_arguments keeps the quotes around a quoted value ('k = 1'): drop one matching pair."""
    if value and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


@contextmanager
def _capture_errors(prefix: str, *, said: bool, fallback: str) -> Iterator[None]:
    """How a capture's failure reaches the notebook, for every backend: the cell's own error as its
    traceback and a one-line UsageError; gpumagic's errors with their advice in %config words; an
    interrupt said on stderr (what a subprocess backend stopped, when ``said``, else ``fallback``)
    and raised again."""
    try:
        yield
    except CellError as exc:
        print(exc.traceback, file=sys.stderr)
        raise UsageError(str(exc).splitlines()[0]) from None
    except GpuMagicError as exc:
        raise _usage_error(prefix, exc) from None
    except KeyboardInterrupt as exc:
        print(f"{prefix}: interrupted. {(str(exc) if said else '') or fallback}", file=sys.stderr)
        raise


@magics_class
class GpuMagics(Magics, GpuMagicsConfig):
    """The gpumagic magics. Settings: ``%config GpuMagics`` lists them."""

    @magic_arguments()
    @argument(
        "-h",
        "--help",
        action="store_true",
        help="Show this help (a statement starting with -h: put -- first).",
    )
    @argument(
        "-n",
        dest="number",
        type=int,
        default=None,
        help="Calls per sample (default: enough for ~1 ms).",
    )
    @argument(
        "-r",
        dest="repeat",
        type=int,
        default=None,
        help="Samples (default: until the median is stable).",
    )
    @argument(
        "-w",
        dest="warmup",
        type=int,
        default=None,
        help="Warm-up calls (default: ~30 ms worth, at least 3).",
    )
    @argument(
        "-p",
        dest="precision",
        type=int,
        default=None,
        help="Significant digits in the output (default 3).",
    )
    @argument("-o", dest="output", action="store_true", help="Return the TimingResult.")
    @argument("-q", dest="quiet", action="store_true", help="Quiet: print nothing.")
    @argument(
        "--flush-l2",
        action="store_true",
        help="Flush the L2 cache before each call (cold-cache timing).",
    )
    @argument(
        "--graph",
        action="store_true",
        help="Capture the calls once in a CUDA graph and time its replays.",
    )
    @argument(
        "--cpu", action="store_true", help="Time on the host clock even where CUDA is available."
    )
    @argument(
        "--steady",
        action="store_true",
        default=None,
        help="Run the statement until the GPU's clock has settled (at most steady_time, 10 "
        "s) before sampling: "
        "a repeatable figure at the sustained clock.",
    )
    @argument(
        "--compare",
        action="store_true",
        help="Cell: time each line's statement, interleaved; a table.",
    )
    @argument(
        "--baseline",
        metavar="LABEL",
        help="--compare: the label speed-ups are taken against (the first).",
    )
    @argument(
        "--sweep",
        action="append",
        metavar="NAME=VALUES",
        help="Time at each value (n=256,512,1024; quote values with spaces); setup runs per "
        "point. Repeat for a grid.",
    )
    @argument(
        "--zip",
        action="store_true",
        help="--sweep: pair the i-th values of each parameter, not every mix.",
    )
    @argument(
        "-l",
        "--label",
        metavar="NAME",
        help="Save the result to the history under NAME (for --vs NAME later).",
    )
    @argument(
        "--vs",
        metavar="REF",
        help="Compare with a saved result: last (this statement here), a label or an id.",
    )
    @line_cell_magic
    def gputime(self, line: str = "", cell: str | None = None) -> Any:
        """Time a statement on the GPU: the %timeit of CUDA code.

        Usage, in line mode:
          %gputime [options] statement
        or in cell mode (the line is setup code, run once and not timed; the cell is the statement):
          %%gputime [options] [setup]
          statement...

        It synchronizes, runs the statement once cold (the first call is reported when it is much
        slower), warms up, then times samples of back-to-back calls with CUDA events on the current
        stream until the median is stable. A short extra pass measures the GPU kernel time per call
        (CUPTI) and the host time to issue a call: when the GPU idles between calls, the line says
        the statement is launch-bound. Without CUDA, or with the statement's tensors on the CPU, it
        times on the host clock and says "on CPU". The statement's own assignments do not change the
        namespace.

        Examples
        --------
        ::

          In [1]: %gputime A @ B 3.69 ms ± 21.4 µs per call on NVIDIA GB10 (median ± IQR of 87
          samples; GPU busy 99%; first call 189 ms)

          In [2]: %gputime x + 1 8.1 µs ± 0.2 µs per call on NVIDIA H100 (median ± IQR of 400
          samples × 50 calls; launch-bound: kernels 2.9 µs, host 8.0 µs per call)

        Variants and sizes (a table and a Bokeh chart; ``-o`` returns the Comparison or Sweep)::

          %%gputime --compare A = torch.randn(4096, 4096, device="cuda"); Ah = A.bfloat16()
          A @ A     # fp32
          Ah @ Ah   # bf16

          %%gputime --sweep n=256,512,1024,2048,4096 A = torch.randn(n, n, device="cuda")
          A @ A

        ``--compare`` times the cell's statements (one per line, a ``# label`` comment names each)
        interleaved, in rounds, so that a clock change does not favour one; speed-ups are against
        the first (``--baseline``). ``--sweep`` runs the setup and times the statement at each value
        (with ``--compare``, each statement).

        Each result is saved to the history (``%config GpuMagics.history``; '' turns it off), under
        ``-l NAME``; ``--vs last`` (or a label, or a result id) adds a line: the ratio to that run
        with its 95% interval from both runs' samples, faster/slower/no difference, and what
        differed (device, clocks, driver, versions).

        Settings: ``%config GpuMagics`` (time_budget, warmup_time, min_samples, rel_ci, kernel_time,
        ...).
        """
        opt_text, rest = split_options(line, self.gputime.parser)
        args = parse_argstring(self.gputime, opt_text)
        if args.help:
            print(self.gputime.parser.format_help())
            return None
        if cell is None:
            stmt, setup = rest, None
            if not stmt.strip():
                raise UsageError(
                    "%gputime needs a statement to time, e.g. %gputime torch.matmul(A, B)"
                )
        else:
            stmt, setup = cell, rest or None
            if not stmt.strip():
                raise UsageError(
                    "%%gputime needs a statement in the cell body (the first line is setup code)"
                )
        try:
            options = self.timing_options(
                calls_per_sample=args.number,
                samples=args.repeat,
                warmup_calls=args.warmup,
                precision=args.precision,
                flush_l2=args.flush_l2,
                graph=args.graph,
                cpu=args.cpu,
                steady=args.steady,
            )
            options.validate()
        except GpuMagicError as exc:
            raise _usage_error("%gputime", exc) from None

        recorder = self._recorder(
            args
        )  # before the measurement: an unknown --vs reference costs no time
        if args.compare or args.sweep:
            return self._gputime_many(args, stmt, setup, options, cell is not None, recorder)
        if args.baseline or args.zip:
            raise UsageError(
                "%gputime: "
                + ("--baseline goes with --compare" if args.baseline else "--zip goes with --sweep")
            )
        shell = self.shell
        compiled = compile_statement(
            shell.transform_cell(stmt),
            shell.transform_cell(setup) if setup else None,
            shell.user_ns,
            ast_transform=shell.transform_ast,
        )
        try:
            result = measure(compiled, shell.user_ns, options)
        except (
            TimingInterrupted
        ) as exc:  # Ctrl-C: show what was measured, then stop the cell (and the queue)
            if not args.quiet:
                print(notebook_advice(str(exc.result), exc.result.hints))
            raise
        result.advise_as(
            lambda text: notebook_advice(text, result.hints)
        )  # in %config words, also as Out[n]
        if not args.quiet:
            print(notebook_advice(str(result), result.hints))
        recorder.record(result, stmt, setup).print(quiet=args.quiet)
        return result if args.output else None

    def _recorder(self, args: Any) -> Any:
        """Where this run is saved (``-l``) and ``--vs``'s reference (a label or an id is looked up
        now)."""
        from ..history.saving import Recorder

        if args.vs and (args.compare or args.sweep):
            raise UsageError(
                "%gputime: --vs compares one statement with a saved run, not --compare or --sweep"
            )
        try:
            return Recorder(self.history, label=_unquote(args.label), vs=_unquote(args.vs))
        except GpuMagicError as exc:
            raise _usage_error("%gputime", exc) from None

    def _gputime_many(
        self, args: Any, stmt: str, setup: str | None, options: Any, cell_mode: bool, rec: Any
    ) -> Any:
        """``--compare`` and ``--sweep``: the statements (and values) read here, the timing done by
        the core."""
        from ..timing.compare import compare_compiled
        from ..timing.sweep import sweep

        if args.compare and not cell_mode:
            raise UsageError(
                "%gputime --compare needs the cell form: %%gputime --compare, one statement "
                "per line"
            )
        if args.baseline and not args.compare:
            raise UsageError(
                "%gputime: --baseline goes with --compare (it names one of the cell's labels)"
            )
        if args.zip and not args.sweep:
            raise UsageError(
                "%gputime: --zip goes with --sweep (it pairs the values of two parameters)"
            )
        shell = self.shell
        try:
            stmts = labelled_statements(stmt) if args.compare else {own_label(stmt): stmt}
            stmts = {label: shell.transform_cell(src) for label, src in stmts.items()}
            setup = shell.transform_cell(setup) if setup else None
            params = (
                sweep_params([_unquote(s) or "" for s in args.sweep], shell.user_ns)
                if args.sweep
                else None
            )
            if params is None:
                compiled = {
                    label: compile_statement(
                        src, setup, shell.user_ns, ast_transform=shell.transform_ast
                    )
                    for label, src in stmts.items()
                }
        except GpuMagicError as exc:
            raise _usage_error("%gputime", exc) from None
        try:
            if params is not None:
                at = {"zip": args.zip, "options": options, "ast_transform": shell.transform_ast}
                result = sweep(stmts, setup, params, shell.user_ns, **at)
            else:
                result = compare_compiled(compiled, shell.user_ns, options, baseline=args.baseline)
        except (
            TimingInterrupted
        ) as exc:  # Ctrl-C: show what was measured, then stop the cell (and the queue)
            if not args.quiet:
                partial = exc.result
                display(partial.advise_as(lambda text: notebook_advice(text, partial.hints)))
            raise
        except GpuMagicError as exc:
            raise _usage_error("%gputime", exc) from None
        result.advise_as(
            lambda text: notebook_advice(text, result.hints)
        )  # in %config words, also as Out[n]
        if not args.quiet and not args.output:  # with -o, shown once, as the cell's value
            display(result)
        rec.record_many(result, stmts, setup).print(quiet=args.quiet)
        return result if args.output else None

    @magic_arguments()
    @argument("-h", "--help", action="store_true", help="Show this help.")
    @argument(
        "-w",
        "--warmup",
        type=int,
        default=None,
        help="Runs of the cell before the capture (default 1; 0 allowed).",
    )
    @argument(
        "-n",
        "--iters",
        type=int,
        default=1,
        help="Runs of the cell inside the capture (default 1).",
    )
    @argument(
        "--trace",
        default=None,
        metavar="PATH",
        help="Also write a Chrome/Perfetto trace JSON to PATH.",
    )
    @argument(
        "--top", type=int, default=None, help="Rows in the kernel and other tables (default 15)."
    )
    @argument("--no-timeline", action="store_true", help="Leave the timeline out (smaller output).")
    @argument(
        "-o",
        dest="output",
        default=None,
        metavar="VAR",
        help="Keep the ProfileReport in variable VAR.",
    )
    @argument(
        "-l",
        "--label",
        default=None,
        help="Name of the NVTX range around the cell and of its saved profile.",
    )
    @argument(
        "--vs",
        metavar="REF",
        help="Diff with a saved profile: last (the previous one here), a label or an id.",
    )
    @argument(
        "--nsys",
        action="store_true",
        help="Re-run the cell in a subprocess under Nsight Systems instead.",
    )
    @argument(
        "--setup",
        default=None,
        metavar="CODE",
        help="--nsys: code run in the subprocess before the cell.",
    )
    @argument(
        "--nsys-args",
        default="",
        metavar="ARGS",
        help="--nsys: extra nsys profile arguments (shell-split).",
    )
    @argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="--nsys, --ncu: run time limit in seconds.",
    )
    @argument(
        "--nproc",
        type=int,
        default=None,
        metavar="N",
        help="--nsys: the cell as N torchrun ranks, 1 GPU each.",
    )
    @argument(
        "--ncu",
        action="store_true",
        help="Re-run the cell in a subprocess under Nsight Compute instead.",
    )
    @argument(
        "--kernels",
        metavar="FILTER",
        help="--ncu: ncu's kernel filter (NAME or regex:RE), not the top K.",
    )
    @argument(
        "--launch-count",
        type=int,
        metavar="N",
        help="--ncu: launches per kernel and launch config (1).",
    )
    @argument(
        "--ncu-set",
        metavar="SET",
        help="--ncu: an ncu section set, not SpeedOfLight + its roofline.",
    )
    @argument(
        "--no-clock-control",
        action="store_true",
        help="--ncu: leave GPU clocks free (ncu locks to base).",
    )
    @argument(
        "--ncu-args", default="", metavar="ARGS", help="--ncu: extra ncu arguments (shell-split)."
    )
    @argument(
        "--memory",
        action="store_true",
        help="Record the allocator's history instead: memory by category.",
    )
    @cell_magic
    def gpuprofile(self, line: str, cell: str) -> Any:
        """Profile a cell: every kernel it runs, what each one is, and a timeline.

        Usage:
          %%gpuprofile [options]
          cell body...

        The cell runs ``-w`` times as warm-up (outside the capture: lazy init, cuBLAS heuristics,
        autotuning), then ``-n`` times under torch.profiler inside an NVTX range and a
        record_function named after the cell. Its assignments land in the namespace as a normal run
        would leave them, and its last expression is the cell's value (Out[n], after the report; a
        trailing ';' hides it), from the last captured run. Shown: a summary line (device, GPU busy
        time, wall time, GPU utilisation, backend), findings, the kernel table (nsys'
        cuda_gpu_kern_sum columns plus each name decoded), torch ops (Self CPU vs GPU), CUDA API
        calls, NVTX ranges and a Bokeh timeline. Without CUDA it still runs and shows the CPU ops.
        With ``--nsys`` the cell runs in a subprocess under Nsight Systems instead (the names it
        reads are shipped there; the namespace is not changed; the value is shown as the subprocess
        printed it); with ``--nproc N`` it runs as N ranks under torchrun inside the one nsys run
        (``dist``, ``rank``, ``world_size``, ``local_rank`` and ``device`` are set in the cell; rank
        0's value is shown). One profiler at a time: a cell that opens its own profiler, or
        %%gpuprofile while one runs, is refused before the cell runs. With ``--ncu`` the cell runs
        in a subprocess under Nsight Compute instead: the ``--top`` kernels by GPU time (default 5;
        0: all), each with its duration, SM and memory throughput, FLOP/s, intensity, limiter and
        ncu's advice, and a roofline; the ``.ncu-rep`` is kept. Clocks are locked to base unless
        ``--no-clock-control``. Each profile's summaries are saved to the history (``-l NAME``
        labels it); ``--vs last`` (or a label, or an id) shows the diff against one. ``--memory``:
        the caching allocator's history instead: memory by category, the peak and what was alive
        there.

        Settings: ``%config GpuMagics`` (profile_warmup, profile_top, timeline_max_glyphs,
        nsys_path, ...).
        """
        try:
            args = parse_argstring(self.gpuprofile, line)
        except ValueError as exc:  # the line's own quoting (shlex): an unbalanced quote
            raise UsageError(
                f"%%gpuprofile: cannot split the options ({exc}): close each quote"
            ) from None
        if args.help:
            print(self.gpuprofile.parser.format_help())
            return None
        if args.nproc is not None and not args.nsys:
            raise UsageError(
                "%%gpuprofile: --nproc goes with --nsys (the ranks run under torchrun inside nsys)"
            )
        if (
            args.memory
        ):  # the allocator's history for the cell, not the kernel capture (memory_profile.py)
            from .memory_magic import memory_magic

            with _capture_errors("%%gpuprofile --memory", said=False, fallback=_INTERRUPTED):
                value = memory_magic(self, args, cell, show=display)
            return None if value is None or _ends_with_semicolon(cell) else value
        if args.ncu:
            return self._gpuprofile_ncu(args, cell)
        if (
            args.kernels
            or args.launch_count is not None
            or args.ncu_set
            or args.no_clock_control
            or args.ncu_args
        ):
            raise UsageError(
                "%%gpuprofile: --kernels, --launch-count, --ncu-set, --no-clock-control go "
                "with --ncu"
            )
        warmup = self._run_options(args, cell)
        report_options = self.report_options(
            top=args.top, timeline=False if args.no_timeline else None
        )
        if report_options.top < 1:
            raise UsageError("%%gpuprofile: --top must be at least 1")
        if not args.nsys and (args.setup or args.nsys_args or args.timeout is not None):
            raise UsageError("%%gpuprofile: --setup, --nsys-args and --timeout go with --nsys")
        try:
            import torch  # noqa: F401
        except ImportError:
            raise UsageError(
                "%%gpuprofile needs PyTorch (torch.profiler): pip install torch"
            ) from None

        from ..capture.chrome_trace import check_writable
        from ..history.profiles import ProfileRecorder

        shell = self.shell
        label = args.label or f"cell:{shell.execution_count}"
        source = shell.transform_cell(cell)
        if args.nsys:
            from ..capture import nsys as backend

            runnable: Any = source
            options: Any = self.nsys_options(
                setup=_unquote(args.setup),
                extra_args=_unquote(args.nsys_args) or None,
                timeout=args.timeout,
                nproc=args.nproc,
            )
            prefix = "%%gpuprofile --nsys"
        else:
            from ..capture import torch_profiler as backend
            from ..capture.cell import Cell, compile_tree

            filename = shell.compile.cache(
                source
            )  # registered with linecache: tracebacks show the cell's lines
            code, last = compile_tree(
                shell.transform_ast(shell.compile.ast_parse(source, filename)), filename
            )
            runnable, options, prefix = (
                Cell(source=source, code=code, last=last),
                None,
                "%%gpuprofile",
            )
        with _capture_errors(prefix, said=bool(args.nsys), fallback=_INTERRUPTED):
            if args.trace:
                check_writable(args.trace, "--trace")  # before the capture, not after it
            saver = ProfileRecorder(
                self.history, label=args.label, vs=_unquote(args.vs)
            )  # an unknown --vs: no run
            captured = backend.capture(
                runnable,
                label,
                namespace=shell.user_ns,
                warmup=warmup,
                iters=args.iters,
                options=options,
            )
        self._show(captured, label, report_options, trace_path=args.trace, output=args.output)
        display(
            *saver.record(captured, source, args.trace).shown()
        )  # saved to the history; --vs: the diff
        if captured.value is None or _ends_with_semicolon(source):
            return None
        return captured.value  # IPython shows it as the cell's Out[n], after the report

    def _gpuprofile_ncu(self, args: Any, cell: str) -> Any:
        """``%%gpuprofile --ncu``: the cell under Nsight Compute in a subprocess; an NcuReport
        shown."""
        if args.nsys or args.trace or args.nsys_args or args.vs:
            raise UsageError(
                "%%gpuprofile --ncu: --nsys, --trace, --nsys-args and --vs go with the other "
                "backends"
            )
        warmup = self._run_options(args, cell)
        import torch

        if not torch.cuda.is_available():
            raise UsageError(
                "%%gpuprofile --ncu needs a CUDA GPU: Nsight Compute measures kernels on the "
                "device, and none is "
                "visible here (torch.cuda.is_available() is False). A saved report opens "
                "with gpumagic.load_ncu(path)."
            )
        from ..capture import ncu as backend
        from ..render import embed
        from ..render.ncu_view import NcuReport

        shell, clocks = self.shell, "none" if args.no_clock_control else None
        label, source = args.label or f"cell:{shell.execution_count}", shell.transform_cell(cell)
        opts = dict(
            setup=_unquote(args.setup),
            extra_args=_unquote(args.ncu_args) or None,
            timeout=args.timeout,
        )
        opts.update(
            top=args.top, kernel_filter=_unquote(args.kernels), launch_count=args.launch_count
        )
        with _capture_errors("%%gpuprofile --ncu", said=True, fallback=""):
            options = self.ncu_options(**opts, section_set=args.ncu_set, clock_control=clocks)
            got = backend.capture(
                source,
                label,
                namespace=shell.user_ns,
                warmup=warmup,
                iters=args.iters,
                options=options,
            )
        embed.ONCE.current_cell = self._running_cell
        report = NcuReport(got.data, label=label, notes=got.notes, seconds=got.seconds)
        if args.output:
            shell.user_ns[args.output] = report
        display(report)
        return None if got.value is None or _ends_with_semicolon(source) else got.value

    def _run_options(self, args: Any, cell: str) -> int:
        """The warm-up runs; the checks every backend's -w, -n, -o and cell body share."""
        warmup = self.profile_warmup if args.warmup is None else args.warmup
        if warmup < 0:
            raise UsageError("%%gpuprofile: -w must be 0 or more")
        if args.iters < 1:
            raise UsageError("%%gpuprofile: -n must be at least 1")
        if args.output is not None and not args.output.isidentifier():
            raise UsageError(f"%%gpuprofile: -o needs a variable name, not {args.output!r}")
        if not cell.strip():
            raise UsageError("%%gpuprofile needs code in the cell body")
        return warmup

    def _running_cell(self) -> tuple[Any, Any] | None:
        """(the front end's id of the running cell, this execution) where the kernel says it
        (JupyterLab sends a ``cellId`` with each execute request), so that re-running the cell whose
        report carried BokehJS carries it again; None in a terminal."""
        kernel = getattr(self.shell, "kernel", None)
        get_parent = getattr(kernel, "get_parent", None)
        parent = (
            get_parent() if callable(get_parent) else getattr(self.shell, "parent_header", None)
        )
        cell_id = ((parent or {}).get("metadata") or {}).get("cellId")
        return (cell_id, self.shell.execution_count) if cell_id else None

    def _show(
        self, captured: Any, label: str, options: Any, *, trace_path: str | None, output: str | None
    ) -> None:
        """One way to show any backend's capture: the report, the Chrome trace if asked, ``-o``,
        display."""
        from ..render import embed
        from ..render.report import ProfileReport

        embed.ONCE.current_cell = self._running_cell

        report = ProfileReport(
            captured.trace,
            label=label,
            top=options.top,
            timeline=options.timeline,
            max_glyphs_per_lane=options.max_glyphs_per_lane,
            notes=list(captured.notes),
        )
        if output:
            self.shell.user_ns[output] = report  # first: a failing write below must not lose it
        failed: OSError | None = None
        if trace_path:
            try:
                report.to_chrome_trace(trace_path)
                report.notes.append(f"Chrome/Perfetto trace written to {trace_path}")
            except OSError as exc:
                failed = exc
        display(report)
        if failed is not None:
            kept = f"; the report is in {output}" if output else ""
            raise UsageError(f"%%gpuprofile --trace: {trace_path} was not written ({failed}){kept}")
