"""The allocator's history of a training step with gradient accumulation, for naming backward's
blocks in a backward that makes no new gradients: run on the GPU host from the project root,
``python3 tests/data/capture/accumulation_memory.py OUT``. Writes ``OUT/accumulation_step.pickle``
(two micro-batches of the 4-block transformer of ``module_traces.py`` under bf16 autocast, each
``loss / 2`` then ``backward()``, then AdamW; warm-up outside) and ``OUT/accumulation_names.json``
(every tensor the names reach at the recording's start and end, and the allocator's peak)."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import sys

import torch
import torch.nn.functional as F

_spec = importlib.util.spec_from_file_location(
    "module_traces", pathlib.Path(__file__).with_name("module_traces.py")
)
mt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mt)


def step(model, opt, idx) -> None:
    opt.zero_grad(set_to_none=True)
    for micro in range(2):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(idx[micro::2])
            loss = F.cross_entropy(logits.flatten(0, 1).float(), idx[micro::2].flatten()) / 2
        loss.backward()
    opt.step()


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = mt.GPT(layers=4, d=1024, heads=16).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, 8192, (8, 512), device="cuda")
    step(model, opt, idx)  # warm-up: AdamW's state exists before the recording
    torch.cuda.synchronize()
    start = mt.named_tensors(model, opt, {"idx": idx})
    allocated_before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    step(model, opt, idx)
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(os.path.join(out, "accumulation_step.pickle"))
    torch.cuda.memory._record_memory_history(enabled=None)
    facts = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "memory_allocated_before": allocated_before,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "start": start,
        "end": mt.named_tensors(model, opt, {"idx": idx}),
    }
    with open(os.path.join(out, "accumulation_names.json"), "w") as f:
        json.dump(facts, f, indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "."))
