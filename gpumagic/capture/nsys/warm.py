"""``%%gpuprofile --nsys`` with a warm child: one process under Nsight Systems per kernel, reused by
later ``--nsys`` cells, so that a cell pays for its own capture and export, not again for a Python
start, the torch import, CUDA's start and nsys' own.

What this relies on is Nsight Systems' interactive CLI (User Guide, "Profiling from the CLI":
"Example Interactive CLI Command Sequences", the case "Run application, start/stop collection
multiple times": ``nsys launch <app>``, then ``nsys start`` / ``nsys stop`` as often as wanted, then
``nsys shutdown --kill sigkill``; and the launch, start, stop and shutdown command switch options,
nsys 2025.3). Here:

* ``nsys launch --session-new=NAME -t TRACE [--cuda-graph-trace=node] [--nsys-args] python -m
  gpumagic.capture.child.warm_child CTRL PID NAME NSYS`` starts the child in a session of its own
  name (trace options belong to ``launch``; nothing is collected until ``start``);
* per cell: ``nsys start --session=NAME -o STEM --force-overwrite=true [--sample=none
  --cpuctxsw=none]`` (sampling's switches are ``start``'s: those of ``--nsys-args`` go there, and
  where they say nothing of sampling, none is collected: ``options.LEAN``) once the child's
  warm-up is over and it waits (the warm-up stays out of the report, as with the one-shot run's
  NVTX capture range), ``nsys stop --session=NAME`` once its captured runs are over (it writes
  ``STEM.nsys-rep``), then ``nsys export`` of that report alone. ``nsys start`` answers before the
  target records (seen in practice, not documented): the captured runs begin :data:`SETTLE` s
  later, and a report without the cell's NVTX range is not used (:func:`missed_range`: the cell
  runs the one-shot way and the next child waits longer);
* ``nsys shutdown --session=NAME --kill=sigkill`` when the child is retired: at the kernel's exit
  (atexit), when the key changes (another nsys, ``-t``, ``--nsys-args``, Python, torch version or
  environment), after a timeout, an interrupt or a CUDA error in a cell. The child also watches this
  process and shuts its session down itself when it is gone (``capture/child/warm_child.py``).

Anything that goes wrong with the warm child itself (launch, start, stop, a child that dies) raises
:class:`WarmUnavailable`; the caller then runs the cell the one-shot way and says why. A cell's own
error is reported as the one-shot path reports it (:class:`~gpumagic.errors.CellError`).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import CellError, NsysTimeoutError
from ..child.runner import alive
from ..child.warm_child import CMD_FIFO, READY_FILE
from ..child.workdir import raise_cell_error
from ..guards import deferred_interrupts
from ..options import NsysOptions, graph_trace_args, label_slug, lean_args, split_start_args
from ..phases import Phases, read_marks
from ..tools import child_env

if TYPE_CHECKING:
    from ...trace import Trace

__all__ = [
    "WarmChild",
    "WarmUnavailable",
    "current_child",
    "launch_early",
    "retire_current",
    "run_warm",
]

#: Seconds a warm child may take to start (Python, torch, CUDA, nsys' injection) at most.
START_LIMIT = 120.0
#: Seconds an nsys start, stop or shutdown may take.
CLI_LIMIT = 60.0
#: Tries of ``nsys start`` before the warm child is given up for this cell.
START_TRIES = 3
#: Seconds waited after ``nsys start`` answers before the cell's captured runs begin: the CLI
#: answers before the target's collection is recording, and a short cell run at once can be
#: missed. Doubled (up to 4 s) each time a report is found without the cell's range
#: (:func:`missed_range`).
SETTLE = 0.15
_settle = SETTLE


def settle_seconds() -> float:
    return _settle


def missed_range(trace: Trace, label: str) -> bool:
    """Whether a warm report lacks the cell's NVTX range (``label``): its collection began after
    the cell had run, so some of the cell's work may be missing. The next child waits longer
    after ``nsys start``; the caller retires this one and runs the cell the one-shot way."""
    global _settle
    texts = trace.nvtx["text"].astype(str) if len(trace.nvtx) else []
    want = label_slug(label)
    if any(label_slug(t.lstrip(":")) == want for t in texts):
        return False
    _settle = min(_settle * 2, 4.0)
    return True


class WarmUnavailable(Exception):
    """The warm child could not run this cell; the message says why (the one-shot run follows)."""


@dataclass
class WarmChild:
    """One child under ``nsys launch``: its session, control dir, processes and what it was
    started with (``key``)."""

    key: dict[str, Any]
    nsys: str
    session: str
    ctrl: str
    launcher: subprocess.Popen[bytes]
    pid: int = 0
    cells: int = 0
    #: the child's start, for the first cell's breakdown: launch time and the child's own marks
    started: float = 0.0
    start_marks: list[tuple[str, float, float]] = field(default_factory=list)
    #: why the child before this one was retired (None: this is the first)
    replaced: str | None = None
    #: what each cell's ``nsys start`` adds to its command (sampling's switches)
    start_args: list[str] = field(default_factory=list)


_current: WarmChild | None = None
#: Settings (a key, as JSON) a child could not start with in this process, and why.
_failed: dict[str, str] = {}


def current_child() -> WarmChild | None:
    """The kernel's warm child, if one runs."""
    return _current


