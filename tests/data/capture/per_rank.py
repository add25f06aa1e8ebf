"""Per-rank fixtures made the way a multi-node job makes them (``tests/data/per_rank/``): one nsys
export per rank and one torch.profiler trace per rank, of the same straggler step as ``ddp2.py
straggler`` (rank 1 runs 20 fp32 GEMMs on CUDA cores, then every rank all-reduces), so a report of
the files can be set beside the ``--nproc 2`` capture of the same work.

On a host with 2 GPUs, from the project root, after ``source .gpu/on-gpu.sh``:
    python3 tests/data/capture/per_rank.py OUTDIR
Writes OUTDIR/nsys/rank{0,1}.sqlite.gz (``torchrun --no-python nsys profile -o rank%q{RANK} ...``,
the step's NVTX range as the capture range), OUTDIR/nsys/rank{R}.stats_cuda_gpu_kern_sum.csv (``nsys
stats`` of each file), OUTDIR/torch/rank{0,1}.json.gz (``torch.profiler`` in each rank,
``export_chrome_trace``), and the commands' logs.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import tempfile

STEP = """
import os, torch, torch.distributed as dist
mode = os.environ["PER_RANK_MODE"]
dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
torch.backends.cuda.matmul.allow_tf32 = False
a = torch.randn(4096, 4096, device="cuda")
buf = torch.randn(1 << 20, device="cuda")

def step():
    if rank == 1:
        for _ in range(20):
            a @ a
    dist.all_reduce(buf)

for _ in range(2):
    step()
torch.cuda.synchronize()
dist.barrier()
if mode == "nsys":
    torch.cuda.nvtx.range_push("step")
    step()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
else:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        with torch.profiler.record_function("step"):
            step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(os.path.join(os.environ["PER_RANK_OUT"], f"rank{rank}.json"))
dist.barrier()
dist.destroy_process_group()
"""


def run(cmd: list[str], env: dict[str, str], log: str) -> None:
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        rc = subprocess.run(
            cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=300
        ).returncode
        f.write(f"(exit {rc})\n")
    with open(log) as f:
        print(f.read()[-1500:])


def main(out: str) -> None:
    work = tempfile.mkdtemp(prefix="per-rank-")
    script = os.path.join(work, "step.py")
    with open(script, "w") as f:
        f.write(STEP)
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
    ]
    for mode in ("nsys", "torch"):
        os.makedirs(os.path.join(out, mode), exist_ok=True)
    env = {**os.environ, "PER_RANK_MODE": "nsys", "NSYS_NVTX_PROFILER_REGISTER_ONLY": "0"}
    nsys = [
        "nsys",
        "profile",
        "-o",
        os.path.join(work, "rank%q{RANK}"),
        "-t",
        "cuda,nvtx",
        "--capture-range=nvtx",
    ]
    nsys += [
        "--nvtx-capture=step",
        "--capture-range-end=stop",
        "--force-overwrite=true",
        "--export=sqlite",
    ]
    run(
        [*torchrun, "--no-python", *nsys, sys.executable, script],
        env,
        os.path.join(out, "nsys", "profile.log"),
    )
    for rank in (0, 1):
        sqlite = os.path.join(work, f"rank{rank}.sqlite")
        with (
            open(sqlite, "rb") as src,
            gzip.open(os.path.join(out, "nsys", f"rank{rank}.sqlite.gz"), "wb", 9) as dst,
        ):
            shutil.copyfileobj(src, dst)
        base = os.path.join(out, "nsys", f"rank{rank}.stats")
        stats = [
            "nsys",
            "stats",
            "--report",
            "cuda_gpu_kern_sum",
            "--format",
            "csv",
            "--output",
            base,
            sqlite,
        ]
        subprocess.run(stats, check=False, capture_output=True)
    env = {**os.environ, "PER_RANK_MODE": "torch", "PER_RANK_OUT": work}
    run([*torchrun, script], env, os.path.join(out, "torch", "profile.log"))
    for rank in (0, 1):
        trace, packed = (
            os.path.join(work, f"rank{rank}.json"),
            os.path.join(out, "torch", f"rank{rank}.json.gz"),
        )
        with open(trace, "rb") as src, gzip.open(packed, "wb", 9) as dst:
            shutil.copyfileobj(src, dst)
    with open(os.path.join(out, "nsys", "nsys_version.txt"), "w") as f:
        subprocess.run(["nsys", "--version"], stdout=f, stderr=subprocess.STDOUT, check=False)
    for root, _, files in os.walk(out):
        for name in sorted(files):
            print(os.path.join(root, name), os.path.getsize(os.path.join(root, name)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "."))
