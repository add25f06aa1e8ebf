"""The cell's process under ``ncu --mode=launch``, started beside the first pass, profiled through
``ncu --mode=attach`` once the first pass has chosen the kernels.

Why: ncu's filters (which kernels, which sections) are fixed on its command line, and the first pass
that chooses the kernels (``ncu_rank.py``) takes its own Python start, torch import, CUDA start and
run of the cell (~2.4 s on an H100). Started after it, ncu's child paid the same start again
(~3.7 s under ncu's injection). ncu's launch mode starts the program and holds it at its first CUDA
call until an attach brings the profile options: the child's Python start and torch import happen
while the first pass ranks, and only its CUDA start waits for the attach (measured on an H100: a
launch held 2.5 s and then attached took 5.53 s in all, a plain run 5.47 s).

One port per launch (``--port P --max-connections 1`` on both sides), chosen free on loopback, so
that the attach reaches this cell's process and no other process ncu launched on the machine.
"""

from __future__ import annotations

import os
import socket
import subprocess

__all__ = ["LaunchedCell", "free_port"]

def free_port() -> int:
    """A TCP port free on loopback now (the kernel's choice, so two cells never pick the same)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LaunchedCell:
    """``ncu --mode=launch PYTHON -m gpumagic.capture.runner WORKDIR`` in its own session, its
    output in ``launch.log`` in the work dir. :meth:`attach_command` is the profiling half;
    :meth:`close` stops it if it still runs (always call it)."""

    def __init__(self, ncu: str, python: str, workdir: str, env: dict[str, str]) -> None:
        self.port = free_port()
        self.log_path = os.path.join(workdir, "launch.log")
        self.command = [
            ncu,
            "--mode=launch",
            *self._port_args(),
            python,
            "-m",
            "gpumagic.capture.runner",
            workdir,
        ]
        with open(self.log_path, "w", encoding="utf-8") as log:  # the child holds its own copy
            self.proc = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def _port_args(self) -> list[str]:
        return ["--port", str(self.port), "--max-connections", "1"]

    def attach_command(self, ncu: str, profile_args: list[str]) -> list[str]:
        """``ncu --mode=attach`` to this launch, with the profile options (filters, sections,
        export)."""
        return [ncu, "--mode=attach", "--hostname", "127.0.0.1", *self._port_args(), *profile_args]

    def finish(self, timeout: float) -> tuple[str, int | None]:
        """Wait for the launched process (the attach returns as it disconnects); (its output, its
        exit status, None if it had to be stopped)."""
        try:
            rc: int | None = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.close()
            rc = None
        return self.output(), rc

    def output(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def close(self) -> None:
        """Stop the launched process and its session if it still runs."""
        if self.proc.poll() is None:
            from .nsys import _kill

            _kill(self.proc)  # type: ignore[arg-type]
