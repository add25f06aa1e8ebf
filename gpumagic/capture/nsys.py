"""Run a notebook cell in a subprocess under Nsight Systems and read what it recorded (``%%gpuprofile --nsys``).

The series this follows lost most of a chapter to nsys traps; each one here becomes an error that names the
cause and the fix: no nsys (where it looked), a non-zero exit (nsys' own stderr), "No reports were generated"
(the capture range never opened), a report newer than the local nsys, a report without CUDA data (nsys outside
the CUDA process's container), a timeout (the partial files kept and named), a cell that raises (its traceback).
The same nsys binary profiles and exports, to a fresh path, so versions never cross and no stale ``.sqlite`` is
reused. No shell is involved: the command is a list.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..trace import Trace
from .nsys_sqlite import NoCudaDataError, read_sqlite
from .shipping import free_names, ship

__all__ = [
    "CellError",
    "NewerReportError",
    "NoCudaDataError",
    "NoReportError",
    "NsysError",
    "NsysFailedError",
    "NsysNotFoundError",
    "NsysRun",
    "NsysTimeoutError",
    "export_sqlite",
    "find_nsys",
    "profile_cell",
]

_SEARCH = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems-cli/*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
    "/usr/local/cuda/nsight-systems-*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)


class NsysError(RuntimeError):
    """Something about the nsys run; the message says what happened and what to do."""


class NsysNotFoundError(NsysError):
    pass


class NsysFailedError(NsysError):
    pass


class NoReportError(NsysError):
    pass


class NewerReportError(NsysError):
    pass


class NsysTimeoutError(NsysError):
    pass


class CellError(NsysError):
    """The cell raised in the subprocess; ``traceback`` is its traceback text."""

    def __init__(self, traceback_text: str) -> None:
        self.traceback = traceback_text
        last = traceback_text.strip().splitlines()[-1] if traceback_text.strip() else "error"
        super().__init__(f"The cell raised in the nsys subprocess: {last}\n\n{traceback_text}")


def find_nsys(configured: str | None = None) -> str:
    """The nsys to use: the configured path, else PATH, else the usual install locations."""
    looked: list[str] = []
    if configured:
        looked.append(configured)
        if os.path.isfile(configured) and os.access(configured, os.X_OK):
            return configured
        found = shutil.which(configured)
        if found:
            return found
        raise NsysNotFoundError(
            f"nsys not found at the configured path {configured!r}. Set the right one: "
            "%config GpuMagics.nsys_path = '/path/to/nsys'"
        )
    found = shutil.which("nsys")
    looked.append("PATH")
    if found:
        return found
    for pattern in _SEARCH:
        looked.append(pattern)
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    raise NsysNotFoundError(
        "nsys (Nsight Systems) was not found. Looked in: " + ", ".join(looked) + ". Install Nsight Systems in the "
        "same container as this kernel (NVIDIA's PyTorch containers ship it), or point to it: "
        "%config GpuMagics.nsys_path = '/path/to/nsys'"
    )


def _classify(text: str, rc: int, paths: str) -> NsysError | None:
    if re.search(r"newer than|created (?:in|by) (?:a )?newer|unsupported.*version", text, re.IGNORECASE):
        return NewerReportError(
            "The report was written by a newer Nsight Systems than the nsys exporting it. Export with the nsys that "
            f"recorded it (gpumagic uses one binary for both: check %config GpuMagics.nsys_path).\n{_tail(text)}"
        )
    if "No reports were generated" in text:
        return NoReportError(
            "nsys generated no report: the capture range (the NVTX range around the cell) never opened. "
            "Check that the cell ran (an exception in warm-up?) and that NVTX is traced (-t must include nvtx); "
            f"nsys said:\n{_tail(text)}"
        )
    if rc != 0:
        return NsysFailedError(f"nsys exited with status {rc}. Its output ends with:\n{_tail(text)}{paths}")
    return None


def _tail(text: str, lines: int = 15) -> str:
    # progress bars repaint with \r: keep what a terminal would show
    clean = [ln.split("\r")[-1] for ln in text.splitlines() if ln.strip()]
    return "\n".join(clean[-lines:])


def export_sqlite(nsys: str, report: str, timeout: float = 600) -> str:
    """Export ``report`` to a fresh ``.sqlite`` next to it with the same nsys; return its path."""
    out = os.path.splitext(report)[0] + ".sqlite"
    if os.path.exists(out):
        os.remove(out)  # never reuse a stale or half-written export
    proc = subprocess.run(
        [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", out, report],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    err = _classify(proc.stdout + proc.stderr, proc.returncode, "")
    if err is not None:
        raise err
    if not os.path.exists(out):
        raise NsysFailedError(f"nsys export wrote no {out}. It said:\n{_tail(proc.stdout + proc.stderr)}")
    return out


@dataclass
class NsysRun:
    trace: Trace
    report: str | None
    sqlite: str
    command: list[str]
    wall_s: float
    notes: list[str] = field(default_factory=list)


def profile_cell(
    cell: str,
    namespace: Mapping[str, Any],
    label: str,
    *,
    setup: str | None = None,
    warmup: int = 1,
    iters: int = 1,
    nsys_path: str | None = None,
    profile_dir: str = "gpumagic-profiles",
    trace: str = "cuda,nvtx,osrt",
    extra_args: str = "",
    timeout: float = 300.0,
    python: str | None = None,
) -> NsysRun:
    """Ship the cell's names, run it under nsys in a subprocess, export and read the SQLite."""
    nsys = find_nsys(nsys_path)
    workdir = tempfile.mkdtemp(prefix="gpumagic-nsys-")
    try:
        ship(free_names(cell) + (free_names(setup) if setup else []), namespace, workdir)
        with open(os.path.join(workdir, "cell.json"), "w", encoding="utf-8") as f:
            json.dump({"cell": cell, "setup": setup, "warmup": warmup, "iters": iters, "label": label}, f)
        os.makedirs(profile_dir, exist_ok=True)
        stem = os.path.join(os.path.abspath(profile_dir), f"{time.strftime('%Y%m%d-%H%M%S')}-{_slug(label)}")
        cmd = [
            nsys,
            "profile",
            "-t",
            trace,
            "--capture-range=nvtx",
            f"--nvtx-capture={label}",
            "--capture-range-end=stop",
            "--force-overwrite=true",
            "--export=sqlite",
            "-o",
            stem,
            *shlex.split(extra_args),
            python or sys.executable,
            "-m",
            "gpumagic.capture.runner",
            workdir,
        ]
        env = dict(os.environ, NSYS_NVTX_PROFILER_REGISTER_ONLY="0")
        pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            partial = sorted(glob.glob(stem + "*"))
            raise NsysTimeoutError(
                f"The nsys run did not finish within {timeout:g} s and was stopped. "
                + (f"Partial files kept: {', '.join(partial)}. " if partial else "No partial files were written. ")
                + "Raise the limit with --timeout S, or profile less work."
            ) from None
        wall = time.perf_counter() - t0
        error_file = os.path.join(workdir, "error.txt")
        if os.path.exists(error_file):
            with open(error_file, encoding="utf-8") as f:
                raise CellError(f.read())
        paths = f"\nFiles: {', '.join(sorted(glob.glob(stem + '*')))}" if glob.glob(stem + "*") else ""
        err = _classify(output, proc.returncode, paths)
        if err is not None:
            raise err
        report = stem + ".nsys-rep" if os.path.exists(stem + ".nsys-rep") else None
        sqlite = stem + ".sqlite"
        if not os.path.exists(sqlite):
            if report is None:
                raise NoReportError(
                    f"nsys finished but wrote neither {stem}.nsys-rep nor .sqlite. It said:\n{_tail(output)}"
                )
            sqlite = export_sqlite(nsys, report)
        tr = read_sqlite(sqlite)
        tr.meta.update(label=label, nsys=nsys)
        return NsysRun(trace=tr, report=report, sqlite=sqlite, command=cmd, wall_s=wall)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:60] or "cell"


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGINT)  # let nsys write what it has
        proc.wait(timeout=10)
    except (subprocess.TimeoutExpired, ProcessLookupError, PermissionError):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
