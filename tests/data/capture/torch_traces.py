"""torch.profiler Chrome traces of the two workloads, captured as %%gpuprofile captures a cell:
warm-up outside, then the cell inside an NVTX range and a record_function of the same name, CPU +
CUDA activity, shapes recorded.

    python3 tests/data/capture/torch_traces.py OUTDIR   ->  OUTDIR/torch_matmul_4096.json.gz,
    torch_block.json.gz
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, os.path.dirname(__file__))
import workloads


def capture(fn, ns, label: str, path: str) -> None:
    fn(ns)  # warm-up
    torch.cuda.synchronize()
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True
    ) as prof:
        torch.cuda.nvtx.range_push(label)
        with record_function(label):
            fn(ns)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    raw = path[:-3]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    print("wrote", path, os.path.getsize(path))


def main(out: str) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    ns = workloads.make_inputs()
    capture(workloads.matmul, ns, "cell:matmul", os.path.join(out, "torch_matmul_4096.json.gz"))
    capture(workloads.block, ns, "cell:block", os.path.join(out, "torch_block.json.gz"))


if __name__ == "__main__":
    main(sys.argv[1])
