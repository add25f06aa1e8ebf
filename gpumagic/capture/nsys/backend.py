"""Run a cell in a subprocess under Nsight Systems and read what it recorded (``%%gpuprofile
--nsys``).

The series this follows lost most of a chapter to nsys traps; each one here becomes an error that
names the cause and the fix (``gpumagic.errors``): no nsys (where it looked), a non-zero exit (nsys'
own output), "No reports were generated" (the capture range never opened), a report newer than the
local nsys, a report without CUDA data (nsys outside the CUDA process's container), a timeout (the
partial files kept and named), a cell that raises (its traceback). The same nsys binary profiles and
exports, to a fresh path, so versions never cross and no stale ``.sqlite`` is reused. No shell is
involved: the command is a list. With ``nproc`` of 2 or more the cell runs as that many ranks
inside the one nsys run (``capture/nsys/ranks.py``: the launch, the capture range, the errors).
"""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from ...errors import (
    CellError,
    FileMissingError,
    NewerReportError,
    NoCudaDataError,
    NoReportError,
    NsysError,
    NsysFailedError,
    NsysNotFoundError,
    NsysTimeoutError,
)
from ...trace import Trace
from .. import Capture
from ..cell import loop_notes
from ..child.runner import rank_phases_file
from ..child.workdir import WorkDir, raise_cell_error, shown_value, source_text
from ..guards import deferred_interrupts
from ..marks.code_marks import code_from_nvtx
from ..marks.function_ranges import function_table
from ..options import (
    ITERS,
    WARMUP,
    NsysOptions,
    graph_trace_args,
    lean_args,
    ready_profile_dir,
    report_stem,
)
from ..phases import PHASES_FILE, Phases, read_marks
from ..tools import child_env, find_tool, run_in_session
from . import ranks
from .cell_report import CellReport, export_sqlite, nsys_error, traces_nvtx
from .gpu_metrics import attach_counters
from .sqlite import read_sqlite

__all__ = [
    "CellError",
    "NewerReportError",
    "NoCudaDataError",
    "NoReportError",
    "NsysError",
    "NsysFailedError",
    "NsysNotFoundError",
    "NsysTimeoutError",
    "capture",
    "export_sqlite",
    "find_nsys",
    "load_nsys",
]

