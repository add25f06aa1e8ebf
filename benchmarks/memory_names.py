"""What naming the memory costs: ``%%gpuprofile --memory`` walks the namespace twice (at the
recording's start and end) and reads the module tree once; the analysis then reads which module's
forward made each allocation.

A GPT-shaped model of about 1.04 billion parameters (``--d`` 2048, ``--layers`` 18, vocabulary
32,000, untied head) is built on the meta device and moved to uninitialised memory (``to_empty``;
on the CPU, pages never touched, so no 16 GB is really used; ``--device cuda``: real GPU memory), with a gradient per parameter and
AdamW's state (``step``, ``exp_avg``, ``exp_avg_sq``) per parameter set by hand, as after a first
step. On a GPU the walk is the same Python over the same objects (``untyped_storage().data_ptr()``
costs the same): only the number of tensors matters, not their bytes.

Measured (median of ``--repeat``): ``names`` (:func:`gpumagic.capture.memory.names.name_storages`:
every parameter, gradient, buffer and optimizer state, with the precedence), ``tree``
(:func:`~gpumagic.capture.memory.names.module_tree`), ``naming`` = names twice + tree (what one
``--memory`` cell pays), and on the committed H100 recording (tests/data/memory/named_step.*) the
analysis with and without the names, and the stacks -> modules reading over that step's history
repeated ``--tile`` times (a long cell: many steps).

Target: ``naming`` <= 0.5 s for the 1B-parameter model on 2 cores.

    python benchmarks/memory_names.py [--d 2048] [--layers 18] [--repeat 5] [--device cuda]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import pathlib
import statistics
import time
from typing import Any

import numpy as np
import torch

from gpumagic.analysis.memory import analyze_memory
from gpumagic.analysis.memory_modules import allocation_modules
from gpumagic.capture.memory.names import MemoryNames, NameTable, module_tree, name_storages
from gpumagic.capture.memory.snapshot import read_snapshot

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def _module_traces() -> Any:
    spec = importlib.util.spec_from_file_location(
        "module_traces", DATA / "capture" / "module_traces.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(d: int, layers: int, vocab: int = 32000, device: str = "cpu") -> dict[str, Any]:
    """The namespace of a trained-once model: model, optimizer, a batch, some other values."""
    mt = _module_traces()
    with torch.device("meta"):
        model = mt.GPT(vocab=vocab, d=d, heads=16, layers=layers)
    model = model.to_empty(device=device)
    opt = torch.optim.AdamW(model.parameters())
    for p in model.parameters():
        p.grad = torch.empty_like(p)
        opt.state[p] = {
            "step": torch.tensor(1.0),
            "exp_avg": torch.empty_like(p),
            "exp_avg_sq": torch.empty_like(p),
        }
    idx = torch.zeros(8, 1024, dtype=torch.long, device=device)
    ns: dict[str, Any] = {"model": model, "opt": opt, "idx": idx, "batch": [idx, idx[:4]]}
    ns.update({f"value_{i}": i for i in range(200)})  # the rest of a notebook's namespace
    return ns


def _median(fn, repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--d", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=18)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tile", type=int, default=300, help="copies of the step's history")
    ap.add_argument("--device", default="cpu", help="where the model's tensors live (cuda: real)")
    ap.add_argument("--json", default=None, help="default: results/memory_names_<device>.json")
    args = ap.parse_args()

    ns = build(args.d, args.layers, device=args.device)
    params = sum(p.numel() for p in ns["model"].parameters())
    t_names, table = _median(lambda: name_storages(ns), args.repeat)
    t_tree, tree = _median(lambda: module_tree(ns), args.repeat)
    naming = 2 * t_names + t_tree

    facts = json.loads((DATA / "memory" / "named_step_names.json").read_text())
    snap = read_snapshot(DATA / "memory" / "named_step.pickle")
    with torch.device("meta"):
        small = _module_traces().GPT(layers=4, d=1024, heads=16)
    names = MemoryNames(
        NameTable.from_records(facts["start"]),
        NameTable.from_records(facts["end"]),
        module_tree({"model": small}),
    )
    t_plain, _ = _median(lambda: analyze_memory(snap), args.repeat)
    t_named, _ = _median(lambda: analyze_memory(snap, names=names), args.repeat)
    # the stacks -> modules reading over a long history: the step's history repeated
    long = dataclasses.replace(
        snap, stack=np.tile(snap.stack, args.tile), action=np.tile(snap.action, args.tile)
    )
    allocs = np.flatnonzero(long.action == 0)
    t_modules, _ = _median(lambda: allocation_modules(long, allocs, names.modules), args.repeat)

    rows = [
        ("parameters", f"{params / 1e9:.2f} B"),
        ("tensors named", f"{len(table):,}"),
        ("modules", f"{len(tree):,}"),
        ("names (one walk)", f"{t_names * 1e3:.1f} ms"),
        ("tree", f"{t_tree * 1e3:.1f} ms"),
        ("naming (2 walks + tree)", f"{naming * 1e3:.1f} ms  (target <= 500 ms)"),
        ("H100 step: analysis, no names", f"{t_plain * 1e3:.1f} ms"),
        ("H100 step: analysis, named", f"{t_named * 1e3:.1f} ms"),
        (
            f"stacks -> modules, {len(allocs):,} allocations",
            f"{t_modules * 1e3:.0f} ms ({t_modules / len(allocs) * 1e6:.2f} us each)",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    result = {
        "parameters": params,
        "tensors": len(table),
        "modules": len(tree),
        "names_s": t_names,
        "tree_s": t_tree,
        "naming_s": naming,
        "target_s": 0.5,
        "analysis_plain_s": t_plain,
        "analysis_named_s": t_named,
        "modules_allocations": len(allocs),
        "modules_s": t_modules,
        "repeat": args.repeat,
        "torch": torch.__version__,
        "device": args.device if args.device == "cpu" else torch.cuda.get_device_name(),
    }
    where = args.device.split(":")[0]
    if where == "cuda":
        where = torch.cuda.get_device_name().split()[1].lower()  # "NVIDIA H100 80GB HBM3": h100
    path = pathlib.Path(args.json or ROOT / "benchmarks" / "results" / f"memory_names_{where}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
