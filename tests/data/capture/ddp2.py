"""The two-rank fixture (``tests/data/nsys/ddp2.*``): one DDP step plus explicit collectives, run as
two torchrun ranks inside one nsys through gpumagic's own ``--nproc`` path, then ``nsys stats`` of
the same export.

On a host with 2 GPUs, from the project root, after ``source .gpu/on-gpu.sh``:
    python3 tests/data/capture/ddp2.py OUTDIR [straggler]
Writes OUTDIR/ddp2.sqlite.gz, ddp2.stats_<report>.csv, ddp2.stats.txt, ddp2.profile.log (the nsys
command and its output), nsys_version.txt, and prints what the export holds per process. With
``straggler`` the files are ``straggler2.*`` and the cell is :data:`STRAGGLER_CELL`: rank 1 runs 20
fp32 GEMMs on CUDA cores before an all-reduce that rank 0 enters at once, so rank 0's all-reduce
kernel spends those GEMMs waiting for rank 1.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import torch

from gpumagic.capture.nsys import backend as nsys
from gpumagic.capture.options import NsysOptions

REPORTS = (
    "cuda_gpu_kern_sum,cuda_api_sum,nvtx_sum,osrt_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum"
)
LABEL = "cell:ddp"

# Runs on every rank after the process group is up, before the warm-up: the model, its optimizer and
# the buffers of the explicit collectives (4 MB of fp32 each).
SETUP = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
torch.manual_seed(0)
layers = [torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048), torch.nn.ReLU()]
model = DDP(torch.nn.Sequential(*layers, torch.nn.Linear(2048, 1024)).to(device), device_ids=[local_rank])
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(512, 2048, device=device)
buf = torch.randn(1 << 20, device=device)
gathered = torch.empty(world_size << 20, device=device)
shard = torch.empty((1 << 20) // world_size, device=device)
"""

CELL = """
assert W.device == device, (W.device, device)  # shipped from cuda:0, restored on the rank's own GPU
loss = model(x).square().mean()
opt.zero_grad(set_to_none=True)
loss.backward()
opt.step()
buf.mul_(0.5)
dist.all_reduce(buf)
dist.all_gather_into_tensor(gathered, buf)
dist.reduce_scatter_tensor(shard, buf)
dist.broadcast(buf, src=0)
(rank, world_size, round(float(loss), 4))
"""

STRAGGLER_SETUP = """
import torch
torch.backends.cuda.matmul.allow_tf32 = False
a = torch.randn(4096, 4096, device=device)
buf = torch.randn(1 << 20, device=device)
"""

STRAGGLER_CELL = """
assert W.device == device, (W.device, device)
if rank == 1:
    for _ in range(20):
        a @ a
dist.all_reduce(buf)
(rank, world_size)
"""


def main(out: str, name: str = "ddp2", setup: str = SETUP, cell: str = CELL) -> None:
    os.makedirs(out, exist_ok=True)
    assert torch.cuda.device_count() >= 2, "needs 2 GPUs"
    runs: list[tuple[list[str], str, int]] = []
    real_run = nsys._run

    def recorded(cmd, *args, **kwargs):  # keep nsys' own output for the fixture's profile log
        output, rc = real_run(cmd, *args, **kwargs)
        runs.append((cmd, output, rc))
        return output, rc

    nsys._run = recorded
    namespace = {"W": torch.randn(4, device="cuda:0")}
    opts = NsysOptions(
        nproc=2, setup=setup, profile_dir=tempfile.mkdtemp(prefix=f"{name}-"), timeout=300
    )
    cap = nsys.capture(cell, LABEL, namespace=namespace, warmup=2, iters=1, options=opts)
    print("value:", cap.value, "| notes:", cap.notes)
    cmd, output, rc = runs[-1]
    with open(os.path.join(out, f"{name}.profile.log"), "w") as f:
        f.write("$ " + " ".join(cmd) + f"\n(exit {rc})\n" + output)
    sqlite = cap.files["sqlite"]
    with (
        open(sqlite, "rb") as src,
        gzip.open(os.path.join(out, f"{name}.sqlite.gz"), "wb", compresslevel=9) as dst,
    ):
        shutil.copyfileobj(src, dst)
    stats = ["nsys", "stats", "--report", REPORTS, sqlite]
    subprocess.run(
        [*stats[:-1], "--format", "csv", "--output", os.path.join(out, f"{name}.stats"), sqlite],
        check=False,
    )
    with open(os.path.join(out, f"{name}.stats.txt"), "w") as f:
        subprocess.run(stats, stdout=f, stderr=subprocess.STDOUT, check=False)
    with open(os.path.join(out, "nsys_version.txt"), "w") as f:
        subprocess.run(["nsys", "--version"], stdout=f, stderr=subprocess.STDOUT, check=False)
    describe(sqlite)
    try:  # gpumagic's own summaries of the same export, beside nsys stats'
        from gpumagic import load_nsys

        trace = load_nsys(sqlite)
        k = trace.kernel_summary()
        print(f"gpumagic kernel_summary: {len(k)} rows, {int(k['Instances'].sum())} kernels")
    except Exception as exc:  # noqa: BLE001 - a report of what happened, not a check
        print("load_nsys:", type(exc).__name__, exc)


def describe(path: str) -> None:
    """Per process: kernels (NCCL among them), devices, the cell's ranges (closed ones), the rank
    marks, and kernels that started outside that process's cell range."""
    con = sqlite3.connect(path)
    q = con.execute
    ranges = q(
        "SELECT globalTid >> 24 & 16777215, start, end, text FROM NVTX_EVENTS WHERE "
        "eventType IN (59, 60) "
        "AND COALESCE(text, (SELECT value FROM StringIds WHERE id = textId)) = ?",
        (LABEL,),
    ).fetchall()
    marks = q(
        "SELECT globalTid >> 24 & 16777215, text, start FROM NVTX_EVENTS WHERE eventType = 34"
    ).fetchall()
    print("cell ranges (pid, start, end):", [(p, s, e) for p, s, e, _ in ranges])
    print("marks:", marks)
    kernels = q(
        "SELECT globalPid >> 24 & 16777215, deviceId, s.value, k.start, k.end FROM "
        "CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = k.shortName"
    ).fetchall()
    for pid in sorted({k[0] for k in kernels}):
        mine = [k for k in kernels if k[0] == pid]
        window = [(s, e) for p, s, e, _ in ranges if p == pid]
        outside = [k for k in mine if not any(s <= k[3] and k[4] <= (e or k[4]) for s, e in window)]
        nccl = [k for k in mine if "nccl" in k[2].lower()]
        print(
            f"pid {pid}: {len(mine)} kernels on devices {sorted({k[1] for k in mine})}, "
            f"{len(nccl)} NCCL "
            f"({sorted({k[2] for k in nccl})}), {len(outside)} outside the cell range "
            f"{[k[2] for k in outside][:5]}"
        )
    print("tables:", len(q("SELECT name FROM sqlite_master WHERE type='table'").fetchall()))


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", ".")
    if sys.argv[2:] == ["straggler"]:
        main(target, "straggler2", STRAGGLER_SETUP, STRAGGLER_CELL)
    else:
        main(target)