_SEARCH = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems-cli/*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
    "/usr/local/cuda/nsight-systems-*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)


def find_nsys(configured: str | None = None) -> str:
    """The nsys to use: the configured path, else the one that launched this kernel (a kernel of
    ``python -m gpumagic kernel install --nsys``: one nsys for its session and its subprocesses),
    else PATH, else the usual install locations."""
    return find_tool(
        "nsys", configured or os.environ.get("GPUMAGIC_NSYS"), _SEARCH, NsysNotFoundError
    )


def load_nsys(path: str | os.PathLike[str], nsys: str | None = None) -> Trace:
    """A Trace from an nsys SQLite export, or from a ``.nsys-rep`` (exported to a fresh ``.sqlite``
    first with the local nsys: ``nsys`` here, or the path given)."""
    path = os.fspath(path)
    report = path.endswith((".nsys-rep", ".qdrep"))
    if not os.path.exists(
        path
    ):  # said before nsys is looked for: the file is the problem, not the tool
        raise FileMissingError(
            path=path, what="The nsys report" if report else "The nsys SQLite export"
        )
    if report:
        try:
            tool = find_nsys(nsys)
        except NsysNotFoundError as exc:  # the fix named is this function's own keyword
            raise NsysNotFoundError(exc.looked, exc.configured, setting="nsys") from None
        path = export_sqlite(tool, path)
    trace = read_sqlite(path)
    code_from_nvtx(trace, None, marked=False)  # a --nsys capture's by-code ranges, read back
    attach_counters(trace, path)
    return trace


def capture(
    cell: str,
    label: str,
    *,
    namespace: Mapping[str, Any] | None = None,
    warmup: int = WARMUP,
    iters: int = ITERS,
    options: NsysOptions | None = None,
) -> Capture:
    """Ship the names ``cell`` (source text) reads from ``namespace``, run it under nsys in a
    subprocess (warm-up outside the capture range, ``iters`` runs inside the NVTX range ``label``),
    export and read the SQLite.

    With ``options.warm`` (the default; one process, not ranks) the subprocess is the kernel's warm
    child, started under ``nsys launch`` by the first such cell and reused by the next ones
    (``capture/nsys/warm.py``); where it cannot run the cell, a new ``nsys profile`` does, and a
    note says why. Every run's phases (shipping, child start, torch import, CUDA init, warm-up,
    capture, tool stop/flush, export, reading) are timed: ``Capture.phases`` and
    ``trace.meta["phases"]``.

    The cell runs only in the subprocess: ``namespace`` is read, never written.
    """
    source_text(cell, "nsys")
    opts = options or NsysOptions()
    extra_args = opts.tool_args()  # before any work
    profile_dir = ready_profile_dir(opts.profile_dir)
    nsys = find_nsys(opts.nsys_path)
    nproc = opts.nproc or 1
    if nproc > 1:
        ranks.check_before_launch(nproc, opts.python)
    one = nproc <= 1
    # the functions the cell calls, marked with their lines in the child from their source here
    functions = function_table(namespace or {}, cell) if one else []
    warm = _warm_wanted(opts, nproc)
    run = CellReport(nsys, label, opts.trace, opts.counters, Phases())
    spec = {
        "warmup": warmup,
        "iters": iters,
        "label": label,
        "nproc": nproc,
        "code_marks": one,  # the by-code view's ranges as NVTX: one process (ranks: by rank)
        "functions": functions,  # the functions it calls, marked there from their source here
    }
    with WorkDir("gpumagic-nsys-") as work:
        with run.phases.timed("shipping"):
            # a new warm child starts while the inputs are written
            early = _early_launch(nsys, opts, extra_args) if warm else None
            shipped = work.ship(cell, opts.setup, namespace, spec, early, for_ranks=not one)
        stem = report_stem(profile_dir, label)
        report, sqlite, trace, warm_notes = _recorded(run, opts, extra_args, stem, work.path, warm)
        run.finish(trace, sqlite, cell, functions, by_code=one)
        if warm_notes and warm_notes[0].startswith("Warm child reused"):
            trace.meta["child"] = "warm child reused"
        value = shown_value(work.path)
    notes = run.notes(trace, shipped.note(), report, sqlite)
    if not one:
        notes.insert(
            0,
            f"{nproc} ranks (env:// rendezvous on this host), one GPU each; the capture opened and "
            f"closed on all.",
        )
    return Capture(
        trace,
        notes=loop_notes(warmup, iters) + warm_notes + notes,
        files={"report": report, "sqlite": sqlite} if report else {"sqlite": sqlite},
        value=value,
        phases=run.phases,
    )


def _warm_wanted(opts: NsysOptions, nproc: int) -> bool:
    """Whether the cell runs in the kernel's warm child: ``options.warm``, one process. Where it
    does not (turned off, or ranks that want every GPU), a warm child left by an earlier cell is
    retired now: its CUDA context and memory go."""
    if opts.warm and nproc == 1:
        return True
    if "gpumagic.capture.nsys.warm" in sys.modules:
        sys.modules["gpumagic.capture.nsys.warm"].retire_current()
    return False


def _early_launch(nsys: str, opts: NsysOptions, extra_args: list[str]) -> Callable[[], None]:
    """What starts a new warm child (where none runs yet) once the cell's names are known to
    travel: it starts while they are written."""
    from .warm import launch_early

    return lambda: launch_early(nsys, opts, extra_args)


def _recorded(
    run: CellReport,
    opts: NsysOptions,
    extra_args: list[str],
    stem: str,
    workdir: str,
    warm: bool,
) -> tuple[str | None, str, Trace, list[str]]:
    """The cell recorded and its export read: in the warm child (``warm``) where it can run the
    cell and its report holds the cell's range, else by a one-shot ``nsys profile``; (the report,
    None where nsys kept none; the SQLite; the trace; the notes on the warm child)."""
    warm_notes: list[str] = []
    if warm:
        report, warm_notes = _try_warm(run, opts, extra_args, workdir, stem)
        if report is not None:
            sqlite = run.export(report)
            trace = run.read(sqlite)
            if not _warm_missed(trace, run.label, opts):
                return report, sqlite, trace, warm_notes
            warm_notes = [
                "Warm child not used: its report lacked the cell's NVTX range (the collection "
                "began late); this run started nsys afresh."
            ]
            _clear_outputs(workdir)
    report, sqlite = _one_shot(run, opts, stem, workdir, extra_args)
    return report, sqlite, run.read(sqlite), warm_notes


def _try_warm(
    run: CellReport, opts: NsysOptions, extra_args: list[str], workdir: str, stem: str
) -> tuple[str | None, list[str]]:
    """The cell in the kernel's warm child (``capture/nsys/warm.py``): its report and notes; (None,
    a note saying why) where the warm child could not run it, the work dir then left as shipped for
    the one-shot run."""
    from .warm import WarmUnavailable, run_warm

    try:
        return run_warm(run.nsys, opts, extra_args, workdir, stem, run.phases)
    except WarmUnavailable as exc:
        _clear_outputs(workdir)
        return None, [f"Warm child not used ({exc}); this run started nsys afresh."]


def _warm_missed(trace: Trace, label: str, opts: NsysOptions) -> bool:
    """A warm report without the cell's range: the child is retired (``nsys_warm.missed_range``).
    Where nsys does not trace NVTX (``-t`` without it), there is no range to look for."""
    from .warm import missed_range, retire_current

    if not traces_nvtx(opts.trace) or not missed_range(trace, label):
        return False
    retire_current()
    return True


def _clear_outputs(workdir: str) -> None:
    """What a run wrote to the work dir, so that another run of the cell starts from its inputs."""
    for name in ("warm", "done", "error.txt", "value.txt", PHASES_FILE):
        with contextlib.suppress(OSError):
            os.remove(os.path.join(workdir, name))


def _one_shot(
    run: CellReport, opts: NsysOptions, stem: str, workdir: str, extra_args: list[str]
) -> tuple[str | None, str]:
    """``nsys profile`` of a new child for this cell alone: (the report or None, the SQLite).
    nsys exports the SQLite itself before it exits (``--export=sqlite``): that export is part of
    the "tool stop/flush" phase here."""
    nproc = opts.nproc or 1
    cmd = _profile_command(run.nsys, opts, run.label, stem, workdir, extra_args)
    started = time.time()
    output, returncode = _run(cmd, opts.timeout, stem, workdir if nproc > 1 else None, nproc)
    # ranks: rank 0's marks stand for the run ("child start" then holds nsys', the launcher's and
    # the rank's own start)
    marks = read_marks(workdir, rank_phases_file(0)) if nproc > 1 else read_marks(workdir)
    run.phases.add_child(marks, started, time.time())
    failed = (
        ranks.rank_failure(workdir, nproc, output, opts.python or sys.executable)
        if nproc > 1
        else None
    )
    if failed is not None:
        raise failed
    raise_cell_error(workdir, CellError)
    err = nsys_error(cmd, output, returncode, sorted(glob.glob(stem + "*")))
    if err is not None:
        raise err
    report = stem + ".nsys-rep" if os.path.exists(stem + ".nsys-rep") else None
    sqlite = stem + ".sqlite"
    if not os.path.exists(sqlite):
        if report is None:
            raise NoReportError(output, stem=stem)
        sqlite = run.export(report)
    return report, sqlite


def _profile_command(
    nsys: str, opts: NsysOptions, label: str, stem: str, workdir: str, extra_args: list[str]
) -> list[str]:
    """One process: the capture range is the cell's NVTX range. Ranks: they open and close it
    together through cudaProfilerStart/Stop (``capture/nsys/ranks.py`` says why), launched by
    ``capture/nsys/rank_launch.py``. Either way nsys samples no CPU unless the user asks
    (:func:`options.lean_args`)."""
    python = opts.python or sys.executable
    nproc = opts.nproc or 1
    if nproc > 1:
        capture_range = ["--capture-range=cudaProfilerApi"]
        program = ranks.launch_command(python, nproc, workdir)
    else:
        capture_range = ["--capture-range=nvtx", f"--nvtx-capture={label}"]
        program = [python, "-m", "gpumagic.capture.child.runner", workdir]
    return [
        nsys,
        "profile",
        "-t",
        opts.trace,
        *capture_range,
        "--capture-range-end=stop",
        "--force-overwrite=true",
        *graph_trace_args(opts, extra_args),
        "--export=sqlite",
        "-o",
        stem,
        *lean_args(extra_args),
        *extra_args,
        *program,
    ]


def _run(
    cmd: list[str], timeout: float, stem: str, workdir: str | None = None, nproc: int = 1
) -> tuple[str, int]:
    """Run nsys in its own session; (its output, exit status). On timeout: stop it, keep what it
    wrote, say so. On Ctrl-C: the same, then KeyboardInterrupt again, saying what was stopped and
    which files were kept. With ``workdir`` (ranks), every process carrying it is stopped with nsys,
    and after a run that ended by itself."""

    def timed_out(partial: list[str]) -> Exception:
        if workdir is not None:
            return ranks.RanksTimeoutError(timeout, partial, nproc)
        return NsysTimeoutError(timeout, partial)

    output, returncode = run_in_session(
        cmd,
        timeout,
        stem,
        tool="nsys",
        env=child_env(NSYS_NVTX_PROFILER_REGISTER_ONLY="0"),
        stop=lambda proc: _kill(proc, workdir),
        timed_out=timed_out,
    )
    if workdir is not None:
        ranks.stop_run_processes(workdir)  # a rank that outlived the launcher (none, normally)
    return output, returncode


def _kill(proc: subprocess.Popen[str], workdir: str | None = None) -> None:
    """Stop nsys and everything in its session: SIGINT first (nsys writes what it has), SIGKILL
    after 10 s. A Ctrl-C meanwhile waits for the end (it must not leave nsys or the cell running)
    and is then dropped: the run is being stopped already. With ``workdir``, the ranks too (each in
    a session of its own: ``capture/nsys/ranks.py``)."""
    try:
        with deferred_interrupts():
            _stop_group(proc, workdir)
    except KeyboardInterrupt:
        pass


def _stop_group(proc: subprocess.Popen[str], workdir: str | None = None) -> None:
    try:
        os.killpg(proc.pid, signal.SIGINT)  # let nsys write what it has
        if workdir is not None:
            ranks.stop_run_processes(workdir, signal.SIGINT, skip_group=proc.pid)
        proc.wait(timeout=10)
    except (subprocess.TimeoutExpired, ProcessLookupError, PermissionError):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    if workdir is not None:
        ranks.stop_run_processes(
            workdir, signal.SIGKILL, wait=5
        )  # a rank stuck in NCCL ignores SIGINT
    if proc.stdout is not None:
        proc.stdout.close()
