"""IPython glue: parse the magic's options, reach the user namespace, print or display. No measurement logic here."""

from __future__ import annotations

import re
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from .config import GpuMagicsConfig
from .statement import compile_statement
from .timing import measure

__all__ = ["GpuMagics", "split_options"]

_OPTION = re.compile(r"\s*(--?[A-Za-z][\w-]*)(=\S*)?")


def split_options(line: str, parser: Any) -> tuple[str, str]:
    """Split ``line`` into its leading options and the statement, which is kept verbatim.

    ``parse_argstring`` alone would shell-split the statement and eat its quotes (``d['k']`` -> ``d[k]``), so, as
    ``%timeit`` does, only the leading options are parsed: tokens that start with '-' and the values of options
    that take one (``-n 10``, ``-n10``, ``--flush-l2``); ``--`` ends the options. An unknown long option stays
    with the options so that argparse reports it; an unknown single-dash token starts the statement (``-x + 1``).
    """
    actions = parser._option_string_actions  # argparse keeps no public map from option string to action
    pos = 0
    taken: list[str] = []
    while True:
        end_of_options = re.match(r"\s*--(\s|$)", line[pos:])
        if end_of_options:
            pos += end_of_options.end()
            break
        m = _OPTION.match(line, pos)
        if not m:
            break
        opt, inline_value = m.group(1), m.group(2)
        action = actions.get(opt)
        if action is None and opt[1] != "-" and opt[:2] in actions and actions[opt[:2]].nargs != 0:
            # glued short option value: -n10
            taken += [opt[:2], opt[2:]]
            pos = m.end()
            continue
        if action is None:
            if opt[1] == "-":
                taken.append(opt + (inline_value or ""))  # unknown long option: let argparse name it
                pos = m.end()
                continue
            break  # an unknown single dash starts the statement: "-x + 1"
        taken.append(opt + (inline_value or ""))
        pos = m.end()
        if action.nargs != 0 and not inline_value:
            v = re.match(r"\s*(\S+)", line[pos:])
            if v:
                taken.append(v.group(1))
                pos += v.end()
    return " ".join(taken), line[pos:].strip()


def _unquote(value: str | None) -> str | None:
    """magic_arguments keeps the quotes around a quoted value ('k = 1'): drop one matching pair."""
    if value and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


