"""How long a sweep takes: a matmul over 8 sizes (256 … 8192), target <= 8 s on the GPU host.

Each sweep runs in a fresh Python process that has imported torch and used the GPU once (as a
notebook has by the time it sweeps), so the profiler's one-time start and every point's first call
are inside what is timed. The sweep is then run again in the same process (warm: the profiler
started, the cuBLAS heuristics cached), and the same sizes are timed one ``gputime`` at a time, side
by side. A second fresh process does the same with ``kernel_time=False``: the profiler's one-time
start (seconds, once per process, paid by whichever measurement first needs GPU kernel time) is then
not part of it. Prints a table per run and writes JSON.

    python benchmarks/sweep_budget.py [--json PATH] [--dtype float32|bfloat16] [--sizes 256,512,...]

Without CUDA it runs on the CPU with sizes up to 512 (a check that the script works, not the
target).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
GPU_SIZES = [256, 512, 768, 1024, 2048, 3072, 4096, 8192]
CPU_SIZES = [64, 96, 128, 192, 256, 320, 384, 512]
TARGET_S = 8.0

CHILD = r"""
import json, re, sys, time
sys.path.insert(0, {root!r})
import torch
import gpumagic
device = "cuda" if torch.cuda.is_available() else "cpu"
x = torch.randn(256, 256, device=device); (x @ x).sum().item()  # the GPU has been used once already
out = {{"device": torch.cuda.get_device_name() if device == "cuda" else "CPU", "runs": []}}
setup = "A = torch.randn(n, n, device=device, dtype=torch.{dtype})"
for run in ("cold (fresh process)", "warm (same process)"):
    t0 = time.perf_counter()
    s = gpumagic.sweep("A @ A", setup, params={{"n": {sizes!r}}}, globals={{"torch": torch, "device": device}},
                       kernel_time={kernel_time})
    wall = time.perf_counter() - t0
    df = s.to_dataframe()
    said = " ".join(n for p in s.points if p.result is not None for n in p.result.notes)
    start = re.search(r"first start in this process took ([\d.]+) s", said)
    out["runs"].append({{
        "run": run + ("" if {kernel_time} else ", kernel_time=False"), "wall_s": wall, "status": list(df["status"]),
        "profiler_start_s": float(start.group(1)) if start else None,
        "n": [int(v) for v in df["n"]], "median_s": [float(v) for v in df["median"]],
        "samples": [int(v) for v in df["samples"]], "flop_rate": [None if v != v or v is None else float(v)
                                                                   for v in df["flop_rate"]],
        "point_wall_s": [p.result.wall_time if p.result is not None else None for p in s.points],
    }})
t0 = time.perf_counter()
one = []
for n in {sizes!r}:
    A = torch.randn(n, n, device=device, dtype=getattr(torch, "{dtype}"))
    r = gpumagic.gputime("A @ A", globals={{"A": A}})
    one.append(r.median)
out["gputime_each"] = {{"wall_s": time.perf_counter() - t0, "median_s": one}}
print("RESULT " + json.dumps(out))
"""


def run_child(sizes: list[int], dtype: str, kernel_time: bool = True) -> dict:
    code = CHILD.format(root=str(ROOT), sizes=sizes, dtype=dtype, kernel_time=kernel_time)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(
            f"the child failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return json.loads(line[len("RESULT ") :])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "sweep_budget.json"))
    ap.add_argument("--dtype", default="float32")
    ap.add_argument(
        "--sizes", default=None, help="comma-separated sizes (default: 8 sizes 256 … 8192 on a GPU)"
    )
    args = ap.parse_args()
    import torch  # only to choose the sizes; the measuring happens in the child

    gpu = torch.cuda.is_available()
    sizes = (
        [int(v) for v in args.sizes.split(",")] if args.sizes else GPU_SIZES if gpu else CPU_SIZES
    )
    t0 = time.perf_counter()
    result = run_child(sizes, args.dtype)
    result["runs"] += run_child(sizes, args.dtype, kernel_time=False)["runs"]
    result.update(
        sizes=sizes, dtype=args.dtype, target_s=TARGET_S, children_wall_s=time.perf_counter() - t0
    )
    print(
        f"sweep of A @ A ({args.dtype}) over {len(sizes)} sizes on {result['device']}; target "
        f"<= {TARGET_S} s"
    )
    for run in result["runs"]:
        verdict = "meets" if run["wall_s"] <= TARGET_S else "MISSES"
        took = run["profiler_start_s"]
        start = f"; the profiler's one-time start {took:.2f} s of it" if took else ""
        print(f"\n{run['run']}: {run['wall_s']:.2f} s ({verdict} the target{start})")
        print(f"  {'n':>6} {'median':>12} {'samples':>8} {'TFLOP/s':>8} {'point s':>8}  status")
        for n, med, k, rate, pw, st in zip(
            run["n"],
            run["median_s"],
            run["samples"],
            run["flop_rate"],
            run["point_wall_s"],
            run["status"],
        ):
            tf = f"{rate / 1e12:.1f}" if rate else "-"
            pws = f"{pw:.2f}" if pw is not None else "-"
            print(f"  {n:>6} {med * 1e6:>10.1f}us {k:>8} {tf:>8} {pws:>8}  {st}")
    each = result["gputime_each"]
    print(f"\nthe same sizes one %gputime each (after both sweeps): {each['wall_s']:.2f} s")
    cold = result["runs"][0]
    ratios = [m / e for m, e in zip(cold["median_s"], each["median_s"]) if m and e]
    if ratios:
        print(f"sweep median / %gputime median per size: {min(ratios):.3f} … {max(ratios):.3f}")
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
