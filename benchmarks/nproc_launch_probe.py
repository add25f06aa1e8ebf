"""How nsys' options cost a ``--nproc 2`` run, outside gpumagic: one DDP step launched by
``torch.distributed.run`` alone and under ``nsys profile`` with and without a ``cudaProfilerApi``
capture range, with and without CPU sampling and context switches, with and without the SQLite
export; two rounds, each variant's wall time and rank 0's own marks (seconds from the launch: its
Python's start, torch import, CUDA, process group, warm-up, the capture's opening, the cell, its
close, the end). It measured what ``options.LEAN`` leaves out.

    python benchmarks/nproc_launch_probe.py      (2 GPUs, nsys on PATH; else it says so)

Writes ``$OUT/nproc_launch_probe.json`` (or ``./``).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SCRIPT = r"""
import os, time, json
T = {"py": time.time()}
import torch, torch.distributed as dist
T["torch"] = time.time()
r = int(os.environ["RANK"]); lr = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(lr); torch.empty(1, device="cuda")
T["cuda"] = time.time()
dist.init_process_group("nccl"); g = dist.new_group(backend="gloo")
T["pg"] = time.time()
from torch.nn.parallel import DistributedDataParallel as DDP
m = DDP(torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).cuda(), device_ids=[lr])
x = torch.randn(256, 1024, device="cuda")
def step(): m(x).sum().backward()
step(); torch.cuda.synchronize()
T["warm"] = time.time()
dist.barrier(group=g); torch.cuda.profiler.start(); dist.barrier(group=g)
T["start"] = time.time()
torch.cuda.nvtx.range_push("cell"); step(); torch.cuda.synchronize(); torch.cuda.nvtx.range_pop()
dist.barrier(group=g)
T["cell"] = time.time()
torch.cuda.profiler.stop()
T["stop"] = time.time()
dist.destroy_process_group()
T["end"] = time.time()
if r == 0:
    print("MARKS " + json.dumps(T), flush=True)
"""


def variants(nsys: str, script: str, tmp: str) -> dict[str, list[str]]:
    """Each variant's command line."""
    run = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    run.append(script)
    base = [nsys, "profile", "--force-overwrite=true", "-t", "cuda,nvtx"]
    rng = ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    lean = ["--sample=none", "--cpuctxsw=none"]
    sqlite = ["--export=sqlite"]
    return {
        "torchrun alone": run,
        "A range cuda,nvtx sqlite": [*base, *rng, *sqlite, "-o", f"{tmp}/a", *run],
        "B no range cuda,nvtx sqlite": [*base, *sqlite, "-o", f"{tmp}/b", *run],
        "C range, no export": [*base, *rng, "-o", f"{tmp}/c", *run],
        "D range, stop-shutdown": [
            *base,
            "--capture-range=cudaProfilerApi",
            "--capture-range-end=stop-shutdown",
            *sqlite,
            "-o",
            f"{tmp}/d",
            *run,
        ],
        "E no range, lean": [*base, *lean, *sqlite, "-o", f"{tmp}/e", *run],
    }


def main() -> None:
    nsys = shutil.which("nsys")
    try:
        import torch

        gpus = torch.cuda.device_count()
    except ImportError:
        gpus = 0
    if nsys is None or gpus < 2:
        print(f"needs nsys on PATH and 2 GPUs (nsys: {nsys}, GPUs: {gpus}); nothing measured")
        return
    tmp = tempfile.mkdtemp()
    script = os.path.join(tmp, "ddp.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(SCRIPT)
    out: dict[str, list[dict]] = {}
    for _ in range(2):
        for name, cmd in variants(nsys, script, tmp).items():
            t0 = time.time()
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            wall = time.time() - t0
            lines = [x for x in p.stdout.splitlines() if x.startswith("MARKS ")]
            marks = json.loads(lines[0][6:]) if lines else {}
            rel = {k: round(v - t0, 2) for k, v in marks.items()}
            marked = " ".join(f"{k}@{v}" for k, v in rel.items())
            print(f"{name:32} rc={p.returncode} wall={wall:6.2f}  {marked}", flush=True)
            if p.returncode:
                print(p.stdout[-800:], p.stderr[-800:])
            out.setdefault(name, []).append({"wall": wall, "marks": rel})
    path = os.path.join(os.environ.get("OUT", "."), "nproc_launch_probe.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
