"""How far a kernel's median moves from one torch.profiler capture to the next, by the number of
runs a capture holds, and whether the buffer's address matters: the reason a GPU test comparing
two captures' medians within 1% takes 200 runs a capture, not 20.

    python benchmarks/kernel_median_noise.py [--runs 20,200] [--inputs 3] [--rounds 3] [--json PATH]

A compiled elementwise chain (one 46 µs Triton kernel on an H100, 64 MB in and out) over several
copies of its input at different addresses, captured round-robin; per input and run count, the
median of each capture and their spread. Needs CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
from torch.profiler import ProfilerActivity, profile


def capture(f, t: torch.Tensor, runs: int) -> float:
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(runs):
            f(t)
        torch.cuda.synchronize()
    durations = [
        e.time_range.elapsed_us()
        for e in p.events()
        if e.device_type == torch.autograd.DeviceType.CUDA and e.name.startswith("triton")
    ]
    return statistics.median(durations)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="20,200")
    ap.add_argument("--inputs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs CUDA: the question is a GPU kernel's capture-to-capture spread")
    f = torch.compile(lambda t: torch.nn.functional.gelu(t) * 2 + 1)
    inputs = [torch.randn(16 * 1024 * 1024, device="cuda") for _ in range(args.inputs)]
    for t in inputs:
        f(t)
        f(t)
    out = {"device": torch.cuda.get_device_name(), "by_runs": {}}
    print(f"{out['device']}: medians (µs) of {args.rounds} captures per input, round-robin")
    print(f"{'runs':>5}  {'input':>5}  {'medians':<28} {'spread':>7}")
    for runs in (int(x) for x in args.runs.split(",")):
        rows = {i: [] for i in range(len(inputs))}
        for _ in range(args.rounds):
            for i, t in enumerate(inputs):
                rows[i].append(capture(f, t, runs))
        for i, v in rows.items():
            print(f"{runs:>5}  {i:>5}  {[round(x, 2) for x in v]!s:<28} {max(v) - min(v):>7.2f}")
        means = [statistics.mean(v) for v in rows.values()]
        within = max(max(v) - min(v) for v in rows.values())
        between = max(means) / min(means) - 1
        print(f"{runs:>5}  worst spread of one input {within:.2f} µs; between inputs {between:.2%}")
        out["by_runs"][runs] = {"medians": rows, "worst_spread_us": within, "between": between}
    path = args.json or os.path.join(
        os.path.dirname(__file__), "results", "kernel_median_noise.json"
    )
    with open(path, "w") as fh:
        json.dump(out, fh, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
