"""The first pass of ``--ncu``, both sides: :class:`FirstPass` here, ``python -m
gpumagic.capture.ncu.rank WORKDIR`` there.

Nsight Compute replays every kernel it profiles many times (once per group of counters), so
profiling all of a cell's kernels can take minutes where the cell takes milliseconds. This pass
decides which ones are worth it: the cell runs as the ncu run will run it (the same shipped names,
setup, warm-up and loop), with CUPTI's kernel records on, in a plain subprocess, and the total GPU
time per kernel name, longest first, is written to ``kernels.json``; ncu is then asked for the top
names only. It runs in a subprocess of its own, not inside the ncu run: CUPTI allows one subscriber,
and under ncu that is ncu. An exception in the cell is written to ``error.txt`` (its traceback), and
the exit code is 3, as the runner does.

Time matters (the whole ``--ncu`` should take seconds, not minutes): the subprocess starts before
the names are shipped and imports torch while it waits for ``cell.json`` (written last, whole); the
kernel records come from CUPTI directly (0.03 s to start, where torch.profiler's first start took
5-8 s); the parent goes on as soon as ``kernels.json`` is there, while the subprocess tears CUDA
down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpumagic.capture.cell import Cell

_REGEX_SPECIAL = set("\\^$.|?*+()[]{}")
#: Seconds between looks for the files the two sides hand each other.
POLL = 0.02


def _strip_tail(name: str, open_: str, close: str) -> str:
    """``name`` without its trailing balanced ``open_ ... close`` group (a parameter list, template
    arguments)."""
    if not name.endswith(close):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {close: 1, open_: -1}.get(name[i], 0)
        if depth == 0:
            return name[:i].rstrip()
    return name


def function_name(name: str) -> str:
    """A kernel's function name as ncu's ``--kernel-name-base function`` spells it: no return type,
    namespace, template arguments or parameters (``void at::native::vectorized_elementwise_kernel<4,
    ...>(int, ...)`` -> ``vectorized_elementwise_kernel``)."""
    head = _strip_tail(_strip_tail(name.strip(), "(", ")"), "<", ">")
    head = head.rsplit("::", 1)[-1]
    return head.split()[-1] if head.split() else name


def function_filter(names: Sequence[str]) -> str:
    """An ncu ``--kernel-name`` value that matches kernels of these function names (with
    ``--kernel-name-base function``), whether or not ncu's base keeps namespaces or template
    arguments."""
    bases = list(dict.fromkeys(function_name(n) for n in names))
    alternatives = "|".join(
        "".join("\\" + c if c in _REGEX_SPECIAL else c for c in b) for b in bases
    )
    return f"regex:(?:^|::)(?:{alternatives})(?:$|<|\\()"


class FirstPass:
    """The first pass, started at once in ``workdir`` (it waits there for ``cell.json``);
    :meth:`result` is its ranking, :meth:`close` stops or reaps it (always call it)."""

    def __init__(self, workdir: str, python: str, env: dict[str, str]) -> None:
        self.workdir = workdir
        self.command = [python, "-m", "gpumagic.capture.ncu.rank", workdir]
        self.log_path = os.path.join(workdir, "first-pass.log")
        with open(self.log_path, "w", encoding="utf-8") as log:
            self.proc = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def result(self, timeout: float) -> list[dict[str, Any]]:
        """The kernel names by total GPU time, longest first, once ``kernels.json`` is written (the
        process may still be exiting). A cell error is left in ``error.txt`` for the caller; other
        failures raise here."""
        from ...errors import NcuFailedError, NcuTimeoutError

        path = os.path.join(self.workdir, "kernels.json")
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            returncode = self.proc.poll()
            if returncode is not None and not os.path.exists(path):
                if os.path.exists(os.path.join(self.workdir, "error.txt")):
                    return []
                with open(self.log_path, encoding="utf-8", errors="replace") as f:
                    output = f.read()
                raise NcuFailedError(
                    self.command,
                    returncode,
                    f"The first pass (ranking the kernels) failed:\n{output}",
                )
            if time.monotonic() > deadline:
                raise NcuTimeoutError(timeout)
            time.sleep(POLL)
        with open(path, encoding="utf-8") as f:
            ranked: list[dict[str, Any]] = json.load(f)
            return ranked

    def close(self, grace: float = 30.0) -> None:
        """Let the process finish its exit (``grace`` seconds), else stop it and its session."""
        from ..nsys.backend import _kill

        try:
            self.proc.wait(
                timeout=grace if os.path.exists(os.path.join(self.workdir, "kernels.json")) else 0.1
            )
        except subprocess.TimeoutExpired:
            _kill(self.proc)  # type: ignore[arg-type]


def rank(cell: Cell, ns: dict[str, Any], warmup: int, iters: int) -> list[dict[str, Any]]:
    """Run ``cell`` as every backend does (``cell.run_cell``) with kernel records on (CUPTI
    directly, torch.profiler where it cannot be: :func:`gpumagic.gpu_activity`; no CPU op tracing,
    no Trace: this pass should cost little more than the cell), and total each kernel name's GPU
    time."""
    import torch

    from gpumagic.capture.cell import run_cell
    from gpumagic.gpu_activity import recording

    if (
        not torch.cuda.is_available()
    ):  # no CUDA in this process: the cell runs (its errors are its own), no kernels
        run_cell(cell, ns, warmup, iters)
        return []
    recordings: list[Any] = []

    @contextmanager
    def recorded() -> Iterator[None]:
        with recording() as rec:
            recordings.append(rec)
            yield

    run_cell(cell, ns, warmup, iters, recorded, torch.cuda.synchronize)
    totals: dict[str, list[int]] = {}
    for a in recordings[0].gpu(launched_only=False) if recordings else []:
        if a.kind == "kernel":
            entry = totals.setdefault(a.name, [0, 0])
            entry[0] += a.end - a.start
            entry[1] += 1
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])
    return [{"name": n, "total_ns": t, "instances": c} for n, (t, c) in ranked]


def _start_early() -> None:
    """Import torch, start CUDA and load the CUPTI binding while the parent still ships the names
    (seconds of imports and driver start that would otherwise follow the shipping)."""
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        from ...gpu_activity.cupti_direct import refusal

        torch.cuda.init()
        refusal()  # imports the binding (0.1-0.2 s) where there is one


def main(workdir: str) -> int:
    from gpumagic.capture.cell import Cell, compile_source
    from gpumagic.capture.child.runner import _cell_traceback, await_file, write_whole
    from gpumagic.capture.child.shipping import restore

    _start_early()
    if not await_file(workdir, "cell.json"):  # the names are still being shipped
        return 4  # the capture was given up
    with open(os.path.join(workdir, "cell.json"), encoding="utf-8") as f:
        spec = json.load(f)
    ns: dict[str, Any] = {"__name__": "__main__"}
    ns.update(restore(workdir))
    try:
        if spec.get("setup"):
            exec(compile_source(spec["setup"], "<gpuprofile-setup>"), ns)  # noqa: S102 - the user's setup code
        rows = rank(Cell.of(spec["cell"]), ns, spec.get("warmup", 1), spec.get("iters", 1))
    except BaseException as exc:  # noqa: BLE001 - report whatever stopped the cell, then exit non-zero
        with open(os.path.join(workdir, "error.txt"), "w", encoding="utf-8") as f:
            f.write(_cell_traceback(exc))
        return 3
    write_whole(workdir, "kernels.json", json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
