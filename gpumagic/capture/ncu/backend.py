"""Run a cell in a subprocess under Nsight Compute and read what it measured (``%%gpuprofile
--ncu``).

NVIDIA's own Python wrapper for ncu cannot run in a notebook (it relaunches the script); here the
cell travels as it does for ``--nsys`` (its free names shipped, ``capture/child/shipping.py``) and
runs in ``gpumagic.capture.child.runner`` under ``ncu --nvtx --nvtx-include "<label>/"``: the
warm-up runs outside the cell's NVTX range, so only the captured runs are profiled. ncu replays each
kernel once per group of counters, so by default only the kernels that matter are profiled: a first,
plain pass (``capture/ncu/rank.py``: torch.profiler in its own subprocess) ranks the cell's kernels
by total GPU time, and ncu gets the top names as a filter on kernel *function* names
(``--kernel-name-base function``: the one spelling that torch's demangler and ncu's agree on; the
full demangled names differ, e.g. ``char*, 3ul`` against ``char *, 3``), one launch per kernel and
launch configuration (``--filter-mode per-launch-config``). Beside the sections, ncu is asked for
its tensor-path counters (``ncu_tensor.TENSOR_METRICS``: 5 more replay passes per kernel on an H100,
16 instead of 11) so that a tensor-core GEMM's FLOPs are counted. The ``.ncu-rep`` is kept (it opens
in ncu-ui) and read back with the same ncu (``capture/ncu/read.py``). Every failure names its cause
and fix (``gpumagic.errors``); no shell is involved.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import (
    FileMissingError,
    InvalidOptionError,
    NcuCellError,
    NcuError,
    NcuFailedError,
    NcuNotFoundError,
    NcuPermissionError,
    NcuReplayError,
    NcuTimeoutError,
    NoKernelsProfiledError,
)
from .. import Shown
from ..cell import loop_notes
from ..child.workdir import WorkDir, raise_cell_error, shown_value, source_text
from ..guards import deferred_interrupts
from ..nsys.backend import _kill
from ..options import ITERS, WARMUP, NcuOptions, ready_profile_dir, report_stem
from ..phases import Phases, read_marks
from ..tools import child_env, find_tool, run_in_session
from .early import EarlyRun, fits
from .rank import FirstPass, function_filter, function_name
from .read import NcuData, read_details_csv, read_raw_csv
from .tensor import TENSOR_METRICS

__all__ = [
    "NcuCapture",
    "capture",
    "find_ncu",
    "function_filter",
    "function_name",
    "load_ncu_data",
    "read_report",
]

_SEARCH = (
    "/usr/local/cuda/bin/ncu",
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/cuda/nsight-compute-*/ncu",
    "/usr/local/NVIDIA-Nsight-Compute*/ncu",
    "/usr/lib/nsight-compute/ncu",
)


@dataclass
class NcuCapture:
    """What an ncu run measured: ``data`` (per-launch metrics and rule messages), ``notes`` that
    qualify it, ``files`` kept (``report``: the ``.ncu-rep``), the cell's ``value`` as the
    subprocess printed it, ``seconds``: the wall time of the whole capture, and ``phases``: where it
    went (shipping, first pass, child start, torch import, CUDA init, inputs, warm-up, capture,
    tool stop/flush, reading)."""

    data: NcuData
    notes: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    value: Shown | None = None
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)


def find_ncu(configured: str | None = None) -> str:
    """The ncu to use: the configured path, else PATH, else the usual install locations."""
    return find_tool("ncu", configured, _SEARCH, NcuNotFoundError)


def _checked(opts: NcuOptions, label: str) -> list[str]:
    """The options' problems and the label's, before any work; the extra arguments, split."""
    extra_args = opts.validate()
    if re.search(r"[@/\\]", label):
        raise InvalidOptionError(
            option="label",
            reason="cannot contain '@', '/' or '\\' with ncu (its NVTX filter syntax)",
            value=label,
        )
    return extra_args


def capture(
    cell: str,
    label: str,
    *,
    namespace: Mapping[str, Any] | None = None,
    warmup: int = WARMUP,
    iters: int = ITERS,
    options: NcuOptions | None = None,
) -> NcuCapture:
    """Ship the names ``cell`` (source text) reads from ``namespace``, pick the kernels worth
    profiling (unless a filter is given or ``top`` is 0), run the cell under ncu in a subprocess
    (warm-up outside the NVTX range ``label``, ``iters`` runs inside it, only those profiled) and
    read the report.

    The cell runs only in subprocesses: ``namespace`` is read, never written.
    """
    source_text(cell, "ncu")
    opts = options or NcuOptions()
    extra_args = _checked(opts, label)
    ncu = find_ncu(opts.ncu_path)
    begun = time.perf_counter()
    stem = report_stem(ready_profile_dir(opts.profile_dir), label)
    run = _NcuRun(ncu, opts, label, stem, extra_args, Phases(), WorkDir("gpumagic-ncu-"))
    notes = loop_notes(warmup, iters)
    try:
        run.start_first_pass()
        spec = {"warmup": warmup, "iters": iters, "label": label}
        notes.append(run.work.ship(cell, opts.setup, namespace, spec).note())
        run.phases.add("shipping", time.perf_counter() - begun)
        kernel_filter, base, filter_note = run.kernel_filter()
        notes += [filter_note] if filter_note else []
        started_note = run.profile(kernel_filter, base)
        with run.phases.timed("reading"):
            data = read_report(run.report, ncu)
        value = shown_value(run.work.path)
    finally:
        run.close()
    seconds = time.perf_counter() - begun
    notes.append(_clock_note(opts.clock_control))
    notes.append(
        f"Took {seconds:.1f} s: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in run.phases.rows.items() if v >= 0.05)
        + "."
    )
    if started_note:
        notes.append(started_note)
    notes.append(f"report: {run.report} (opens in ncu-ui)")
    return NcuCapture(data, notes, {"report": run.report}, value, seconds, run.phases.rows)


@dataclass
class _NcuRun:
    """One ``--ncu`` capture's processes and files: the first pass that ranks the kernels
    (``ranking``), the profiled process started beside it (``early``), the ``work`` dir, the report
    (``stem``) and the ``phases``; :meth:`close` leaves nothing of them behind. Every process of
    the capture gets ``env``: the notebook's process id and the time limit, which a process
    waiting at its gate watches (``capture/child/runner.py``)."""

    ncu: str
    opts: NcuOptions
    label: str
    stem: str
    extra_args: list[str]
    phases: Phases
    work: WorkDir
    ranking: FirstPass | None = None
    early: EarlyRun | None = None
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.env = child_env(
            GPUMAGIC_PARENT_PID=str(os.getpid()), GPUMAGIC_GATE_LIMIT=str(self.opts.timeout)
        )

    @property
    def report(self) -> str:
        return self.stem + ".ncu-rep"

    def start_first_pass(self) -> None:
        """Where the kernels are to be ranked (no filter given, ``top`` above 0), the first pass
        starts now, its Python, torch and CUDA starting while the names ship; with
        ``early_start``, the profiled process too, beside it (``capture/ncu/early.py``)."""
        if self.opts.kernel_filter is not None or self.opts.top <= 0:
            return
        self.ranking = FirstPass(self.work.path, self.opts.python or sys.executable, self.env)
        if self.opts.early_start:
            self.early = EarlyRun(self._command(None, None), self.work.path, self.env)

    def kernel_filter(self) -> tuple[str | None, str | None, str | None]:
        """The kernel filter ncu runs with, its name base, and a note on what is profiled: the
        options' filter as given (no note); after the first pass, every kernel where its ranking
        fits in ``top`` (the early process let through), else the top names by GPU time (the
        early process, if any, stopped)."""
        if self.ranking is None:
            return self.opts.kernel_filter, None, None
        with self.phases.timed("first pass"):  # what is left of it once the names have shipped
            ranked = self.ranking.result(self.opts.timeout)
        if self.early is not None and fits(ranked, self.opts.top):
            self.early.go()
            return None, None, _all_note(ranked, self.opts)
        if self.early is not None:
            with self.phases.timed("early process stop"):
                self.early.stop(self.stem)
            self.early = None
        raise_cell_error(self.work.path, NcuCellError)
        kernel_filter, note = _top_filter(ranked, self.opts, self.label)
        return kernel_filter, "function", note

    def profile(self, kernel_filter: str | None, base: str | None) -> str:
        """ncu's run of the cell (the early process let through, else a new one with the filter),
        checked for the cell's error, the errors ncu's output means, and its report. A sentence
        on what the first pass hid, where the early process ran ("" otherwise)."""
        if self.early is not None:
            cmd = self.early.command
            output, returncode = self.early.wait(
                self.opts.timeout, self.stem, _kill, _timed_out(self.opts.timeout)
            )
            started_note = self.early.phases(self.phases, time.time())
        else:
            cmd = self._command(kernel_filter, base)
            started = time.time()
            output, returncode = _run(cmd, self.opts.timeout, self.stem, self.env)
            _child_phases(self.phases, read_marks(self.work.path), started, time.time())
            started_note = ""
        raise_cell_error(self.work.path, NcuCellError)
        files = sorted(glob.glob(self.stem + "*"))
        err = _classify(cmd, output, returncode, files, kernel_filter, self.label)
        if err is not None:
            raise err
        if not os.path.exists(self.report):
            raise NcuFailedError(
                cmd, returncode, f"ncu finished but wrote no {self.report}.\n{output}"
            )
        return started_note

    def close(self) -> None:
        """Stop what still runs and remove the work dir, the shipped tensors released (a Ctrl-C
        meanwhile waits): the "cleanup" phase."""
        with self.phases.timed("cleanup"), deferred_interrupts():
            if self.early is not None:
                self.early.close(_kill)
            if self.ranking is not None:
                self.ranking.close()  # the first pass's exit, where it has not ended yet
            self.work.close()

    def _command(self, kernel_filter: str | None, base: str | None) -> list[str]:
        return _profile_command(
            self.ncu,
            self.opts,
            self.label,
            self.stem,
            self.work.path,
            self.extra_args,
            kernel_filter,
            base,
        )


def _child_phases(
    phases: Phases, marks: list[tuple[str, float, float]], started: float, ended: float
) -> None:
    """ncu's run split by the child's own marks: "child start" (ncu's start and its injection
    into Python), torch import, CUDA init, inputs, warm-up, "capture" (the profiled runs: ncu's
    replay passes happen inside them) and "tool stop/flush" (ncu writing its report); one "ncu"
    phase where the child wrote no marks."""
    if marks:
        phases.add_child(marks, started, ended)
    else:
        phases.add("ncu", ended - started)


def _all_note(ranked: list[dict[str, Any]], opts: NcuOptions) -> str:
    return (
        f"Profiled: every kernel of the cell's range, {opts.launch_count} launch(es) per kernel "
        f"and launch configuration (the first pass saw {len(ranked)} kernel name"
        f"{'s' if len(ranked) != 1 else ''}, no more than the top {opts.top} asked for)."
    )


def _top_filter(ranked: list[dict[str, Any]], opts: NcuOptions, label: str) -> tuple[str, str]:
    """The ncu filter for the top ``opts.top`` kernel names of the first pass, and a note that says
    what it means."""
    if not ranked:
        raise NoKernelsProfiledError(
            "The first pass (torch.profiler) saw no CUDA kernel in the cell.", label=label
        )
    top = ranked[: opts.top]
    total = sum(r["total_ns"] for r in ranked) or 1
    share = sum(r["total_ns"] for r in top) / total
    note = (
        f"Profiled: the top {len(top)} of {len(ranked)} kernel names by GPU time in a first "
        f"pass ({share:.0%} of the cell's kernel time), {opts.launch_count} launch(es) per kernel "
        f"and launch "
        "configuration; ncu matches them by function name, so a kernel that shares one may "
        "be profiled too."
    )
    return function_filter([r["name"] for r in top]), note


def _clock_note(clock_control: str) -> str:
    if clock_control == "none":
        return "Clocks left free (--no-clock-control): durations are comparable with %gputime's."
    return (
        "ncu locked the GPU clocks to base (its default): durations are longer than "
        "%gputime's at boost clocks, "
        "and the ceilings are at base clocks too; --no-clock-control (clock_control='none') "
        "leaves them free."
    )


def _profile_command(
    ncu: str,
    opts: NcuOptions,
    label: str,
    stem: str,
    workdir: str,
    extra_args: list[str],
    kernel_filter: str | None,
    base: str | None,
) -> list[str]:
    cmd = [ncu, "--nvtx", "--nvtx-include", f"{label}/", "--filter-mode", "per-launch-config"]
    cmd += ["--launch-count", str(opts.launch_count)]
    if kernel_filter:
        cmd += (["--kernel-name-base", base] if base else []) + ["--kernel-name", kernel_filter]
    if opts.section_set:
        cmd += ["--set", opts.section_set]
    else:
        for s in opts.sections:
            cmd += ["--section", s]
    if not any(a == "--metrics" or a.startswith("--metrics=") for a in extra_args):
        cmd += [
            "--metrics",
            ",".join(TENSOR_METRICS),
        ]  # tensor-core work (capture/ncu/tensor.py); a user's --metrics wins
    cmd += [
        "--clock-control",
        opts.clock_control,
        "--force-overwrite",
        "--export",
        stem,
        *extra_args,
    ]
    return [*cmd, opts.python or sys.executable, "-m", "gpumagic.capture.child.runner", workdir]


def _classify(
    command: list[str],
    output: str,
    rc: int,
    files: list[str],
    kernel_filter: str | None,
    label: str,
) -> NcuError | None:
    """The error ncu's output and exit status mean, if any."""
    if "ERR_NVGPUCTRPERM" in output:
        return NcuPermissionError(output)
    if re.search(
        r"Failed to (?:profile|prepare|replay)|replay.*failed|Unable to (?:save|restore)",
        output,
        re.I,
    ):
        return NcuReplayError(output, files)
    if "No kernels were profiled" in output:
        return NoKernelsProfiledError(output, kernel_filter, label)
    if rc != 0:
        return NcuFailedError(command, rc, output, files)
    return None


