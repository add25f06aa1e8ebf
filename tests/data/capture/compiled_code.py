"""Compiled code as the GPU runs it: Inductor's output code and torch.profiler traces of compiled
cells and a CUDA graph replay, captured as %%gpuprofile captures a cell (warm-up outside; NVTX range
and record_function inside).

    python3 tests/data/capture/compiled_code.py OUTDIR
      -> OUTDIR/inductor_output_code.py.txt (every output-code module the compiled cells loaded,
      concatenated),
         OUTDIR/torch_compiled_block.json.gz (a compiled Linear-GELU-Linear bf16 block and a
         compiled elementwise chain), OUTDIR/torch_cuda_graph.json.gz (a CUDA graph replay and a
         reduce-overhead block)
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_traces


def capture(fn, label: str, path: str) -> None:
    """torch_traces.py's capture (warm-up outside; NVTX range and record_function inside) of a cell
    without inputs."""
    torch_traces.capture(lambda ns: fn(), {}, label, path)


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    block = (
        torch.nn.Sequential(
            torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)
        )
        .cuda()
        .bfloat16()
    )
    m = torch.compile(block)
    v = torch.randn(64, 1024, device="cuda", dtype=torch.bfloat16)
    f = torch.compile(lambda t: torch.nn.functional.gelu(t) * 2 + 1)
    t = torch.randn(16 * 1024 * 1024, device="cuda")
    m(v)
    f(t)
    capture(
        lambda: (m(v), f(t)), "cell:compiled", os.path.join(out, "torch_compiled_block.json.gz")
    )

    x = torch.randn(1024, 1024, device="cuda")
    w = torch.randn(1024, 1024, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.relu(x @ w) + 1
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        torch.relu(x @ w) + 1
    ro = torch.compile(
        torch.nn.Sequential(
            torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)
        ).cuda(),
        mode="reduce-overhead",
    )
    u = torch.randn(32, 512, device="cuda")
    for _ in range(3):
        ro(u)
    capture(
        lambda: (g.replay(), ro(u)), "cell:graphs", os.path.join(out, "torch_cuda_graph.json.gz")
    )

    from torch._inductor.codecache import PyCodeCache

    with open(os.path.join(out, "inductor_output_code.py.txt"), "w") as dst:
        for module in PyCodeCache.modules:
            with open(module.__file__) as src:
                dst.write(f"# ==== {os.path.basename(module.__file__)}\n{src.read()}\n")


if __name__ == "__main__":
    main(sys.argv[1])
