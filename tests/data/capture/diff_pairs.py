"""Pairs of runs for the diff's tests, captured on the GPU host (torch 2.11, nsys on PATH): the same
training step in fp32, with TF32 allowed, in bf16 autocast, and compiled, each as a torch.profiler
trace (shapes recorded, cell inside an NVTX range and record_function "cell:step", warm-up outside)
and, with ``--nsys``, as an nsys export of the same step (``-t cuda,nvtx --capture-range=nvtx
--nvtx-capture=cell:step``).

    python3 tests/data/capture/diff_pairs.py OUTDIR            # torch.profiler traces python3
    tests/data/capture/diff_pairs.py OUTDIR --nsys     # also OUTDIR/step_{mode}.sqlite (+
    .nsys-rep)

Writes OUTDIR/step_fp32.json.gz, step_tf32.json.gz, step_bf16.json.gz, step_compiled.json.gz: fp32
vs tf32 is the "another cuBLAS kernel for the same GEMM" pair, eager vs compiled the "Triton kernels
replace ATen ones" pair. Each mode runs in a fresh process (``--mode``), so TF32 and compile state
never leak from one into the next.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys

MODES = ("fp32", "tf32", "bf16", "compiled")
LABEL = "cell:step"


def model_and_step(mode: str):
    import torch

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    torch.backends.cudnn.allow_tf32 = mode == "tf32"
    model = torch.nn.Sequential(
        torch.nn.Linear(2048, 8192),
        torch.nn.GELU(),
        torch.nn.Linear(8192, 2048),
        torch.nn.LayerNorm(2048),
    ).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(4096, 2048, device="cuda")
    forward = torch.compile(model) if mode == "compiled" else model

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "bf16"):
            loss = forward(x).float().pow(2).mean()
        loss.backward()
        opt.step()

    return step


def run_mode(mode: str, out: str) -> None:
    """One mode in this process: warm-up (compile included), then the step under torch.profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    step = model_and_step(mode)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    if os.environ.get("GPUMAGIC_NSYS_CHILD"):  # under nsys: the NVTX range is the capture range
        torch.cuda.nvtx.range_push(LABEL)
        step()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        return
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True
    ) as prof:
        torch.cuda.nvtx.range_push(LABEL)
        with record_function(LABEL):
            step()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    raw = os.path.join(out, f"step_{mode}.json")
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(raw + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    print("wrote", raw + ".gz", os.path.getsize(raw + ".gz"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument(
        "--mode",
        choices=MODES,
        help="run one mode in this process (the driver runs each in its own)",
    )
    ap.add_argument("--nsys", action="store_true", help="also capture each mode with nsys")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.mode:
        run_mode(args.mode, args.out)
        return
    for mode in MODES:
        subprocess.run([sys.executable, __file__, args.out, "--mode", mode], check=True)
        if args.nsys:
            nsys = shutil.which("nsys")
            if not nsys:
                raise SystemExit("--nsys: nsys is not on PATH")
            rep = os.path.join(args.out, f"step_{mode}")
            env = {
                **os.environ,
                "GPUMAGIC_NSYS_CHILD": "1",
                "NSYS_NVTX_PROFILER_REGISTER_ONLY": "0",
            }
            cmd = [
                nsys,
                "profile",
                "-o",
                rep,
                "-t",
                "cuda,nvtx",
                "--capture-range=nvtx",
                f"--nvtx-capture={LABEL}",
            ]
            cmd += ["--capture-range-end=stop", "--force-overwrite=true", "--export=sqlite"]
            subprocess.run(
                [*cmd, sys.executable, __file__, args.out, "--mode", mode], check=True, env=env
            )


if __name__ == "__main__":
    main()
