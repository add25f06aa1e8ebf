"""The program nsys profiles for the SQLite fixtures.

python3 nsys_workload.py matmul   # warm-up, then the matmul inside NVTX range "cell:matmul" (the
capture range) python3 nsys_workload.py block    # the block with an NVTX range per stage, warm-up
included, plus memcpy/memset python3 nsys_workload.py nocuda   # no CUDA work at all
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def main(which: str) -> None:
    if which == "nocuda":
        print(sum(range(1000)))
        return
    import torch
    import workloads

    torch.backends.cuda.matmul.allow_tf32 = False
    nvtx = torch.cuda.nvtx

    class mark:
        def __init__(self, name: str) -> None:
            self.name = name

        def __enter__(self):
            nvtx.range_push(self.name)

        def __exit__(self, *exc):
            nvtx.range_pop()

    ns = workloads.make_inputs()
    if which == "matmul":
        workloads.matmul(ns)  # warm-up, outside the capture range
        torch.cuda.synchronize()
        with mark("cell:matmul"):
            for _ in range(3):
                workloads.matmul(ns)
            torch.cuda.synchronize()
    elif which == "block":
        with mark("warmup"):
            workloads.block(ns, mark)
            torch.cuda.synchronize()
        with mark("cell:block"):
            host = torch.randn(1 << 20).pin_memory()
            dev = host.to("cuda", non_blocking=True)
            dev.zero_()
            for _ in range(2):
                workloads.block(ns, mark)
            dev.cpu()
            torch.cuda.synchronize()
    else:
        raise SystemExit(f"unknown workload {which}")


if __name__ == "__main__":
    main(sys.argv[1])
