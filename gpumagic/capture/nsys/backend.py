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
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
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
from .. import Capture, Shown
from ..cell import loop_notes
from ..child.runner import rank_phases_file
from ..child.shipping import free_names, release, ship
from ..guards import deferred_interrupts
from ..marks.code_marks import code_from_nvtx
from ..marks.function_ranges import function_table
from ..options import ITERS, WARMUP, NsysOptions, graph_trace_args, lean_args, ready_profile_dir
from ..phases import PHASES_FILE, Phases, read_marks
from ..tools import child_env, find_tool, run_in_session
from . import ranks
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


def _classify(command: list[str], output: str, rc: int, files: list[str]) -> NsysError | None:
    """The error nsys' output and exit status mean, if any."""
    if re.search(
        r"newer than|created (?:in|by) (?:a )?newer|unsupported.*version", output, re.IGNORECASE
    ):
        return NewerReportError(output)
    if "No reports were generated" in output:
        return NoReportError(output)
    if rc != 0:
        return NsysFailedError(command, rc, output, files)
    return None


def export_sqlite(nsys: str, report: str, timeout: float = 600) -> str:
    """Export ``report`` to a fresh ``.sqlite`` next to it with the same nsys; return its path."""
    out = os.path.splitext(report)[0] + ".sqlite"
    if os.path.exists(out):
        os.remove(out)  # never reuse a stale or half-written export
    cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", out, report]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    err = _classify(cmd, proc.stdout + proc.stderr, proc.returncode, [])
    if err is not None:
        raise err
    if not os.path.exists(out):
        raise NsysFailedError(
            cmd, proc.returncode, f"nsys export wrote no {out}.\n{proc.stdout + proc.stderr}"
        )
    return out


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
    if not isinstance(cell, str):
        raise TypeError(
            "the nsys backend runs the cell in a subprocess: give it the cell's source text"
        )
    opts = options or NsysOptions()
    extra_args = opts.tool_args()  # before any work
    profile_dir = ready_profile_dir(opts.profile_dir)
    nsys = find_nsys(opts.nsys_path)
    nproc = opts.nproc or 1
    if nproc > 1:
        ranks.check_before_launch(nproc, opts.python)
    # the functions the cell calls, marked with their lines in the child from their source here
    functions = function_table(namespace or {}, cell) if nproc <= 1 else []
    workdir = tempfile.mkdtemp(prefix="gpumagic-nsys-")
    phases = Phases()
    warm_notes: list[str] = []
    shipped = None
    warm = opts.warm and nproc == 1
    if warm:
        from .warm import launch_early
    elif "gpumagic.capture.nsys.warm" in sys.modules:
        # turned off, or ranks that want every GPU: the warm child's context and memory go now
        sys.modules["gpumagic.capture.nsys.warm"].retire_current()

    try:
        with phases.timed("shipping"):
            shipped = ship(
                free_names(cell) + (free_names(opts.setup) if opts.setup else []),
                namespace or {},
                workdir,
                # a new warm child starts while the inputs are written
                checked=(lambda: launch_early(nsys, opts, extra_args)) if warm else None,
                for_ranks=nproc > 1,
            )
            spec = {
                "cell": cell,
                "setup": opts.setup,
                "warmup": warmup,
                "iters": iters,
                "label": label,
                "nproc": nproc,
                # the by-code view's ranges as NVTX: one process (ranks are read by rank)
                "code_marks": nproc <= 1,
                # the functions it calls, marked there from their source here
                "functions": functions,
            }
            with open(os.path.join(workdir, "cell.json"), "w", encoding="utf-8") as f:
                json.dump(spec, f)
        stem = os.path.join(profile_dir, f"{time.strftime('%Y%m%d-%H%M%S')}-{_slug(label)}")
        report: str | None = None
        if warm:
            report, warm_notes = _try_warm(nsys, opts, extra_args, workdir, stem, phases)
        from_warm = report is not None
        if from_warm:
            with phases.timed("export"):
                sqlite = export_sqlite(nsys, report)
        else:
            report, sqlite = _one_shot(nsys, opts, label, stem, workdir, extra_args, phases)
        with phases.timed("reading"):
            trace = read_sqlite(sqlite)
        if from_warm and _warm_missed(trace, label, opts):
            warm_notes = [
                "Warm child not used: its report lacked the cell's NVTX range (the collection "
                "began late); this run started nsys afresh."
            ]
            _clear_outputs(workdir)
            report, sqlite = _one_shot(nsys, opts, label, stem, workdir, extra_args, phases)
            with phases.timed("reading"):
                trace = read_sqlite(sqlite)
        trace.meta.update(label=label, nsys=nsys, phases=phases.rows, nsys_trace=opts.trace)
        if nproc <= 1 and "nvtx" in opts.trace.split(","):
            code_from_nvtx(trace, cell, functions=functions)
        attach_counters(trace, sqlite, asked=opts.counters)
        if warm_notes and warm_notes[0].startswith("Warm child reused"):
            trace.meta["child"] = "warm child reused"
        value = _shown_value(workdir)
    finally:
        with deferred_interrupts():  # the shipped tensors do not outlive an interrupted cell
            shutil.rmtree(workdir, ignore_errors=True)
            release(shipped)
    files = {"report": report, "sqlite": sqlite} if report else {"sqlite": sqlite}
    notes = [
        *([trace.meta["counters_note"]] if "counters_note" in trace.meta else []),
        shipped.note(),
        f"report: {report}" if report else "report: (not kept)",
        f"SQLite export: {sqlite}",
    ]
    if nproc > 1:
        notes.insert(
            0,
            f"{nproc} ranks (env:// rendezvous on this host), one GPU each; the capture opened and "
            f"closed on all.",
        )
    return Capture(
        trace,
        notes=loop_notes(warmup, iters) + warm_notes + notes,
        files=files,
        value=value,
        phases=phases,
    )


