"""IPython glue: the two magics' options (``magic_arguments``, ``%timeit``'s letters where they
mean the same), their checks, and dispatch to the runs (:mod:`.gputime_magic`,
:mod:`.profile_magic`, :mod:`.memory_magic`). No measurement logic here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, kwds, magic_arguments, parse_argstring
from IPython.display import display

from ..edges import UserValue
from ..errors import GpuMagicError
from .cell_syntax import split_options
from .config import GpuMagicsConfig
from .glue import INTERRUPTED, capture_errors, ends_with_semicolon, notebook_advice, usage_error

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..timing.compare_result import Comparison
    from ..timing.result import TimingResult
    from ..timing.sweep_result import Sweep

__all__ = ["GpuMagics", "notebook_advice", "split_options"]


#: The magics' examples, after the options in their help (IPython's shape: Usage, the options,
#: Examples with each output on its own lines).
GPUTIME_EXAMPLES = """\
Examples
--------
::

  In [1]: %gputime A @ B
  3.69 ms ± 21.4 µs per call on NVIDIA GB10 (median ± IQR of 87 samples; GPU busy 99%; first call
  189 ms)

  In [2]: %gputime x + 1
  8.1 µs ± 0.2 µs per call on NVIDIA H100 (median ± IQR of 400 samples × 50 calls; launch-bound:
  kernels 2.9 µs, host 8.0 µs per call)

Variants side by side, and sizes (a table and a Bokeh chart)::

  %%gputime --compare A = torch.randn(4096, 4096, device="cuda"); Ah = A.bfloat16()
  A @ A     # fp32
  Ah @ Ah   # bf16

  %%gputime --sweep n=256,512,1024,2048,4096 A = torch.randn(n, n, device="cuda")
  A @ A

  r = %gputime -o -l mm A @ B      # the TimingResult, saved under the label 'mm'
  %gputime --vs mm A @ B           # and compared with it later
"""
GPUPROFILE_EXAMPLES = """\
Examples
--------
::

  %%gpuprofile
  y = model(x)
  y.sum().backward()

  %%gpuprofile --nsys --vs last    # the same cell under Nsight Systems, diffed with the last run
  opt.zero_grad(); loss_of(model, x).backward(); opt.step()

  %%gpuprofile --ncu --top 3       # the three longest kernels under Nsight Compute
  out = attention(q, k, v)

  %%gpuprofile --memory            # the allocator's history: memory by category, the peak
  step()

  %%gpuprofile -o rep              # the ProfileReport kept in `rep`
  y = model(x)

  rep.to_dataframe()               # the kernel table; rep.save_html("step.html")
