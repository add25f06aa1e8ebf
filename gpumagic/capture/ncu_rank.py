"""The first pass of ``--ncu``:  python -m gpumagic.capture.ncu_rank WORKDIR

Nsight Compute replays every kernel it profiles many times (once per group of counters), so profiling all of a
cell's kernels can take minutes where the cell takes milliseconds. This pass decides which ones are worth it: the
cell runs as the ncu run will run it (the same shipped names, setup, warm-up and NVTX range), under torch.profiler
in a plain subprocess, and its kernel table (nsys' ``cuda_gpu_kern_sum`` definitions: total time per kernel name)
is written to ``kernels.json``. ncu is then asked for the top names only. It runs in a subprocess of its own, not
inside the ncu run: CUPTI allows one subscriber, and under ncu that is ncu. An exception in the cell is written to
``error.txt`` (its traceback), and the exit code is 3, as the runner does.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def main(workdir: str) -> int:
    from gpumagic.capture import torch_profiler
    from gpumagic.capture.cell import Cell, compile_source
    from gpumagic.capture.options import TorchProfilerOptions
    from gpumagic.capture.runner import _cell_traceback
    from gpumagic.capture.shipping import restore

    with open(os.path.join(workdir, "cell.json"), encoding="utf-8") as f:
        spec = json.load(f)
    ns: dict[str, Any] = {"__name__": "__main__"}
    ns.update(restore(workdir))
    try:
        if spec.get("setup"):
            exec(compile_source(spec["setup"], "<gpuprofile-setup>"), ns)  # noqa: S102 - the user's setup code
        captured = torch_profiler.capture(
            Cell.of(spec["cell"]),
            spec["label"],
            namespace=ns,
            warmup=spec.get("warmup", 1),
            iters=spec.get("iters", 1),
            options=TorchProfilerOptions(record_shapes=False),
        )
    except BaseException as exc:  # noqa: BLE001 - report whatever stopped the cell, then exit non-zero
        with open(os.path.join(workdir, "error.txt"), "w", encoding="utf-8") as f:
            f.write(_cell_traceback(exc))
        return 3
    table = captured.trace.kernel_summary()
    rows = [
        {"name": str(r["Name"]), "total_ns": int(r["Total Time (ns)"]), "instances": int(r["Instances"])}
        for _, r in table.iterrows()
    ]
    with open(os.path.join(workdir, "kernels.json"), "w", encoding="utf-8") as f:
        json.dump(rows, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
