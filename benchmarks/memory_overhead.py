"""What ``%%gpuprofile --memory`` adds to a cell: the cell's run with the allocator's history
recorded (Python stacks, as ``--memory`` records it) against the same run without, and the whole
magic's wall time. Run on a GPU host:

    python benchmarks/memory_overhead.py [--json benchmarks/results/memory_overhead.json]

The cell is a training step (Linear-GELU-Linear-LayerNorm, bf16 autocast, AdamW, batch 4096 x 2048).
Runs alternate recorded and plain, so a clock that drifts under load moves both. Target: recording
adds <= 20% to the cell.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

STEP = """
opt.zero_grad(set_to_none=True)
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = model(x).float().pow(2).mean()
loss.backward()
opt.step()
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=os.path.join("benchmarks", "results", "memory_overhead.json"))
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpumagic")
    model = torch.nn.Sequential(
        torch.nn.Linear(2048, 8192),
        torch.nn.GELU(),
        torch.nn.Linear(8192, 2048),
        torch.nn.LayerNorm(2048),
    ).cuda()
    ip.user_ns.update(
        torch=torch,
        model=model,
        opt=torch.optim.AdamW(model.parameters()),
        x=torch.randn(4096, 2048, device="cuda"),
    )
    code = compile(STEP, "<step>", "exec")

    def run() -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        exec(code, ip.user_ns)  # noqa: S102 - the benchmark's own cell
        torch.cuda.synchronize()
        return time.perf_counter() - t

    for _ in range(3):
        run()
    plain, recorded = [], []
    for _ in range(args.rounds):
        plain.append(run())
        torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
        try:
            recorded.append(run())
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)
    magic = []
    for flag in ("-w 1 --no-timeline", "--memory -w 1"):
        t = time.perf_counter()
        ip.run_cell_magic("gpuprofile", flag, STEP)
        magic.append((flag, time.perf_counter() - t))
    p, r = statistics.median(plain), statistics.median(recorded)
    rows = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cell_plain_s": p,
        "cell_recorded_s": r,
        "added": r / p - 1,
        "magic_wall_s": dict(magic),
    }
    print(f"{'cell, plain':34} {p * 1e3:9.2f} ms")
    print(
        f"{'cell, history recorded (stacks)':34} {r * 1e3:9.2f} ms  (+{r / p - 1:.1%}; target "
        f"<= 20%)"
    )
    for flag, wall in magic:
        print(f"{'%%gpuprofile ' + flag:34} {wall * 1e3:9.1f} ms wall")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(rows, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