@magics_class
class GpuMagics(Magics, GpuMagicsConfig):
    """The gpumagic magics. Settings: ``%config GpuMagics`` lists them."""

    @magic_arguments()
    @argument("-n", dest="number", type=int, default=None, help="Calls per sample (default: enough for ~1 ms).")
    @argument("-r", dest="repeat", type=int, default=None, help="Samples (default: until the median is stable).")
    @argument("-w", dest="warmup", type=int, default=None, help="Warm-up calls (default: ~30 ms worth, at least 3).")
    @argument("-p", dest="precision", type=int, default=None, help="Significant digits in the output (default 3).")
    @argument("-o", dest="output", action="store_true", help="Return the TimingResult.")
    @argument("-q", dest="quiet", action="store_true", help="Quiet: print nothing.")
    @argument("--flush-l2", action="store_true", help="Flush the L2 cache before each call (cold-cache timing).")
    @argument("--graph", action="store_true", help="Capture the calls once in a CUDA graph and time its replays.")
    @argument("--cpu", action="store_true", help="Time on the host clock even where CUDA is available.")
    @line_cell_magic
    def gputime(self, line: str = "", cell: str | None = None) -> Any:
        """Time a statement on the GPU: the %timeit of CUDA code.

        Usage, in line mode:
          %gputime [options] statement
        or in cell mode (the line is setup code, run once and not timed; the cell is the statement):
          %%gputime [options] [setup]
          statement...

        It synchronizes, runs the statement once cold (the first call is reported when it is much slower),
        warms up, then times samples of back-to-back calls with CUDA events on the current stream until the
        median is stable. A short extra pass measures the GPU kernel time per call (CUPTI) and the host time
        to issue a call: when the GPU idles between calls, the line says the statement is launch-bound.
        Without CUDA, or with the statement's tensors on the CPU, it times on the host clock and says "on CPU".
        The statement's own assignments do not change the namespace.

        Examples
        --------
        ::

          In [1]: %gputime A @ B
          3.69 ms ± 21.4 µs per call on NVIDIA GB10 (median ± IQR of 87 samples; GPU busy 99%; first call 189 ms)

          In [2]: %gputime x + 1
          8.1 µs ± 0.2 µs per call on NVIDIA H100 (median ± IQR of 400 samples × 50 calls; launch-bound:
          kernels 2.9 µs, host 8.0 µs per call)

        Settings: ``%config GpuMagics`` (time_budget, warmup_time, min_samples, rel_ci, kernel_time, ...).
        """
        opt_text, rest = split_options(line, self.gputime.parser)
        args = parse_argstring(self.gputime, opt_text)
        if cell is None:
            stmt, setup = rest, None
            if not stmt.strip():
                raise UsageError("%gputime needs a statement to time, e.g. %gputime torch.matmul(A, B)")
        else:
            stmt, setup = cell, rest or None
            if not stmt.strip():
                raise UsageError("%%gputime needs a statement in the cell body (the first line is setup code)")
        try:
            options = self.timing_options(
                calls_per_sample=args.number,
                samples=args.repeat,
                warmup_calls=args.warmup,
                precision=args.precision,
                flush_l2=args.flush_l2,
                graph=args.graph,
                cpu=args.cpu,
            )
            options.validate()
        except ValueError as exc:
            raise UsageError(f"%gputime: {exc}") from None

        shell = self.shell
        compiled = compile_statement(
            shell.transform_cell(stmt),
            shell.transform_cell(setup) if setup else None,
            shell.user_ns,
            ast_transform=shell.transform_ast,
        )
        result = measure(compiled, shell.user_ns, options)
        if not args.quiet:
            print(result)
        if args.output:
            return result
        return None

    @magic_arguments()
    @argument(
        "-w", "--warmup", type=int, default=None, help="Runs of the cell before the capture (default 1; 0 allowed)."
    )
    @argument("-n", "--iters", type=int, default=1, help="Runs of the cell inside the capture (default 1).")
    @argument("--trace", default=None, metavar="PATH", help="Also write a Chrome/Perfetto trace JSON to PATH.")
    @argument("--top", type=int, default=None, help="Rows in the kernel and other tables (default 15).")
    @argument("--no-timeline", action="store_true", help="Leave the timeline out (smaller output).")
    @argument("-o", dest="output", default=None, metavar="VAR", help="Keep the ProfileReport in variable VAR.")
    @argument("--label", default=None, help="Name of the NVTX range / record_function around the cell.")
    @argument("--nsys", action="store_true", help="Re-run the cell in a subprocess under Nsight Systems instead.")
    @argument("--setup", default=None, metavar="CODE", help="--nsys: code run in the subprocess before the cell.")
    @argument("--nsys-args", default="", metavar="ARGS", help="--nsys: extra nsys profile arguments (shell-split).")
    @argument("--timeout", type=float, default=None, metavar="S", help="--nsys: seconds before the run is stopped.")
    @cell_magic
    def gpuprofile(self, line: str, cell: str) -> None:
        """Profile a cell: every kernel it runs, what each one is, and a timeline.

        Usage:
          %%gpuprofile [options]
          cell body...

        The cell runs ``-w`` times as warm-up (outside the capture: lazy init, cuBLAS heuristics, autotuning), then
        ``-n`` times under torch.profiler inside an NVTX range and a record_function named after the cell. Its
        assignments land in the namespace as a normal run would leave them. Shown: a summary line (device, GPU busy
        time, wall time, GPU utilisation, backend), findings, the kernel table (nsys' cuda_gpu_kern_sum columns plus
        each name decoded), torch ops (Self CPU vs GPU), CUDA API calls, NVTX ranges and a Bokeh timeline.
        Without CUDA it still runs and shows the CPU ops.

        Settings: ``%config GpuMagics`` (profile_warmup, profile_top, timeline_max_glyphs).
        """
        args = parse_argstring(self.gpuprofile, line)
        warmup = self.profile_warmup if args.warmup is None else args.warmup
        top = self.profile_top if args.top is None else args.top
        if warmup < 0:
            raise UsageError("%%gpuprofile: -w must be 0 or more")
        if args.iters < 1:
            raise UsageError("%%gpuprofile: -n must be at least 1")
        if top < 1:
            raise UsageError("%%gpuprofile: --top must be at least 1")
        if args.output is not None and not args.output.isidentifier():
            raise UsageError(f"%%gpuprofile: -o needs a variable name, not {args.output!r}")
        if not cell.strip():
            raise UsageError("%%gpuprofile needs code in the cell body")
        try:
            import torch  # noqa: F401
        except ImportError:
            raise UsageError("%%gpuprofile needs PyTorch (torch.profiler): pip install torch") from None

        from .render.report import ProfileReport

        shell = self.shell
        label = args.label or f"cell:{shell.execution_count}"
        if args.nsys:
            report = self._profile_with_nsys(args, cell, label, warmup, top)
            if args.output:
                shell.user_ns[args.output] = report
            from IPython.display import display

            display(report)
            return
        if args.setup or args.nsys_args or args.timeout is not None:
            raise UsageError("%%gpuprofile: --setup, --nsys-args and --timeout go with --nsys")
        from .capture.torch_profiler import capture

        source = shell.transform_cell(cell)
        filename = shell.compile.cache(source)  # registered with linecache: tracebacks show the cell's lines
        code = compile(shell.transform_ast(shell.compile.ast_parse(source, filename)), filename, "exec")

        def run_once() -> None:
            exec(code, shell.user_ns)  # noqa: S102 - the user's own cell

        for _ in range(warmup):
            run_once()

        def run_all() -> None:
            for _ in range(args.iters):
                run_once()

        result = capture(run_all, label)
        trace = result.trace
        notes = []
        if warmup == 0:
            notes.append("No warm-up (-w 0): first-call costs (lazy init, autotuning) are in the capture.")
        if args.iters > 1:
            notes.append(f"The cell ran {args.iters} times inside the capture; totals cover all of them.")
        report = ProfileReport(
            trace,
            label=label,
            top=top,
            timeline=not args.no_timeline,
            max_glyphs_per_lane=self.timeline_max_glyphs,
            notes=notes,
        )
        if args.trace:
            report.to_chrome_trace(args.trace)
            report.notes.append(f"Chrome/Perfetto trace written to {args.trace}")
        if args.output:
            shell.user_ns[args.output] = report
        from IPython.display import display

        display(report)

    def _profile_with_nsys(self, args: Any, cell: str, label: str, warmup: int, top: int) -> Any:
        import sys

        from .capture.nsys import CellError, NsysError, profile_cell
        from .capture.nsys_sqlite import NsysExportError
        from .capture.shipping import ShippingError
        from .render.report import ProfileReport

        source = self.shell.transform_cell(cell)
        try:
            run = profile_cell(
                source,
                self.shell.user_ns,
                label,
                setup=_unquote(args.setup),
                warmup=warmup,
                iters=args.iters,
                nsys_path=self.nsys_path or None,
                profile_dir=self.profile_dir,
                trace=self.nsys_trace,
                extra_args=_unquote(args.nsys_args) or "",
                timeout=args.timeout if args.timeout is not None else self.nsys_timeout,
            )
        except CellError as exc:
            print(exc.traceback, file=sys.stderr)
            raise UsageError(str(exc).splitlines()[0]) from None
        except (ShippingError, NsysError, NsysExportError) as exc:
            raise UsageError(f"%%gpuprofile --nsys: {exc}") from None
        notes = [f"report: {run.report}" if run.report else "report: (not kept)", f"SQLite export: {run.sqlite}"]
        if args.trace:
            notes.append(f"Chrome/Perfetto trace written to {args.trace}")
        report = ProfileReport(
            run.trace,
            label=label,
            top=top,
            timeline=not args.no_timeline,
            max_glyphs_per_lane=self.timeline_max_glyphs,
            notes=notes,
        )
        if args.trace:
            report.to_chrome_trace(args.trace)
        return report
