"""What recording the user's code costs a training step under torch.profiler: the step's time with
the profiler as ``%%gpuprofile`` ran it before (shapes only), and with each addition the by-code
view can use: ``with_stack`` (every Python call, and with it each ``nn.Module``'s forward:
``with_modules`` alone records nothing of an eager model), the module ranges ``%%gpuprofile``
opens itself (``capture/marks/module_ranges.py``), and the per-line ranges ``%%gpuprofile`` pushes around a cell's statements (``capture/marks/cell_lines.py``).
Also the export + load of each trace (the magic's work after the cell) and the trace's size.

Target: the default's additions cost a training step at most 10%. The variants run interleaved,
one profiler session of two steps each (the first untimed: the profiler's start), the order
rotated each round (a shared machine drifts: compare within a run). The step is a small transformer's (embedding, blocks of
attention + MLP, AdamW): small on purpose, so that the host work per op, which is what recording
adds to, is a large part of the step.

    python benchmarks/by_code_cost.py [--device cpu|cuda] [--rounds 30] [--step-in-function]
        [--json PATH]

``--step-in-function``: the step is a function defined in an earlier cell and the cell calls it
(``train_step()``), so the line ranges are the function's own (``capture/marks/function_ranges.py``:
its code swapped for one with ranges) besides the cell's one line.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import time
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpumagic import load_trace  # noqa: E402
from gpumagic.capture.marks.cell_lines import mark_lines  # noqa: E402
from gpumagic.capture.marks.function_ranges import function_ranges, function_table  # noqa: E402
from gpumagic.capture.marks.module_ranges import module_ranges  # noqa: E402

TARGET = 0.10

STEP = """\
opt.zero_grad(set_to_none=True)
logits = model(idx)
loss = F.cross_entropy(logits.flatten(0, 1), idx.flatten())
loss.backward()
opt.step()
"""


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


#: ``with_modules`` alone records nothing of an eager model (torch.profiler's own doc: TorchScript
#: only); the ``nn.Module: Name_k`` frames come from the Python tracer that ``with_stack`` starts.
#: ``%%gpuprofile``'s default marks the modules with ranges of its own instead
#: (``capture/marks/module_ranges.py``) and each line of the cell (``capture/marks/cell_lines.py``).
DEFAULT = "+ module ranges + line ranges"
VARIANTS = {
    "shapes (before)": dict(record_shapes=True),
    "+ line ranges": dict(record_shapes=True, lines=True),
    "+ module ranges": dict(record_shapes=True, modules=True),
    DEFAULT: dict(record_shapes=True, lines=True, modules=True),
    "+ stack": dict(record_shapes=True, with_stack=True),
    "+ stack + modules + line ranges": dict(
        record_shapes=True, with_modules=True, with_stack=True, lines=True
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--step-in-function", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.device == "cpu":
        torch.set_num_threads(1)  # a shared 2-core machine: one thread is steadier
    dev = torch.device(args.device)
    model = GPT(1024, args.d, 4, args.layers).to(dev)
    ns = {
        "model": model,
        "opt": torch.optim.AdamW(model.parameters(), lr=1e-4),
        "idx": torch.randint(0, 1024, (8, 64), device=dev),
        "F": F,
    }
    cell = STEP
    functions: list = []
    if args.step_in_function:  # an earlier cell defines it; its source where inspect finds it
        import linecache

        source = "def train_step():\n" + "".join(f"    {ln}\n" for ln in STEP.splitlines())
        name = "<ipython-input-1-by-code-cost>"
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
        exec(compile(source, name, "exec"), ns)  # noqa: S102 - the benchmark's own step
        cell = "train_step()\n"
        functions = function_table(ns, cell)
        assert [f["name"] for f in functions] == ["train_step"], functions
    plain = compile(cell, "<cell>", "exec")
    marked = compile(mark_lines(ast.parse(cell)), "<cell>", "exec")
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])

    # on the CPU, the step's CPU time on this thread (torch runs it on this one thread): other
    # people's processes on a shared machine stretch the wall clock, not this; on a GPU, the wall
    # clock of a synchronized step
    clock = time.thread_time if dev.type == "cpu" else time.perf_counter

    def step(code) -> float:
        sync()
        t = clock()
        exec(code, ns)  # noqa: S102 - the benchmark's own step
        sync()
        return clock() - t

    for _ in range(5):
        step(plain)
    times: dict[str, list[float]] = {"no profiler": [], **{v: [] for v in VARIANTS}}
    traces: dict[str, dict[str, float]] = {}
    for r in range(args.rounds):
        times["no profiler"].append(step(plain))
        order = list(VARIANTS.items())
        order = order[r % len(order) :] + order[: r % len(order)]  # each variant first in turn
        for name, opts in order:
            opts = dict(opts)
            lines, modules = opts.pop("lines", False), opts.pop("modules", False)
            ranges = module_ranges(ns) if modules else nullcontext()
            marks = function_ranges(ns, functions) if lines else nullcontext()
            with profile(activities=activities, **opts) as prof, ranges, marks:
                step(marked if lines else plain)  # the profiler's own start, not timed
                times[name].append(step(marked if lines else plain))
            if r == 0:
                traces[name] = export_and_load(prof)
    base = statistics.median(times["shapes (before)"])
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append(
            {
                "variant": name,
                "median_ms": round(med * 1e3, 3),
                "vs_before": round(med / base - 1, 4),
                **traces.get(name, {}),
            }
        )
    where = " in a function of an earlier cell" if args.step_in_function else ""
    print(
        f"Training step{where} ({args.layers}-block transformer, d {args.d}, batch 8x64, AdamW) on "
        f"{args.device}, {args.rounds} rounds, median step time "
        f"({'CPU time of the thread' if dev.type == 'cpu' else 'wall clock, synchronized'}):"
    )
    print(f"  {'Variant':<32} {'Step':>9} {'vs before':>10} {'Export+load':>12} {'Trace':>9}")
    for r in rows:
        extra = (
            f"{r['export_load_s'] * 1e3:10.1f}ms {r['trace_kb']:7.0f}kB" if "trace_kb" in r else ""
        )
        print(f"  {r['variant']:<32} {r['median_ms']:7.2f}ms {r['vs_before']:+9.1%} {extra}")
    default = next(r for r in rows if r["variant"] == DEFAULT)
    ok = default["vs_before"] <= TARGET
    print(f"  default ({DEFAULT!r}): {default['vs_before']:+.1%} (target <= 10%)")
    if args.json:
        out = {
            "device": torch.cuda.get_device_name()
            if dev.type == "cuda"
            else platform.processor() or "cpu",
            "torch": torch.__version__,
            "rounds": args.rounds,
            "clock": "thread CPU time" if dev.type == "cpu" else "wall clock, synchronized",
            "d": args.d,
            "layers": args.layers,
            "step_in_function": args.step_in_function,
            "rows": rows,
            "target": TARGET,
            "default_within_target": ok,
        }
        pathlib.Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


def export_and_load(prof) -> dict[str, float]:
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        t = time.perf_counter()
        prof.export_chrome_trace(path)
        trace = load_trace(path)
        trace.by_module(), trace.by_line()
        took = time.perf_counter() - t
        return {"export_load_s": round(took, 4), "trace_kb": round(os.path.getsize(path) / 1e3, 1)}
    finally:
        os.remove(path)


if __name__ == "__main__":
    main()
