"""The program Nsight Compute profiles for the ``tests/data/ncu/tensor.*`` fixtures: one 2048² GEMM
per math path, run once as warm-up, then once inside the NVTX range ``cell:tensor``:

- bf16 (cuBLAS on the tensor cores, bf16 in, fp32 accumulate),
- TF32 (fp32 tensors with ``torch.backends.cuda.matmul.allow_tf32 = True``: tensor cores, TF32 in),
- fp32 (``allow_tf32 = False``: the FFMA path, no tensor cores),
- fp64 (on an H100 the DMMA tensor path).

Each does 2·n³ FLOP, the figure the tests check ncu's counts against.

    python3 ncu_tensor_workload.py run     # the program ncu profiles
"""

from __future__ import annotations

import sys

import torch

N = 2048


def cell(x: dict[str, torch.Tensor]) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    x["bf16"] @ x["bf16"]
    torch.backends.cuda.matmul.allow_tf32 = True
    x["fp32"] @ x["fp32"]  # TF32 tensor cores
    torch.backends.cuda.matmul.allow_tf32 = False
    x["fp32"] @ x["fp32"]  # FFMA
    x["fp64"] @ x["fp64"]


def main(which: str) -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(N, N, device="cuda", generator=g)
    x = {"fp32": a, "bf16": a.to(torch.bfloat16), "fp64": a.to(torch.float64)}
    cell(x)  # warm-up, outside the range
    torch.cuda.synchronize()
    if which != "run":
        raise SystemExit(f"usage: {sys.argv[0]} run")
    torch.cuda.nvtx.range_push("cell:tensor")
    cell(x)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "run")