def child_key(
    nsys: str, opts: NsysOptions, extra_args: list[str], env: dict[str, str]
) -> dict[str, Any]:
    """What a child is started with: a cell whose key differs needs a new child."""
    try:
        from importlib.metadata import version

        torch_version: str | None = version("torch")
    except Exception:  # noqa: BLE001 - no torch distribution: the child says so itself
        torch_version = None
    digest = hashlib.sha256(
        json.dumps(sorted(env.items()), ensure_ascii=False).encode("utf-8", "replace")
    ).hexdigest()[:16]
    return {
        "nsys": os.path.realpath(nsys),
        "trace (-t)": opts.trace,
        "--nsys-args": " ".join(extra_args),
        "python": opts.python or sys.executable,
        "torch": torch_version,
        "environment": digest,
    }


def _changed(old: dict[str, Any], new: dict[str, Any]) -> str:
    return ", ".join(k for k in new if old.get(k) != new.get(k)) or "its settings"


def launch_command(
    nsys: str, opts: NsysOptions, extra_args: list[str], session: str, ctrl: str
) -> list[str]:
    """``nsys launch`` of the child, with the user's arguments that are not ``nsys start``'s."""
    launch_args = split_start_args(extra_args)[0]
    return [
        nsys,
        "launch",
        f"--session-new={session}",
        "-t",
        opts.trace,
        *graph_trace_args(opts, launch_args),
        *launch_args,
        opts.python or sys.executable,
        "-m",
        "gpumagic.capture.child.warm_child",
        ctrl,
        str(os.getpid()),
        session,
        nsys,
    ]


def start_args(extra_args: list[str]) -> list[str]:
    """What each cell's ``nsys start`` adds: the user's sampling switches, else none sampled."""
    given = split_start_args(extra_args)[1]
    return [*lean_args(given), *given]


def _launch(nsys: str, opts: NsysOptions, extra_args: list[str], key: dict[str, Any]) -> WarmChild:
    """``nsys launch`` the child; it is not waited for (:func:`_await_ready`)."""
    ctrl = tempfile.mkdtemp(prefix="gpumagic-nsys-warm-")
    os.mkfifo(os.path.join(ctrl, CMD_FIFO))
    session = f"gpumagic-{os.getpid()}-{os.path.basename(ctrl).rsplit('-', 1)[-1]}"
    started = time.time()
    try:
        with open(os.path.join(ctrl, "launch.log"), "wb") as log:  # the child holds its own copy
            launcher = subprocess.Popen(
                launch_command(nsys, opts, extra_args, session, ctrl),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env(NSYS_NVTX_PROFILER_REGISTER_ONLY="0"),
                start_new_session=True,  # a Ctrl-C in the kernel does not reach it
            )
    except OSError as exc:
        shutil.rmtree(ctrl, ignore_errors=True)
        raise WarmUnavailable(f"nsys launch could not start ({exc})") from None
    return WarmChild(
        key, nsys, session, ctrl, launcher, started=started, start_args=start_args(extra_args)
    )


def _await_ready(child: WarmChild, opts: NsysOptions) -> None:
    """Wait for the child's ``ready.json`` (its pid and start marks); WarmUnavailable with nsys'
    own words where the launch failed or the child was not ready in time."""
    ready = os.path.join(child.ctrl, READY_FILE)
    limit = min(opts.timeout, START_LIMIT)
    while not os.path.exists(ready):
        rc = child.launcher.poll()
        if rc not in (None, 0) or time.time() - child.started > limit:
            why = (
                f"nsys launch exited with status {rc}"
                if rc is not None
                else f"the child was not ready within {limit:g} s"
            )
            tail = _log_tail(child.ctrl)
            raise WarmUnavailable(why + (f": {tail}" if tail else ""))
        time.sleep(0.01)
    with open(ready, encoding="utf-8") as f:
        info = json.load(f)
    child.pid = int(info["pid"])
    child.start_marks = [(str(n), float(a), float(b)) for n, a, b in info.get("marks", [])]


