"""Caching-allocator snapshots as ``torch.cuda.memory._dump_snapshot`` writes them, for the memory
view's tests.

python3 tests/data/capture/memory_snapshots.py OUTDIR
  -> OUTDIR/train_step.pickle   a transformer-ish training step (Linear-GELU-Linear + LayerNorm,
  AdamW, bf16
                                autocast), warm-up outside, two steps recorded with Python stacks
     OUTDIR/oom.pickle          a step whose activations do not fit a cap set with
     set_per_process_memory_fraction,
                                dumped in the except clause of the OutOfMemoryError
     OUTDIR/compiled.pickle     the same model under torch.compile, one step recorded
     OUTDIR/facts.json          what the allocator itself said of each run: max_memory_allocated
     over the
                                recorded steps, memory_allocated/reserved at the dump, the device's
                                total memory
"""

from __future__ import annotations

import json
import os
import sys

import torch


def model() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(2048, 8192),
        torch.nn.GELU(),
        torch.nn.Linear(8192, 2048),
        torch.nn.LayerNorm(2048),
    ).cuda()


def step(m: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = m(x).float().pow(2).mean()
    loss.backward()
    opt.step()


def record(path: str, fn, facts: dict, key: str) -> None:
    torch.cuda.synchronize()
    base = torch.cuda.max_memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    try:
        fn()
    except torch.OutOfMemoryError as e:
        facts[key + "_error"] = str(e).splitlines()[0]
    finally:
        torch.cuda.synchronize()
        torch.cuda.memory._dump_snapshot(path)
        torch.cuda.memory._record_memory_history(enabled=None)
    facts[key] = {
        "max_memory_allocated_before": base,
        "max_memory_allocated_after": torch.cuda.max_memory_allocated(),
        "memory_allocated_at_dump": torch.cuda.memory_allocated(),
        "memory_reserved_at_dump": torch.cuda.memory_reserved(),
        "device_total": torch.cuda.get_device_properties(0).total_memory,
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
    }


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    facts: dict = {}
    m = model()
    opt = torch.optim.AdamW(m.parameters())
    x = torch.randn(4096, 2048, device="cuda")
    step(m, opt, x)  # warm-up: optimizer state allocated outside the recording
    torch.cuda.reset_peak_memory_stats()
    record(
        os.path.join(out, "train_step.pickle"),
        lambda: [step(m, opt, x) for _ in range(2)],
        facts,
        "train_step",
    )

    cm = torch.compile(model())
    copt = torch.optim.AdamW(cm.parameters())
    step(cm, copt, x)
    torch.cuda.reset_peak_memory_stats()
    record(os.path.join(out, "compiled.pickle"), lambda: step(cm, copt, x), facts, "compiled")

    m = opt = cm = copt = None  # free the first two runs' memory before the capped one
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(
        6 * 2**30 / total
    )  # a 6 GiB cap: the big batch cannot fit
    try:
        m = model()
        opt = torch.optim.AdamW(m.parameters())
        big = torch.randn(4096, 2048, device="cuda")
        step(m, opt, big)
        torch.cuda.reset_peak_memory_stats()
        huge = torch.randn(65536, 2048, device="cuda")
        record(os.path.join(out, "oom.pickle"), lambda: step(m, opt, huge), facts, "oom")
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    with open(os.path.join(out, "facts.json"), "w") as f:
        json.dump(facts, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
