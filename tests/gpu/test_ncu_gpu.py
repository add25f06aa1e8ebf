"""--ncu on the GPU host with its real Nsight Compute: the reader equals ncu's own CSV, and the transformer block's top
kernels and roofline come back within 30 s of wall time (printed: run with -s to see it)."""

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
    """A fresh report of the fixture workload (a matmul and an add), and ncu's raw page of it, read with csv."""
    stem = tmp_path_factory.mktemp("ncu") / "tiny"
    run = ["ncu", "--nvtx", "--nvtx-include", "cell:ncu/", "--section", "SpeedOfLight", "--section"]
    run += ["SpeedOfLight_RooflineChart", "-f", "-o", str(stem), sys.executable, str(CAPTURE / "ncu_workload.py")]
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
            assert got[ours] == float(row[col[theirs]].replace(",", "")), (ours, row[col["Kernel Name"]])


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
    shell.user_ns.pop("out", None)  # the shell is shared with earlier tests: the cell's own names start absent
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
    print(f"\n%%gpuprofile --ncu on the transformer block: {wall:.1f} s wall, {len(k)} launches profiled\n{rep}")
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
    assert wall <= 30, f"--ncu took {wall:.1f} s"