def _log_tail(ctrl: str, chars: int = 600) -> str:
    try:
        with open(os.path.join(ctrl, "launch.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")[-chars:].strip()
    except OSError:
        return ""


def _send(child: WarmChild, command: dict[str, Any], deadline: float) -> None:
    """Write one command to the child's FIFO once the child is reading it."""
    data = (json.dumps(command) + "\n").encode()
    path = os.path.join(child.ctrl, CMD_FIFO)
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: nobody reads (not yet, or no more)
                raise WarmUnavailable(f"the warm child's command pipe failed ({exc})") from None
            if not alive(child.pid):
                raise WarmUnavailable("the warm child is gone") from None
            if time.monotonic() > deadline:
                raise WarmUnavailable("the warm child did not take the command in time") from None
            time.sleep(0.002)
            continue
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return


def _wait_for(child: WarmChild, paths: list[str], deadline: float, timeout: float) -> str:
    """The first of ``paths`` to appear; a gone child is WarmUnavailable, the deadline a
    timeout."""
    pause = 0.001  # short waits answered at once, long ones polled gently
    while True:
        for p in paths:
            if os.path.exists(p):
                return p
        if not alive(child.pid):
            raise WarmUnavailable("the warm child exited while it ran the cell")
        if time.monotonic() > deadline:
            raise NsysTimeoutError(timeout, [])
        time.sleep(pause)
        pause = min(pause * 1.25, 0.02)


def _cli(child: WarmChild, *args: str) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            [child.nsys, *args, f"--session={child.session}"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CLI_LIMIT,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _ensure(nsys: str, opts: NsysOptions, extra_args: list[str]) -> WarmChild:
    """The kernel's child for these settings: the current one if it was started with them and
    still runs, else a new one, launched (not waited for); an earlier one is retired, and why is
    kept in ``replaced``."""
    global _current
    key = child_key(nsys, opts, extra_args, child_env(NSYS_NVTX_PROFILER_REGISTER_ONLY="0"))
    failed = _failed.get(json.dumps(key, sort_keys=True))
    if failed is not None:
        raise WarmUnavailable(f"it could not start earlier with these settings: {failed}")
    replaced = None
    if _current is not None:
        runs = _current.launcher.poll() in (None, 0) and (not _current.pid or alive(_current.pid))
        if _current.key == key and runs:
            return _current
        replaced = (
            f"{_changed(_current.key, key)} changed"
            if _current.key != key
            else "the previous one had exited"
        )
        retire_current()
    _current = _launch(nsys, opts, extra_args, key)
    _current.replaced = replaced
    return _current


def launch_early(nsys: str, opts: NsysOptions, extra_args: list[str]) -> None:
    """Launch the child now if this cell needs a new one, without waiting: its Python start, torch
    import and CUDA start overlap the shipping of the cell's inputs. A failure is left for
    :func:`run_warm` to meet (and say)."""
    with contextlib.suppress(WarmUnavailable):
        _ensure(nsys, opts, extra_args)


def get_child(nsys: str, opts: NsysOptions, extra_args: list[str]) -> WarmChild:
    """The kernel's warm child for these settings, ready for a cell."""
    child = _ensure(nsys, opts, extra_args)
    if not child.pid:
        try:
            _await_ready(child, opts)
        except WarmUnavailable as exc:
            # not tried again with the same settings: each try would cost its wait again
            _failed[json.dumps(child.key, sort_keys=True)] = str(exc)
            retire_current()
            raise
    return child


def run_warm(
    nsys: str,
    opts: NsysOptions,
    extra_args: list[str],
    workdir: str,
    stem: str,
    phases: Phases,
) -> tuple[str, list[str]]:
    """Run the cell shipped to ``workdir`` in the warm child, its capture written to
    ``STEM.nsys-rep``; the report's path and notes. Raises CellError (the cell's own),
    NsysTimeoutError, or WarmUnavailable (the caller runs the one-shot path)."""
    shipped = time.time()
    child = get_child(nsys, opts, extra_args)
    reused = child.cells > 0
    child.cells += 1  # served, whatever the cell does
    if not reused:
        # what the child's start cost this cell: its part after the shipping it overlapped
        first = child.start_marks[0][1] if child.start_marks else time.time()
        for name, a, b in [("child start", child.started, first), *child.start_marks]:
            phases.add(name, b - max(a, shipped))
    try:
        report = _run_cell(child, opts, workdir, stem, phases)
    except KeyboardInterrupt:
        with deferred_interrupts():
            retire_current()
        raise KeyboardInterrupt(
            "nsys was stopped (the warm child and its session; the next --nsys cell starts a "
            "new one)."
        ) from None
    except (WarmUnavailable, NsysTimeoutError):
        retire_current()
        raise
    except CellError as exc:
        if "CUDA error" in str(exc.traceback) or "AcceleratorError" in str(exc.traceback):
            retire_current()  # a CUDA error leaves the context unusable: the next cell starts anew
        raise
    if reused:
        notes = [
            f"Warm child reused (cell {child.cells} of this nsys session): no new process, torch "
            "import or CUDA start; the cell's names were restored afresh."
        ]
    else:
        notes = [
            "Warm child started"
            + (f" ({child.replaced})" if child.replaced else "")
            + ": later --nsys cells of this process reuse it (NsysOptions(warm=False), "
            "GpuMagics.nsys_warm_child in a notebook, turns this off)."
        ]
    return report, notes


def _run_cell(child: WarmChild, opts: NsysOptions, workdir: str, stem: str, phases: Phases) -> str:
    deadline = time.monotonic() + opts.timeout
    sent = time.time()
    _send(child, {"run": workdir}, deadline)
    warm, done = os.path.join(workdir, "warm"), os.path.join(workdir, "done")
    first = _wait_for(child, [warm, done], deadline, opts.timeout)
    tool_start = 0.0
    if first == warm:
        t = time.perf_counter()
        for attempt in range(START_TRIES):  # a session just launched may not be registered yet
            rc, out = _cli(child, "start", "-o", stem, "--force-overwrite=true", *child.start_args)
            if rc == 0 or attempt == START_TRIES - 1:
                break
            time.sleep(0.3 * (attempt + 1))
        if rc == 0:
            time.sleep(settle_seconds())  # `nsys start` answers before its collection records
        tool_start = time.perf_counter() - t
        if rc != 0:
            _send(child, {"abort": f"nsys start failed: {out[-300:]}"}, deadline)
            _wait_for(child, [done], deadline, opts.timeout)
            raise WarmUnavailable(f"nsys start failed (status {rc}): {out[-400:]}")
        _send(child, {"go": True}, deadline)
        _wait_for(child, [done], deadline, opts.timeout)
    rc, out = _cli(child, "stop") if first == warm else (0, "")
    stopped = time.time()
    with contextlib.suppress(WarmUnavailable):  # frees the cell's memory while we export
        _send(child, {"tidy": True}, time.monotonic() + 5)
    marks = read_marks(workdir)
    if marks:
        phases.add("hand-over", marks[0][1] - sent)
    for name, a, b in marks:
        if name == "capture":
            phases.add("tool start", tool_start)
        phases.add(name, b - a)
    if marks and first == warm:
        phases.add("tool stop/flush", stopped - marks[-1][2])
    raise_cell_error(workdir, CellError)
    if rc != 0:
        raise WarmUnavailable(f"nsys stop failed (status {rc}): {out[-400:]}")
    report = stem + ".nsys-rep"
    if not os.path.exists(report):
        raise WarmUnavailable(f"nsys stop wrote no {report}: {out[-400:]}")
    return report


def retire(child: WarmChild) -> None:
    """End ``child`` and its session; remove its control dir. Never raises."""
    with contextlib.suppress(Exception):
        if child.pid and alive(child.pid):
            with contextlib.suppress(WarmUnavailable, OSError):
                _send(child, {"exit": True}, time.monotonic() + 0.2)
        _cli(child, "shutdown", "--kill=sigkill")
    with contextlib.suppress(Exception):
        if child.launcher.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.launcher.pid, signal.SIGKILL)
        child.launcher.wait(timeout=10)
    with contextlib.suppress(Exception):
        if child.pid and alive(child.pid):
            os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while child.pid and alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # gone before this returns: a new child may want its GPU memory
    shutil.rmtree(child.ctrl, ignore_errors=True)


def retire_current() -> None:
    """End the kernel's warm child, if any (at exit, and whenever it must be replaced)."""
    global _current
    child, _current = _current, None
    if child is not None:
        retire(child)


atexit.register(retire_current)
