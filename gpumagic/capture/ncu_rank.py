"""The first pass of ``--ncu``:  python -m gpumagic.capture.ncu_rank WORKDIR

Nsight Compute replays every kernel it profiles many times (once per group of counters), so profiling all of a
cell's kernels can take minutes where the cell takes milliseconds. This pass decides which ones are worth it: the
cell runs as the ncu run will run it (the same shipped names, setup, warm-up and loop), under torch.profiler in a
plain subprocess, and the total GPU time per kernel name, longest first, is written to ``kernels.json``; ncu is
then asked for the top names only. It runs in a subprocess of its own, not inside the ncu run: CUPTI allows one
subscriber, and under ncu that is ncu. An exception in the cell is written to ``error.txt`` (its traceback), and the
exit code is 3, as the runner does.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def rank(cell: Any, ns: dict[str, Any], warmup: int, iters: int) -> list[dict[str, Any]]:
    """Run ``cell`` as every backend does (``cell.run_cell``) under torch.profiler, CUDA activity only (no CPU op
    tracing, no Trace: this pass should cost little more than the cell), and total each kernel name's GPU time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from gpumagic.capture.cell import run_cell
    from gpumagic.timing.warmup import join_background

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
    """CUPTI's first start in a process takes seconds (3.9 s on an H100 host, ``timing/warmup.py``): begin it on a
    background thread at once, so that it overlaps restoring the shipped names and the cell's warm-up."""
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        from gpumagic.timing.warmup import start_background_warm

        torch.cuda.init()
        start_background_warm()


def main(workdir: str) -> int:
    from gpumagic.capture.cell import Cell, compile_source
    from gpumagic.capture.runner import _cell_traceback
    from gpumagic.capture.shipping import restore

    with open(os.path.join(workdir, "cell.json"), encoding="utf-8") as f:
        spec = json.load(f)
    _start_profiler_early()
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
    with open(os.path.join(workdir, "kernels.json"), "w", encoding="utf-8") as f:
        json.dump(rows, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