"""


@magics_class
class GpuMagics(Magics, GpuMagicsConfig):
    """The gpumagic magics. Settings: ``%config GpuMagics`` lists them."""

    @property
    def _shell(self) -> InteractiveShell:
        """The shell the magics run in: IPython gives one when it registers them (``Magics.shell``
        is optional only for magics made outside a shell)."""
        if self.shell is None:
            raise UsageError("gpumagic's magics run inside an IPython shell")
        return self.shell

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
        "--energy",
        action="store_true",
        help="Energy per call to ±5%%: settle the clock (as --steady), then sample until NVML's "
        "energy counter gives J/call within 5%% (at most 5 s).",
    )
    @argument(
        "--counters",
        action="store_true",
        help="Hardware counters over the samples, where CUPTI's PM sampling is in this process; "
        "elsewhere one line names the versions found (%%gpuprofile --nsys --counters reads them).",
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
    @kwds(epilog=GPUTIME_EXAMPLES)
    @line_cell_magic
    def gputime(
        self, line: str = "", cell: str | None = None
    ) -> TimingResult | Comparison | Sweep | None:
        """Time a statement on the GPU: the %timeit of CUDA code.

        Usage, in line mode:
          %gputime [options] statement
        or in cell mode (the line is setup code, run once and not timed; the cell is the
        statement):
          %%gputime [options] [setup]
          statement...

        It synchronizes, runs the statement once cold (the first call is reported when it is much
        slower), warms up, then times samples of back-to-back calls with CUDA events on the current
        stream until the median is stable. A short extra pass measures the GPU kernel time per call
        (CUPTI) and the host time to issue a call: when the GPU idles between calls, the line says
        the statement is launch-bound. Without CUDA, or with the statement's tensors on the CPU, it
        times on the host clock and says "on CPU". The statement's own assignments do not change
        the namespace.

        ``--compare`` times the cell's statements (one per line, a ``# label`` comment names each)
        interleaved, in rounds, so that a clock change does not favour one; speed-ups are against
        the first (``--baseline``). ``--sweep`` runs the setup and times the statement at each
        value (with ``--compare``, each statement). ``-o`` returns the TimingResult, Comparison or
        Sweep.

        Each result is saved to the history (``%config GpuMagics.history``; '' turns it off), under
        ``-l NAME``; ``--vs last`` (or a label, or ``#ID``) adds a line: the ratio to that run with
        its 95% interval from both runs' samples, faster/slower/no difference, and what differed
        (device, clocks, driver, versions).

        Settings: ``%config GpuMagics`` (time_budget, warmup_time, min_samples, rel_ci,
        kernel_time, ...).
        """
        __tracebackhide__ = True  # an error of the user's statement shows from their own code
        opt_text, rest = split_options(line, self.gputime.parser)
        args = parse_argstring(self.gputime, opt_text)
        if args.help:
            print(self.gputime.parser.format_help())
            return None
        stmt, setup = _statement_and_setup(rest, cell)
        try:
            options = self.timing_options(
                calls_per_sample=args.number,
                samples=args.repeat,
                warmup_calls=args.warmup,
                precision=args.precision,
                flush_l2=args.flush_l2,
                graph=args.graph,
                cpu=args.cpu,
                steady=True if args.energy else args.steady,
                energy=args.energy or None,
            )
            options.validate()
        except GpuMagicError as exc:
            raise usage_error("%gputime", exc) from None

        from .gputime_magic import recorder_for, time_many, time_one

        recorder = recorder_for(self.history, args)
        if args.compare or args.sweep:
            return time_many(
                self._shell,
                args,
                stmt,
                setup,
                options=options,
                cell_mode=cell is not None,
                recorder=recorder,
            )
        return time_one(self._shell, args, stmt, setup, options=options, recorder=recorder)

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
        "--phases",
        action="store_true",
        help="--nsys: show where the run's wall time went, phase by phase.",
    )
    @argument(
        "--counters",
        action="store_true",
        help="--nsys: sample the GPU's hardware counters in the same capture (nsys GPU "
        "metrics, 10 kHz): SM, tensor-pipe and DRAM activity per kernel, with a verdict.",
    )
    @argument(
        "--nproc",
        type=int,
        default=None,
        metavar="N",
        help="--nsys: the cell as N ranks (torch.distributed, env://), 1 GPU each.",
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
    @kwds(epilog=GPUPROFILE_EXAMPLES)
    @cell_magic
    def gpuprofile(self, line: str, cell: str) -> UserValue:
        """Profile a cell: every kernel it runs, what each one is, and a timeline.

        Usage:
          %%gpuprofile [options]
          cell body...

        The cell runs ``-w`` times as warm-up (outside the capture: lazy init, cuBLAS heuristics,
        autotuning), then ``-n`` times under torch.profiler inside an NVTX range and a
        record_function named after the cell. Its assignments land in the namespace as a normal
        run would leave them, and its last expression is the cell's value (Out[n], after the
        report; a trailing ';' hides it), from the last captured run.

        Shown: a summary line (device, GPU busy time, wall time, GPU utilisation, backend),
        findings, the kernel table (nsys' cuda_gpu_kern_sum columns plus each name decoded), torch
        ops (Self CPU vs GPU), CUDA API calls, NVTX ranges, the time by module and by line, and a
        Bokeh timeline. Without CUDA it still runs and shows the CPU ops.

        ``--nsys``: the cell runs in a subprocess under Nsight Systems instead (the names it reads
        are shipped there, objects that share tensors travel together; the namespace is not
        changed; the value is shown as the subprocess printed it). ``--nproc N``: N ranks inside
        the one nsys run (``dist``, ``rank``, ``world_size``, ``local_rank`` and ``device`` are set
        in the cell; rank 0's value is shown). ``--ncu``: a subprocess under Nsight Compute, the
        ``--top`` kernels by GPU time (default 5; 0: all) with SM and memory throughput, FLOP/s,
        limiter and ncu's advice, and a roofline; clocks are locked to base unless
        ``--no-clock-control``. ``--memory``: the caching allocator's history instead: memory by
        category, the peak and what was alive there.

        One profiler at a time: a cell that opens its own profiler, or %%gpuprofile while one
        runs, is refused before the cell runs. Each profile's summaries are saved to the history
        (``-l NAME`` labels it); ``--vs last`` (or a label, or an id) shows the diff against one.

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
            raise UsageError("%%gpuprofile: --nproc goes with --nsys (the ranks run inside nsys)")
        if args.memory:  # the allocator's history for the cell, not the kernel capture
            from .memory_magic import memory_magic

            with capture_errors("%%gpuprofile --memory", said=False, fallback=INTERRUPTED):
                value = memory_magic(self, self._shell, args, cell, show=display)
            return None if value is None or ends_with_semicolon(cell) else value
        from .profile_magic import profile_in_process_or_nsys, profile_ncu

        if args.ncu:
            return profile_ncu(self, self._shell, args, cell)
        return profile_in_process_or_nsys(self, self._shell, args, cell)


def _statement_and_setup(rest: str, cell: str | None) -> tuple[str, str | None]:
    """%gputime's statement and setup: the line is the statement; in cell mode the cell is, and the
    line (if any) is setup run once. An empty statement is refused with an example."""
    if cell is None:
        if not rest.strip():
            raise UsageError("%gputime needs a statement to time, e.g. %gputime torch.matmul(A, B)")
        return rest, None
    if not cell.strip():
        raise UsageError(
            "%%gputime needs a statement in the cell body (the first line is setup code)"
        )
    return cell, rest or None