def _try_warm(
    nsys: str, opts: NsysOptions, extra_args: list[str], workdir: str, stem: str, phases: Phases
) -> tuple[str | None, list[str]]:
    """The cell in the kernel's warm child (``capture/nsys/warm.py``): its report and notes; (None,
    a note saying why) where the warm child could not run it, the work dir then left as shipped for
    the one-shot run."""
    from .warm import WarmUnavailable, run_warm

    try:
        return run_warm(nsys, opts, extra_args, workdir, stem, phases)
    except WarmUnavailable as exc:
        _clear_outputs(workdir)
        return None, [f"Warm child not used ({exc}); this run started nsys afresh."]


def _warm_missed(trace: Trace, label: str, opts: NsysOptions) -> bool:
    """A warm report without the cell's range: the child is retired (``nsys_warm.missed_range``).
    Where nsys does not trace NVTX (``-t`` without it), there is no range to look for."""
    from .warm import missed_range, retire_current

    if "nvtx" not in opts.trace.split(",") or not missed_range(trace, label):
        return False
    retire_current()
    return True


def _clear_outputs(workdir: str) -> None:
    """What a run wrote to the work dir, so that another run of the cell starts from its inputs."""
    for name in ("warm", "done", "error.txt", "value.txt", PHASES_FILE):
        with contextlib.suppress(OSError):
            os.remove(os.path.join(workdir, name))


def _one_shot(
    nsys: str,
    opts: NsysOptions,
    label: str,
    stem: str,
    workdir: str,
    extra_args: list[str],
    phases: Phases,
) -> tuple[str | None, str]:
    """``nsys profile`` of a new child for this cell alone: (the report or None, the SQLite).
    nsys exports the SQLite itself before it exits (``--export=sqlite``): that export is part of
    the "tool stop/flush" phase here."""
    nproc = opts.nproc or 1
    cmd = _profile_command(nsys, opts, label, stem, workdir, extra_args)
    started = time.time()
    output, returncode = _run(cmd, opts.timeout, stem, workdir if nproc > 1 else None, nproc)
    # ranks: rank 0's marks stand for the run ("child start" then holds nsys', the launcher's and
    # the rank's own start)
    marks = read_marks(workdir, rank_phases_file(0)) if nproc > 1 else read_marks(workdir)
    phases.add_child(marks, started, time.time())
    failed = (
        ranks.rank_failure(workdir, nproc, output, opts.python or sys.executable)
        if nproc > 1
        else None
    )
    if failed is not None:
        raise failed
    error_file = os.path.join(workdir, "error.txt")
    if os.path.exists(error_file):
        with open(error_file, encoding="utf-8") as f:
            raise CellError(f.read())
    err = _classify(cmd, output, returncode, sorted(glob.glob(stem + "*")))
    if err is not None:
        raise err
    report = stem + ".nsys-rep" if os.path.exists(stem + ".nsys-rep") else None
    sqlite = stem + ".sqlite"
    if not os.path.exists(sqlite):
        if report is None:
            raise NoReportError(output, stem=stem)
        with phases.timed("export"):
            sqlite = export_sqlite(nsys, report)
    return report, sqlite


def _shown_value(workdir: str) -> Shown | None:
    """The cell's value as the subprocess printed it (``value.txt``, written by the runner), or
    None."""
    path = os.path.join(workdir, "value.txt")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return Shown(f.read())


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


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:60] or "cell"


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
