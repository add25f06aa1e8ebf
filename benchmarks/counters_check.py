"""What ``%%gpuprofile --nsys --counters`` says on a GPU host, against what the same work's counted
bytes say, and what the sampling costs. Run on the GPU host:

    python benchmarks/counters_check.py [--repeat 3] [--json PATH]

In one IPython shell with gpumagic loaded:
1. ``%gputime -o x + x`` (fp32, 256 MiB read twice, 256 MiB written): its counted GB/s; then
   ``%%gpuprofile --nsys --counters`` of a cell of those adds and 8192^3 bf16 GEMMs: the DRAM
   read + write share the counters give for the add, times the device's peak bandwidth, against
   the counted GB/s (target within 10%), and the GEMM's tensor-pipe share (target >= 50%).
2. The sampling's cost: the same cell under ``--nsys`` with and without ``--counters``, alternated
   ``--repeat`` times: the magic's wall time and each kernel's median duration, side by side.
3. A training step (a notebook-defined transformer block stack, AdamW) under ``--nsys --counters``:
   each module's forward and backward with its verdict.
Prints the tables and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

CELL = "for _ in range(20):\n    y = x + x\nfor _ in range(10):\n    c = a @ a"

MODEL = """
import torch, torch.nn as nn
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 16, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))
class Net(nn.Module):
    def __init__(self, d=1024, n=4):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(d) for _ in range(n)])
        self.head = nn.Linear(d, d)
    def forward(self, x):
        return self.head(self.blocks(x))
net = Net().cuda()
opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)
inp = torch.randn(16, 512, 1024, device="cuda")
"""
STEP = (
    "opt.zero_grad()\nwith torch.autocast('cuda', dtype=torch.bfloat16):\n"
    "    loss = net(inp).float().pow(2).mean()\nloss.backward()\nopt.step()"
)


def _kernel_medians(rep) -> dict[str, float]:
    k = rep.trace.kernels
    d = (k["end"] - k["start"]).groupby(k["name"].astype(str)).median()
    return {
        ("gemm" if "nvjet" in n or "gemm" in n.lower() else "add"): float(v) for n, v in d.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--json", default=os.path.join(os.environ.get("OUT", "."), "counters_check.json")
    )
    args = ap.parse_args()
    import torch
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from gpumagic.device_peaks.table import lookup

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpumagic")
    ip.run_line_magic("config", "GpuMagics.history = ''")
    ip.run_cell(
        "import torch\nx = torch.randn(1 << 26, device='cuda')\n"
        "a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)"
    )
    device = torch.cuda.get_device_name()
    peaks = lookup(device)
    out: dict = {"device": device, "peak_bandwidth": peaks.bandwidth if peaks else None}

    r = ip.run_line_magic("gputime", "-o -q x + x")
    counted = r.achieved.summary().get("byte_rate") if r.achieved is not None else None
    out["gputime_add"] = {"line": r.line(), "byte_rate": counted}
    print(r.line())

    runs = []
    for i in range(args.repeat):
        for counters in (False, True):
            flags = "--nsys --counters" if counters else "--nsys"
            t0 = time.perf_counter()
            with capture_output():
                ip.run_cell_magic("gpuprofile", f"{flags} -w 1 -o rep --no-timeline", CELL)
            wall = time.perf_counter() - t0
            rep = ip.user_ns["rep"]
            runs.append({"counters": counters, "wall_s": wall, "medians_ns": _kernel_medians(rep)})
            print(f"run {i} {flags:18}: {wall:6.2f} s  {runs[-1]['medians_ns']}")
            if counters:
                last = rep
    table = last.counters().set_index("Name")
    add = table.loc[next(n for n in table.index if "CUDAFunctor_add" in n)]
    gemm = table.loc[next(n for n in table.index if n.startswith("nvjet") or "gemm" in n.lower())]
    sampled = (
        (add["DRAM Read (%)"] + add["DRAM Write (%)"]) / 100 * (peaks.bandwidth if peaks else 0)
    )
    out["add"] = {
        "dram_read": add["DRAM Read (%)"],
        "dram_write": add["DRAM Write (%)"],
        "sampled_byte_rate": sampled,
        "counted_byte_rate": counted,
        "ratio": sampled / counted if counted else None,
        "verdict": add["Verdict"],
    }
    out["gemm"] = {"tensor_active": gemm["Tensor Active (%)"], "verdict": gemm["Verdict"]}
    out["counters_set"] = last.trace.meta.get("counters_set")
    print(f"\nmetric set: {out['counters_set']}")
    print(f"{'':24}{'sampled':>12}{'counted':>12}{'ratio':>8}")
    print(
        f"{'add DRAM GB/s':24}{sampled / 1e9:12.0f}{(counted or 0) / 1e9:12.0f}"
        f"{out['add']['ratio'] or 0:8.3f}   (target 0.90-1.10)"
    )
    print(
        f"{'GEMM tensor active %':24}{gemm['Tensor Active (%)']:12.1f}{'':12}{'':8}   (target >= 50)"
    )

    cost = {}
    for counters in (False, True):
        mine = [x for x in runs if x["counters"] == counters]
        cost[str(counters)] = {
            "wall_s": statistics.median(x["wall_s"] for x in mine),
            **{
                k: statistics.median(x["medians_ns"].get(k, float("nan")) for x in mine)
                for k in ("add", "gemm")
            },
        }
    off, on = cost["False"], cost["True"]
    print(f"\n{'sampling cost':24}{'without':>12}{'with':>12}{'ratio':>8}")
    print(
        f"{'wall (s)':24}{off['wall_s']:12.2f}{on['wall_s']:12.2f}{on['wall_s'] / off['wall_s']:8.3f}"
    )
    for k in ("add", "gemm"):
        print(
            f"{k + ' median (µs)':24}{off[k] / 1e3:12.1f}{on[k] / 1e3:12.1f}{on[k] / off[k]:8.3f}"
        )
    out["cost"] = cost

    ip.run_cell(MODEL)
    with capture_output():
        ip.run_cell_magic("gpuprofile", "--nsys --counters -w 2 -o step --no-timeline", STEP)
    step = ip.user_ns["step"]
    mods = step.counters("module")
    print("\ntraining step, by module:")
    for _, row in mods.head(16).iterrows():
        print(f"  {row['Time (%)']:5.1f}%  {row['Module']} {row['Pass']}: {row['Verdict']}")
    lines = step.counters("line")
    print("by line:")
    for _, row in lines.iterrows():
        print(f"  {row['Time (%)']:5.1f}%  {row['Line']} {row['Pass']}: {row['Verdict']}")
    top = mods[mods["Module"].str.count(r"\.") <= 2]
    out["step_modules"] = mods.to_dict("records")
    out["step_lines"] = lines.to_dict("records")
    out["step_modules_with_verdict"] = int(top["Verdict"].str.len().gt(0).sum())
    out["step_modules_shown"] = len(top)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, default=float)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
