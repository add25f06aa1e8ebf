"""A synthetic 200,000-kernel Trace -> summaries, findings and the full report (HTML with timeline):
time and size.

Target: under 5 s on a 2-core machine, HTML under 5 MB. Prints a table and writes JSON.

    python benchmarks/report_scale.py [--kernels N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

import numpy as np
import pandas as pd

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from gpumagic.analysis import findings
from gpumagic.render.report import ProfileReport
from gpumagic.trace import Trace, frame

NAMES = [
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel_"
    "_5x_cublas",
    "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "std::array<char*, 3ul> "
    ">(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, "
    "false>(int, float, float "
    "const*, float const*, float const*, float*, float*, float*)",
    "triton_poi_fused_add_gelu_mul_0",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, "
    "false, cutlass::half_t, "
    "Flash_kernel_traits<64, 128, 128, 4, cutlass::half_t> >, false, true, false, false, "
    "true, true, false, "
    "false>(pytorch_flash::Flash_fwd_params)",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
] + [f"triton_red_fused_sum_{i}" for i in range(200)]


def synthetic(n: int, seed: int = 0) -> Trace:
    rng = np.random.default_rng(seed)
    names = rng.choice(len(NAMES), size=n, p=None)
    dur = rng.integers(2_000, 200_000, size=n)
    gap = rng.integers(500, 5_000, size=n)
    start = np.cumsum(dur + gap)
    streams = rng.choice([7, 13], size=n, p=[0.9, 0.1])
    kernels = pd.DataFrame(
        {
            "name": np.array(NAMES, dtype=object)[names],
            "start": start,
            "end": start + dur,
            "device": 0,
            "stream": streams,
            "correlation": np.arange(n),
            "grid": "128x1x1",
            "block": "256x1x1",
            "registers": 128,
            "shared_memory": 0,
        }
    )
    api = pd.DataFrame(
        {
            "name": "cudaLaunchKernel",
            "start": start - 4_000,
            "end": start - 1_000,
            "thread": 1,
            "correlation": np.arange(n),
        }
    )
    ops = pd.DataFrame(
        {
            "name": "aten::add",
            "start": start - 6_000,
            "end": start - 500,
            "thread": 1,
            "depth": 0,
            "shapes": "[1024, 1024]",
        }
    )
    nvtx = pd.DataFrame(
        {
            "text": ["cell"],
            "start": [int(start[0] - 10_000)],
            "end": [int(start[-1] + dur[-1])],
            "thread": [1],
            "depth": [0],
            "domain": ["gpumagic"],
            "style": ["PushPop"],
        }
    )
    return Trace(
        kernels=frame("kernels", kernels),
        api=frame("api", api),
        ops=frame("ops", ops),
        nvtx=frame("nvtx", nvtx),
        meta={"device": "synthetic", "label": "cell", "backend": "synthetic"},
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=200_000)
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "report_scale.json"))
    args = ap.parse_args()
    rows = []
    t0 = time.perf_counter()
    trace = synthetic(args.kernels)
    rows.append(("build synthetic trace", time.perf_counter() - t0, None))
    t_start = time.perf_counter()
    t0 = time.perf_counter()
    trace.kernel_summary(), trace.api_summary(), trace.nvtx_summary()
    rows.append(("summaries", time.perf_counter() - t0, None))
    t0 = time.perf_counter()
    f = findings(trace)
    rows.append((f"findings ({len(f)})", time.perf_counter() - t0, None))
    t0 = time.perf_counter()
    report = ProfileReport(trace, label="cell", findings=f)
    html = report._repr_html_()
    rows.append(("report HTML with timeline", time.perf_counter() - t0, len(html)))
    total = time.perf_counter() - t_start
    size = len(html.encode())
    print(f"{'step':<32} {'seconds':>8} {'bytes':>12}")
    for step, secs, b in rows:
        print(f"{step:<32} {secs:>8.3f} {'' if b is None else f'{b:,}':>12}")
    ok = total < 5.0 and size < 5_000_000
    print(
        f"{args.kernels:,} kernels: summaries + findings + report in {total:.2f} s (target < 5 s), "
        f"output {size / 1e6:.2f} MB (target < 5 MB) -> {'PASS' if ok else 'FAIL'}"
    )
    with open(args.json, "w") as fh:
        json.dump(
            {
                "kernels": args.kernels,
                "steps": [dict(step=s, seconds=t, bytes=b) for s, t, b in rows],
                "total_s": total,
                "html_bytes": size,
                "pass": ok,
            },
            fh,
            indent=2,
        )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
