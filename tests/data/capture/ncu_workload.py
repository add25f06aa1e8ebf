"""The program Nsight Compute profiles for the ``tests/data/ncu`` fixtures: a small fp32 matmul and
an add, run once as warm-up, then once inside the NVTX range ``cell:ncu`` (the range ``ncu
--nvtx-include "cell:ncu/"`` keeps).

    python3 ncu_workload.py run     # the program ncu profiles python3 ncu_workload.py names   # the
    kernel names torch.profiler sees for the same cell, as JSON
"""

from __future__ import annotations

import json
import sys

import torch


def cell(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a @ b) + a


def main(which: str) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(1024, 1024, device="cuda", generator=g)
    b = torch.randn(1024, 1024, device="cuda", generator=g)
    cell(a, b)  # warm-up, outside the range
    torch.cuda.synchronize()
    if which == "names":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            cell(a, b)
            torch.cuda.synchronize()
        names = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
        print(json.dumps(names))
        return
    torch.cuda.nvtx.range_push("cell:ncu")
    cell(a, b)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    main(sys.argv[1])
