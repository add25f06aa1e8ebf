"""The first ``%%gpuprofile`` in a fresh process: how long beyond the cell's own first run, and
whether its kernel table equals a plain torch.profiler capture of the same cell. Run on a GPU host;
each row is a fresh process.

    python benchmarks/first_gpuprofile.py [--baseline PATH_TO_OLD_CHECKOUT] [--json PATH]

Per cell (held out: none is the conv + GEMM cell the 6.6 s figure was taken on): the cell's own
first run (lazy init, cuDNN/cuBLAS heuristics, Triton compile), then the first ``%%gpuprofile -w 1
-n 5`` of it in a real IPython shell (wall beyond the cell's first run: less six warm runs of the
cell, its warm-up and the captured runs), then a second one, then a plain ``torch.profiler`` capture
of five runs (after the first two, so its start is already paid) whose kernels (names, counts,
median duration per name) are set against the first capture's. With ``--baseline`` each cell also
runs against another checkout of gpumagic (its package directory first on ``PYTHONPATH``), side by
side in the same run. Targets: first <= 1.5 s, second no slower than the baseline's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

CELLS = {
    "conv net step with backward": (
        "net = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), "
        "torch.nn.Conv2d(32, 64, 3),"
        " torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), "
        "torch.nn.Linear(64, 10)).cuda()\n"
        "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "x = torch.randn(64, 3, 64, 64, device='cuda'); y = torch.randint(0, 10, (64,), "
        "device='cuda')",
        "opt.zero_grad()\nloss = torch.nn.functional.cross_entropy(net(x), "
        "y)\nloss.backward()\nopt.step()",
    ),
    "transformer block": (
        "blk = torch.nn.TransformerEncoderLayer(1024, 16, 4096, "
        "batch_first=True).cuda().bfloat16()\n"
        "h = torch.randn(8, 512, 1024, device='cuda', dtype=torch.bfloat16)",
        "out = blk(h)",
    ),
    "elementwise chain": (
        "t = torch.randn(1 << 24, device='cuda')",
        "u = ((t * 2 + 1).sin() * t.cos()).relu_()",
    ),
    "compiled function": (
        "f = torch.compile(lambda t: torch.nn.functional.gelu(t) * 2 + 1)\nt = torch.randn(1 "
        "<< 24, device='cuda')",
        "u = f(t)",
    ),
    "cell with host syncs": (
        "a = torch.randn(2048, 2048, device='cuda')",
        "s = 0.0\nfor _ in range(5):\n    s += float((a @ a).sum().item())",
    ),
}

#: runs of the cell inside each capture: per-kernel medians over this many, so that one noisy
#: instance of a microsecond kernel does not read as a difference between the captures
RUNS = 5

CHILD = r"""
import json, statistics, sys, time
t0 = time.perf_counter()
import torch
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "gpumagic")
import gpumagic
setup, cell = json.loads(sys.argv[1])
RUNS = int(sys.argv[2])
ip.run_cell("import torch").raise_error()
ip.run_cell(setup).raise_error()
t = time.perf_counter(); ip.run_cell(cell).raise_error(); torch.cuda.synchronize(); first_run = time.perf_counter() - t
t = time.perf_counter(); ip.run_cell(cell).raise_error(); torch.cuda.synchronize(); second_run = time.perf_counter() - t
t = time.perf_counter()
ip.run_cell_magic("gpuprofile", f"-w 1 -n {RUNS} --no-timeline -o rep1", cell)
first = time.perf_counter() - t
t = time.perf_counter()
ip.run_cell_magic("gpuprofile", f"-w 1 -n {RUNS} --no-timeline -o rep2", cell)
second = time.perf_counter() - t
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    for _ in range(RUNS):
        ip.run_cell(cell)
    torch.cuda.synchronize()
plain = {}
for e in p.events():
    gpu_range = getattr(e, "is_user_annotation", False)  # Optimizer.step#...: a range on the GPU, not a kernel
    memop = e.name.startswith(("Memcpy", "Memset"))
    if e.device_type == torch.autograd.DeviceType.CUDA and not gpu_range and not memop:
        plain.setdefault(e.name, []).append(e.time_range.elapsed_us() * 1000)
k = ip.user_ns["rep1"].trace.kernels
ours = {n: list(g["end"] - g["start"]) for n, g in k.groupby("name")}
same_counts = {n: len(v) for n, v in ours.items()} == {n: len(v) for n, v in plain.items()}
off = [abs(statistics.median(ours[n]) / statistics.median(plain[n]) - 1) for n in ours if n in plain]
worst = max(off, default=None)
counts = {n: (len(ours.get(n, [])), len(plain.get(n, []))) for n in set(ours) | set(plain)}
differ = {n[:90]: c for n, c in counts.items() if c[0] != c[1]}
print("RESULT " + json.dumps(dict(counts_differ=differ,
    gpumagic=gpumagic.__file__, first_run_s=first_run, second_run_s=second_run, first_s=first, second_s=second,
    kernels=int(len(k)), names_and_counts_equal=same_counts, worst_median_ratio_off=worst)))
"""


def run_cell(name: str, pythonpath: str, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    env = {**os.environ, **(extra_env or {})}
    env["PYTHONPATH"] = pythonpath + os.pathsep + os.environ.get("PYTHONPATH", "")
    # run from the checkout: ``-c`` puts the working directory first on sys.path
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(CELLS[name]), str(RUNS)],
        env=env,
        cwd=pythonpath,
        capture_output=True,
        text=True,
        timeout=300,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": proc.stderr[-2000:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=None, help="another checkout's root, run side by side")
    ap.add_argument(
        "--history-off", action="store_true", help="also run this build with the history turned off"
    )
    ap.add_argument("--cells", default=None, help="comma-separated cell names (default: all)")
    ap.add_argument(
        "--json", default=os.path.join(ROOT, "benchmarks", "results", "first_gpuprofile.json")
    )
    args = ap.parse_args()
    builds: list[tuple[str, str, dict[str, str]]] = [("this", os.path.abspath(ROOT), {})]
    if args.history_off:
        builds.append(("no history", os.path.abspath(ROOT), {"GPUMAGIC_HISTORY": "off"}))
    if args.baseline:
        builds.append(("baseline", os.path.abspath(args.baseline), {}))
    rows = []
    head = ("cell 1st", "1st prof", "beyond", "2nd prof")
    print(
        f"{'cell':30} {'build':10} "
        + " ".join(f"{h:>9}" for h in head)
        + f" {'equal':>6} {'off':>7}"
    )
    for name in args.cells.split(",") if args.cells else CELLS:
        for build, path, env in builds:
            r = run_cell(name, path, env)
            rows.append({"cell": name, "build": build, **r})
            if "error" in r:
                print(f"{name:30} {build:10} ERROR {r['error'][-300:]}")
                continue
            beyond = (
                r["first_s"] - (1 + RUNS) * r["second_run_s"]
            )  # its warm-up and captured runs: warm runs
            off = r["worst_median_ratio_off"]
            print(
                f"{name:30} {build:10} {r['first_run_s']:9.3f} {r['first_s']:9.3f} {beyond:9.3f} "
                f"{r['second_s']:9.3f} {r['names_and_counts_equal']!s:>6} {(off or 0) * 100:6.2f}%",
                flush=True,
            )
            if r.get("counts_differ"):
                print(f"{'':41} counts (first capture, plain): {r['counts_differ']}")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"rows": rows}, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
