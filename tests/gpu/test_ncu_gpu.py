"""--ncu on the GPU host with its real Nsight Compute: the reader equals ncu's own CSV, the default
run counts a bf16 GEMM's tensor-core FLOPs (2·n³ over ncu's duration), and the transformer block's
top kernels and roofline come back (its wall time printed, run with -s to see it, and written to
$OUT; 25-32 s on an H100 with the tensor counters)."""

from __future__ import annotations

import csv
import io
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
    pytest.mark.skipif(shutil.which("ncu") is None, reason="needs ncu on PATH"),
]
CAPTURE = pathlib.Path(__file__).parents[1] / "data" / "capture"


METRICS = {
    "Duration (ns)": "gpu__time_duration.sum",
    "SM %": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "Memory %": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "DRAM bytes/s": "dram__bytes.sum.per_second",
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A fresh report of the fixture workload (a matmul and an add), and ncu's raw page of it, read
    with csv."""
    stem = tmp_path_factory.mktemp("ncu") / "tiny"
    run = ["ncu", "--nvtx", "--nvtx-include", "cell:ncu/", "--section", "SpeedOfLight", "--section"]
    run += [
        "SpeedOfLight_RooflineChart",
        "-f",
        "-o",
        str(stem),
        sys.executable,
        str(CAPTURE / "ncu_workload.py"),
    ]
    run.append("run")
    subprocess.run(run, check=True, capture_output=True, timeout=300)
    report = str(stem) + ".ncu-rep"
    page = ["ncu", "--import", report, "--csv", "--page", "raw", "--print-units", "base"]
    text = subprocess.run(page, check=True, capture_output=True, text=True, timeout=120).stdout
    rows = [r for r in csv.reader(io.StringIO(text[text.index('"ID"') :])) if r]
    header, body = rows[0], [r for r in rows[1:] if r[0]]
    return report, {h: i for i, h in enumerate(header)}, body


def test_load_ncu_equals_ncu_import_csv(tiny):
    from gpumagic import load_ncu

    report, col, body = tiny
    k = load_ncu(report).data.kernels()
    assert len(k) == len(body) >= 2  # the matmul and the add
    for (_, got), row in zip(k.iterrows(), body, strict=True):
        assert got["Name"] == row[col["Kernel Name"]]
        for ours, theirs in METRICS.items():
            assert got[ours] == float(row[col[theirs]].replace(",", "")), (
                ours,
                row[col["Kernel Name"]],
            )


def test_gpuprofile_ncu_on_the_transformer_block(tmp_path):
    from IPython.core.interactiveshell import InteractiveShell

    from gpumagic.render.ncu_view import NcuReport

    sys.path.insert(0, str(CAPTURE))
    import workloads

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpumagic")
    shell.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path)!r}")
    torch.backends.cuda.matmul.allow_tf32 = False
    shell.user_ns.update(workloads.make_inputs(), torch=torch)
    shell.user_ns.pop(
        "out", None
    )  # the shell is shared with earlier tests: the cell's own names start absent
    cell = (
        "torch.backends.cuda.matmul.allow_tf32 = False\n"
        "qkv = x @ Wqkv\nq, k, v = qkv.split(4096, dim=-1)\n"
        "attn = torch.softmax(q @ k.transpose(-2, -1) / 64.0, dim=-1)\n"
        "h = attn @ v + x\nout = torch.relu(h @ W1) @ W2 + h\n"
    )
    t0 = time.perf_counter()
    shell.run_cell_magic("gpuprofile", "--ncu -o rep --label cell:block", cell)
    wall = time.perf_counter() - t0
    rep = shell.user_ns["rep"]
    assert isinstance(rep, NcuReport)
    k = rep.kernels()
    print(
        f"\n%%gpuprofile --ncu on the transformer block: {wall:.1f} s wall, {len(k)} launches "
        f"profiled\n{rep}"
    )
    with open(os.path.join(os.environ.get("OUT", str(tmp_path)), "ncu_block_wall.txt"), "w") as f:
        f.write(f"{wall:.2f}\n{rep}\n")
    assert any("top 5 of" in n for n in rep.notes)
    assert len(k) >= 5 and k["Duration (ns)"].gt(0).all() and k["SM %"].notna().all()
    assert k["FLOP/s"].max() > 1e12  # the fp32 GEMMs run on the FFMA path: counted
    assert set(k["Limiter"]) <= {"compute", "memory", "balanced", "latency"}
    fig = rep.figure()
    points = [r for r in fig.renderers if getattr(r.glyph, "marker", None) is not None]
    assert len(points[0].data_source.data["x"]) == len(k)
    assert os.path.exists(rep.path)
    assert "out" not in shell.user_ns  # the cell ran in the subprocess only
    # a guard against a runaway (every launch replayed, a first pass that never ends), not the speed
    # figure itself: that is printed and kept, and varies by seconds with the host's load (first
    # pass 8.5-11 s)
    assert wall <= 45, f"--ncu took {wall:.1f} s"


def test_default_run_counts_tensor_core_flops(tmp_path):
    """A fresh report made as %%gpuprofile --ncu makes it: the bf16 GEMM's tensor FLOP/s is 2·n³
    over its duration, its point lies between the fp32 roof and the bf16 tensor roof, it is
    compute-bound; the FFMA GEMM counts as before."""
    import math

    from gpumagic.capture.ncu import backend as ncu
    from gpumagic.capture.options import NcuOptions
    from gpumagic.render.ncu_view import NcuReport

    n = 2048
    g = torch.Generator(device="cuda").manual_seed(0)
    a32 = torch.randn(n, n, device="cuda", generator=g)
    ns = {"torch": torch, "a16": a32.to(torch.bfloat16), "a32": a32}
    cell = "torch.backends.cuda.matmul.allow_tf32 = False\nc = a16 @ a16\nd = a32 @ a32\n"
    opts = NcuOptions(
        profile_dir=str(tmp_path), kernel_filter="regex:."
    )  # every kernel in the range: the two GEMMs
    t0 = time.perf_counter()
    got = ncu.capture(cell, "cell:tensor", namespace=ns, warmup=1, options=opts)
    wall = time.perf_counter() - t0
    rep = NcuReport(got.data, label="cell:tensor", notes=got.notes, seconds=got.seconds)
    print(f"\n--ncu on a bf16 and an fp32 2048² GEMM: {wall:.1f} s wall\n{rep}")
    with open(os.path.join(os.environ.get("OUT", str(tmp_path)), "ncu_tensor_fresh.txt"), "w") as f:
        f.write(f"{wall:.2f}\n{rep}\n")
    k = rep.kernels()
    ceil = rep.ceilings
    bf16 = k[k["Math"] == "bf16 tensor"]
    assert len(bf16) == 1, k[["Name", "Math"]]
    r = bf16.iloc[0]
    seconds = r["Duration (ns)"] * 1e-9
    assert r["Tensor FLOP/s"] * seconds == pytest.approx(2 * n**3, rel=0.05)
    assert ceil["fp32"] < r["FLOP/s"] < ceil["bf16 tensor"]
    assert r["Limiter"] == "compute" and 20 < r["Peak %"] <= 100
    ffma = k[k["Math"] == "fp32"]
    assert len(ffma) == 1
    f32 = ffma.iloc[0]
    assert f32["Tensor FLOP/s"] == 0 and f32["FLOP/s"] == f32["fp32 FLOP/s"]
    assert f32["FLOP/s"] * f32["Duration (ns)"] * 1e-9 == pytest.approx(2 * n**3, rel=0.05)
    if torch.cuda.get_device_capability() == (
        9,
        0,
    ):  # Hopper: dense bf16 4096 vs FFMA 2 x 128 per SM and cycle
        assert math.isclose(ceil["bf16 tensor"] / ceil["fp32"], 16, rel_tol=0.01)
