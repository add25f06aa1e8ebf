"""The external profilers gpumagic runs (nsys, ncu): finding the binary, the subprocesses'
environment, and one run in a session of its own that a timeout or a Ctrl-C stops whole, keeping
what it wrote.

Both backends need the same three things, and the traps are the same: a configured path that is
wrong must say so rather than fall back to another binary; the subprocess must import this gpumagic
(not another one on the path); and a run that is cut short must leave no process behind and name the
partial files it kept.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence

__all__ = ["child_env", "find_tool", "run_in_session", "start_in_session", "wait_in_session"]


def find_tool(
    name: str, configured: str | None, search: Sequence[str], not_found: Callable[..., Exception]
) -> str:
    """The binary to use: the configured path (or name on PATH), else ``name`` on PATH, else the
    newest match of the ``search`` patterns; ``not_found(looked, configured=...)`` is raised where
    none is."""
    if configured:
        if os.path.isfile(configured) and os.access(configured, os.X_OK):
            return configured
        found = shutil.which(configured)
        if found:
            return found
        raise not_found([configured], configured=configured)
    found = shutil.which(name)
    if found:
        return found
    looked = ["PATH"]
    for pattern in search:
        looked.append(pattern)
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    raise not_found(looked)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of gpumagic's subprocesses: this one's, with this gpumagic first on
    PYTHONPATH (and ``extra``)."""
    env = dict(os.environ, **extra)
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_in_session(
    cmd: list[str],
    timeout: float,
    stem: str,
    *,
    tool: str,
    env: dict[str, str],
    stop: Callable[[subprocess.Popen[str]], None],
    timed_out: Callable[[list[str]], Exception],
) -> tuple[str, int]:
    """Run ``cmd`` in its own session; (its output, exit status). On timeout: ``stop`` it, then
    raise ``timed_out(partial files)``. On Ctrl-C: ``stop`` it, then KeyboardInterrupt again, saying
    what was stopped and which files (``stem*``) were kept."""
    proc = start_in_session(cmd, env)
    return wait_in_session(proc, timeout, stem, tool=tool, stop=stop, timed_out=timed_out)


def start_in_session(cmd: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """``cmd`` started in a session of its own (a stop reaches every process it starts), its
    output and errors in one pipe: :func:`wait_in_session` collects it."""
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


def wait_in_session(
    proc: subprocess.Popen[str],
    timeout: float,
    stem: str,
    *,
    tool: str,
    stop: Callable[[subprocess.Popen[str]], None],
    timed_out: Callable[[list[str]], Exception],
) -> tuple[str, int]:
    """The end of a run :func:`start_in_session` began, as :func:`run_in_session` says."""
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(proc)
        raise timed_out(sorted(glob.glob(stem + "*"))) from None
    except KeyboardInterrupt:
        stop(proc)
        partial = sorted(glob.glob(stem + "*"))
        kept = f"Partial files kept: {', '.join(partial)}." if partial else "It wrote no files."
        raise KeyboardInterrupt(
            f"{tool} was stopped (its process group, the cell's process with it). {kept}"
        ) from None
    return output, proc.returncode
