"""The profiled process of ``--ncu``, started beside the first pass.

ncu's filter is fixed when ncu starts, and the first pass (``capture/ncu/rank.py``) decides it; so
the profiled process used to start only after the first pass: ncu's own start, Python, the torch
import and CUDA's start (3.7 s of a 12.5 s run on an H100) came after the ranking. Most cells a user
tunes launch a handful of kernel names, no more than the ``top`` asked for, and then the filter
selects every kernel the cell runs: the same as no filter. So the process is started at once under
ncu with no name filter (``capture/child/runner.py --gated``: it imports torch, starts CUDA and
waits), and when the first pass has ranked the kernels the gate says "go" (the ranking's names all
fit in ``top``: it profiles every kernel of the cell's range) or "stop" (more names: it ends without
running the cell, and ncu runs again with the filter, as before). The names shipped and the loop are
the same either way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable

from ..child.runner import EARLY_PHASES_FILE, GATE_FILE, write_whole
from ..nsys.ranks import stop_run_processes
from ..phases import Phases, read_marks
from ..tools import start_in_session, wait_in_session

__all__ = ["EarlyRun", "fits"]

#: Seconds the held process's session may take to end once killed, before its processes are
#: looked for by work dir.
STOP_GRACE = 10.0


def fits(ranked: list[dict[str, object]], top: int) -> bool:
    """Whether profiling every kernel is what the ``top`` filter would profile: the first pass saw
    kernels, and no more names than ``top``."""
    return 0 < len(ranked) <= top


class EarlyRun:
    """ncu's run of the cell, started now and held at the gate; :meth:`go` or :meth:`stop` opens or
    closes it, :meth:`wait` collects it, :meth:`close` makes sure nothing of it is left."""

    def __init__(self, cmd: list[str], workdir: str, env: dict[str, str]) -> None:
        self.workdir = workdir
        self.command = [*cmd, "--gated"]
        self.started = time.time()
        self.opened: float | None = None
        self.proc = start_in_session(self.command, env)

    def go(self) -> None:
        """Let the held process run the cell under ncu."""
        write_whole(self.workdir, GATE_FILE, "go")
        self.opened = time.time()

    def stop(self, stem: str) -> None:
        """End the held process without a run, at once: it has profiled nothing, so ncu and the
        process are killed (SIGKILL to the session) rather than let ncu's own exit take its
        seconds before the filtered run may start; a report of the run that never was (``stem``)
        is not left. The gate says "stop" too, for a process that outlived its session, and one
        that did and does not end within :data:`STOP_GRACE` s is stopped by its work dir."""
        write_whole(self.workdir, GATE_FILE, "stop")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.communicate(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            # a process of the run outside the killed session holds the output open
            stop_run_processes(self.workdir)
            try:
                self.proc.communicate(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                if self.proc.stdout is not None:
                    self.proc.stdout.close()  # not read any more: ncu itself is gone
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=STOP_GRACE)
        with contextlib.suppress(OSError):
            os.remove(stem + ".ncu-rep")

    def wait(
        self,
        timeout: float,
        stem: str,
        stop: Callable[[subprocess.Popen[str]], None],
        timed_out: Callable[[list[str]], Exception],
    ) -> tuple[str, int]:
        """ncu's output and exit status, once the run the gate let through has ended."""
        return wait_in_session(self.proc, timeout, stem, tool="ncu", stop=stop, timed_out=timed_out)

    def close(self, stop: Callable[[subprocess.Popen[str]], None]) -> None:
        """Stop it where it still runs (a failure or Ctrl-C between the start and the gate)."""
        if self.proc.poll() is None:
            stop(self.proc)

    def phases(self, phases: Phases, ended: float) -> str:
        """The run's phases after the gate opened (the child's own marks, "child start" being what
        was left of its start when the gate opened), and a sentence on what the first pass hid."""
        phases.add_child(read_marks(self.workdir), self.opened, ended)
        early = read_marks(self.workdir, EARLY_PHASES_FILE)
        hidden = [("ncu and Python start", early[0][1] - self.started)] if early else []
        hidden += [(n, b - a) for n, a, b in early if n != "waiting for the first pass"]
        if not hidden:
            return ""
        return (
            "The profiled process started beside the first pass ("
            + ", ".join(f"{n} {s:.1f} s" for n, s in hidden)
            + ")."
        )