def _run(cmd: list[str], timeout: float, stem: str, env: dict[str, str]) -> tuple[str, int]:
    """Run ncu in its own session, with the environment every process of this capture gets;
    (output, exit status). On timeout: stop it, keep what it wrote, say so. On Ctrl-C: the same,
    then KeyboardInterrupt again, saying what was stopped and which files were kept."""
    return run_in_session(
        cmd, timeout, stem, tool="ncu", env=env, stop=_kill, timed_out=_timed_out(timeout)
    )


def _timed_out(timeout: float) -> Callable[[list[str]], NcuTimeoutError]:
    return lambda partial: NcuTimeoutError(timeout, partial)


def _import(ncu: str, report: str, pages: Sequence[str], timeout: float) -> dict[str, str]:
    """``ncu --import REPORT --csv --page P --print-units base`` for each page, side by side (each
    import reads the whole report: in parallel they take the time of one); {page: its text}."""
    cmds = {
        p: [ncu, "--import", report, "--csv", "--page", p, "--print-units", "base"] for p in pages
    }
    procs = {
        p: subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for p, c in cmds.items()
    }
    out: dict[str, str] = {}
    try:
        for page, proc in procs.items():
            try:
                stdout, stderr = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                raise NcuTimeoutError(timeout, [report]) from None
            if proc.returncode != 0:
                raise NcuFailedError(cmds[page], proc.returncode, stdout[-2000:] + stderr)
            out[page] = stdout
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


def read_report(report: str, ncu: str, timeout: float = 300) -> NcuData:
    """NcuData from a ``.ncu-rep`` with ``ncu --import``: the raw page (metrics) and the details
    page (rules)."""
    pages = _import(ncu, report, ("raw", "details"), timeout)
    data = read_raw_csv(pages["raw"], path=report, source=f"{ncu} --import --page raw")
    data.rules = read_details_csv(pages["details"])
    return data


def load_ncu_data(path: str | os.PathLike[str], ncu: str | None = None) -> NcuData:
    """NcuData from a saved ``.ncu-rep`` (read with ``ncu --import``: the ncu here, or the path
    given) or from a saved ``ncu --csv --page raw`` text (``.csv``, no ncu needed).

    Not with Nsight Compute's ``ncu_report`` module: loaded beside torch in one process, it crashed
    that process on the H100 host (ncu 2025.3.1), and a notebook's kernel is such a process."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileMissingError(path=path, what="The Nsight Compute report")
    if path.endswith(".csv"):
        with open(path, encoding="utf-8") as f:
            return read_raw_csv(f.read(), path=path, source="CSV (ncu --page raw)")
    return read_report(path, find_ncu(ncu))
