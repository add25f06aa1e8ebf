"""%%gpuprofile's cost on the series' transformer block (batch 16, seq 512, hidden 4096, FFN 16384),
GPU host.

Side by side in one process, after warm-up: the block bare (synchronized wall time), the block under
the capture (the cell's own wall time inside the profiler), and the whole magic path (capture +
trace parsing + report HTML). Prints a table and writes JSON.

    python benchmarks/gpuprofile_overhead.py [--json PATH] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "capture"))

import torch
import workloads

from gpumagic.capture.torch.backend import capture
from gpumagic.render.report import ProfileReport


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--json", default=os.path.join(os.environ.get("OUT", "."), "gpuprofile_overhead.json")
    )
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    ns = workloads.make_inputs()
    run = lambda: workloads.block(ns)  # noqa: E731
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    capture(run, "warm", warmup=0)  # the profiler's one-time start-up is not what is measured
    bare, cell, whole = [], [], []
    for i in range(args.repeats):
        t0 = time.perf_counter()
        run()
        torch.cuda.synchronize()
        bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        res = capture(run, f"cell:{i}", warmup=0)
        html = ProfileReport(res.trace, label=f"cell:{i}")._repr_html_()
        whole.append(time.perf_counter() - t0)
        w0, w1 = res.trace.cell_window()
        cell.append((w1 - w0) * 1e-9)
    rows = {
        "bare block (sync wall)": statistics.median(bare),
        "block inside the capture (its NVTX range)": statistics.median(cell),
        "whole %%gpuprofile path (capture+parse+report)": statistics.median(whole),
    }
    base = rows["bare block (sync wall)"]
    print(f"{'what':<48} {'median s':>10} {'vs bare':>8}")
    for k, v in rows.items():
        print(f"{k:<48} {v:>10.4f} {v / base:>7.2f}x")
    with open(args.json, "w") as f:
        json.dump(
            {
                "device": torch.cuda.get_device_name(),
                "torch": torch.__version__,
                "repeats": args.repeats,
                "median_s": rows,
                "html_bytes": len(html),
            },
            f,
            indent=2,
        )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
