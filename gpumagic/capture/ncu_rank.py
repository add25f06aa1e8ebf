"""The first pass of ``--ncu``, both sides: :class:`FirstPass` here, ``python -m gpumagic.capture.ncu_rank WORKDIR``
there.

Nsight Compute replays every kernel it profiles many times (once per group of counters), so profiling all of a
cell's kernels can take minutes where the cell takes milliseconds. This pass decides which ones are worth it: the
cell runs as the ncu run will run it (the same shipped names, setup, warm-up and loop), under torch.profiler in a
plain subprocess, and the total GPU time per kernel name, longest first, is written to ``kernels.json``; ncu is
then asked for the top names only. It runs in a subprocess of its own, not inside the ncu run: CUPTI allows one
subscriber, and under ncu that is ncu. An exception in the cell is written to ``error.txt`` (its traceback), and the
exit code is 3, as the runner does.

Time matters (the whole ``--ncu`` should take seconds, not minutes): the subprocess starts before the names are
shipped, imports torch, starts CUDA and the profiler, and only then waits for ``cell.json`` (written last, whole); the
parent goes on as soon as ``kernels.json`` is there, while the subprocess tears CUDA down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

_REGEX_SPECIAL = set("\\^$.|?*+()[]{}")
#: Seconds between looks for the files the two sides hand each other.
POLL = 0.02


def _strip_tail(name: str, open_: str, close: str) -> str:
    """``name`` without its trailing balanced ``open_ ... close`` group (a parameter list, template arguments)."""
    if not name.endswith(close):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {close: 1, open_: -1}.get(name[i], 0)
        if depth == 0:
            return name[:i].rstrip()
    return name


def function_name(name: str) -> str:
    """A kernel's function name as ncu's ``--kernel-name-base function`` spells it: no return type, namespace,
    template arguments or parameters (``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` ->
    ``vectorized_elementwise_kernel``)."""
    head = _strip_tail(_strip_tail(name.strip(), "(", ")"), "<", ">")
    head = head.rsplit("::", 1)[-1]
    return head.split()[-1] if head.split() else name


def function_filter(names: Sequence[str]) -> str:
    """An ncu ``--kernel-name`` value that matches kernels of these function names (with ``--kernel-name-base
    function``), whether or not ncu's base keeps namespaces or template arguments."""
    bases = list(dict.fromkeys(function_name(n) for n in names))
    alternatives = "|".join("".join("\\" + c if c in _REGEX_SPECIAL else c for c in b) for b in bases)
    return f"regex:(?:^|::)(?:{alternatives})(?:$|<|\\()"


class FirstPass:
    """The first pass, started at once in ``workdir`` (it waits there for ``cell.json``); :meth:`result` is its
    ranking, :meth:`close` stops or reaps it (always call it)."""

    def __init__(self, workdir: str, python: str, env: dict[str, str]) -> None:
        self.workdir = workdir
        self.command = [python, "-m", "gpumagic.capture.ncu_rank", workdir]
        self.log_path = os.path.join(workdir, "first-pass.log")
        with open(self.log_path, "w", encoding="utf-8") as log:
            self.proc = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def result(self, timeout: float) -> list[dict[str, Any]]:
        """The kernel names by total GPU time, longest first, once ``kernels.json`` is written (the process may
        still be exiting). A cell error is left in ``error.txt`` for the caller; other failures raise here."""
        from ..errors import NcuFailedError, NcuTimeoutError

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
                    self.command, returncode, f"The first pass (ranking the kernels) failed:\n{output}"
                )
            if time.monotonic() > deadline:
                raise NcuTimeoutError(timeout)
            time.sleep(POLL)
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def close(self, grace: float = 30.0) -> None:
        """Let the process finish its exit (``grace`` seconds), else stop it and its session."""
        from .nsys import _kill

        try:
            self.proc.wait(timeout=grace if os.path.exists(os.path.join(self.workdir, "kernels.json")) else 0.1)
        except subprocess.TimeoutExpired:
            _kill(self.proc)  # type: ignore[arg-type]


def rank(cell: Any, ns: dict[str, Any], warmup: int, iters: int) -> list[dict[str, Any]]:
    """Run ``cell`` as every backend does (``cell.run_cell``) under torch.profiler, CUDA activity only (no CPU op
    tracing, no Trace: this pass should cost little more than the cell), and total each kernel name's GPU time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from gpumagic.capture.cell import run_cell
    from gpumagic.profiler_start import join_background

    if not torch.cuda.is_available():  # no CUDA in this process: the cell runs (its errors are its own), no kernels
        run_cell(cell, ns, warmup, iters)
        return []
    sync = torch.cuda.synchronize
    prof = profile(activities=[ProfilerActivity.CUDA])

    @contextmanager
    def profiled() -> Iterator[None]:
        join_background(timeout=120)  # the profiler's start, begun with the process (main), overlapped the warm-up
        with prof:
            yield

    run_cell(cell, ns, warmup, iters, profiled, sync)
    totals: dict[str, list[int]] = {}
    cuda = torch.autograd.DeviceType.CUDA
    try:
        events = [(e.name(), e.duration_ns()) for e in prof.profiler.kineto_results.events() if e.device_type() == cuda]
    except AttributeError:  # an older or newer profiler: the public event list
        events = [(e.name, int(e.time_range.elapsed_us() * 1000)) for e in prof.events() if e.device_type == cuda]
    for name, ns_ in events:
        if name.startswith(("Memcpy", "Memset", "cudaMemcpy", "cudaMemset")):
            continue
        entry = totals.setdefault(name, [0, 0])
        entry[0] += int(ns_)
        entry[1] += 1
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])
    return [{"name": n, "total_ns": t, "instances": c} for n, (t, c) in ranked]


def _start_profiler_early() -> None:
    """CUPTI's first start in a process takes seconds (3.9 s on an H100 host, ``profiler_start.py``): begin it on a
    background thread at once, so that it overlaps restoring the shipped names and the cell's warm-up."""
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        from gpumagic.profiler_start import start_background_warm

        torch.cuda.init()
        start_background_warm()


def main(workdir: str) -> int:
    from gpumagic.capture.cell import Cell, compile_source
    from gpumagic.capture.runner import _cell_traceback
    from gpumagic.capture.shipping import restore

    _start_profiler_early()
    spec_path = os.path.join(workdir, "cell.json")
    while not os.path.exists(spec_path):  # the names are still being shipped
        if not os.path.isdir(workdir):
            return 4  # the capture was given up
        time.sleep(POLL)
    with open(spec_path, encoding="utf-8") as f:
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
    with open(os.path.join(workdir, "kernels.json.part"), "w", encoding="utf-8") as f:
        json.dump(rows, f)
    os.replace(os.path.join(workdir, "kernels.json.part"), os.path.join(workdir, "kernels.json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
