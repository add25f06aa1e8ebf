"""%%gpuprofile --nsys on the GPU host with its real nsys: only the cell's kernels are captured."""

from __future__ import annotations

import shutil

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
    pytest.mark.skipif(shutil.which("nsys") is None, reason="needs nsys on PATH"),
]


def test_nsys_captures_only_the_cell_with_tensors_from_earlier_cells(tmp_path):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpumagic")
    shell.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path)!r}")
    shell.run_cell(
        "import torch\nA = torch.randn(2048, 2048, device='cuda')\nB = torch.randn(2048, "
        "2048, device='cuda')"
    )
    shell.run_cell_magic(
        "gpuprofile", "--nsys -w 3 -o rep --label cell:nsys", "C = torch.relu(A @ B)"
    )
    rep = shell.user_ns["rep"]
    k = rep.kernel_summary()
    # one GEMM and one ReLU, once each: the three warm-up runs are outside the capture range
    assert k["Instances"].sum() == 2, k[["Name", "Instances"]]
    assert set(k["Op"]) == {"gemm", "elementwise"}
    html = rep._repr_html_()
    assert "CUDA API calls" in html and "GPU stream" in html
    assert (
        rep.trace.meta["backend"] == "nsys"
        and rep.trace.meta["device"] == torch.cuda.get_device_name()
    )
    assert any(n.startswith("SQLite export: ") for n in rep.notes)
    assert "C" not in shell.user_ns  # the cell ran in the subprocess


FIVE_OPS_SETUP = """
import torch
a = torch.randn(2048, 2048, device="cuda"); b = torch.randn(2048, 2048, device="cuda")
bag = torch.nn.EmbeddingBag(50000, 256, mode="sum").cuda()
idx = torch.randint(0, 50000, (8192,), device="cuda")
offsets = torch.arange(0, 8192, 64, device="cuda")
conv = torch.nn.Conv2d(64, 128, 3, padding=1).cuda(); x = torch.randn(16, 64, 56, 56, device="cuda")
s = torch.randn(64, 32768, device="cuda")
"""
FIVE_OPS = """c = a @ b
e = bag(idx, offsets)
y = conv(x)
v, i = torch.topk(s, 64, dim=1)
total = float(y.sum().item())
"""


def _kernel_counts(rep) -> dict[str, int]:
    k = rep.trace.kernels
    return {str(name): int(n) for name, n in k["name"].value_counts().items()}


def test_a_reused_warm_child_records_the_kernels_a_fresh_run_records(tmp_path):
    """The warm child's second cell (nsys start/stop in a session started by an earlier cell)
    and a fresh one-shot ``nsys profile`` of the same cell list the same kernels, as often."""
    from IPython.core.interactiveshell import InteractiveShell

    from gpumagic.capture.nsys import warm as nsys_warm

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpumagic")
    shell.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path)!r}")
    nsys_warm.retire_current()
    try:
        shell.run_cell(FIVE_OPS_SETUP).raise_error()
        shell.run_line_magic("config", "GpuMagics.nsys_warm_child = True")
        shell.run_cell_magic("gpuprofile", "--nsys -w 1 -n 2 -o first --label cell:warm1", FIVE_OPS)
        shell.run_cell_magic(
            "gpuprofile", "--nsys -w 1 -n 2 -o reused --label cell:warm2", FIVE_OPS
        )
        shell.run_line_magic("config", "GpuMagics.nsys_warm_child = False")
        shell.run_cell_magic("gpuprofile", "--nsys -w 1 -n 2 -o fresh --label cell:fresh", FIVE_OPS)
    finally:
        shell.run_line_magic("config", "GpuMagics.nsys_warm_child = True")
        nsys_warm.retire_current()
    first, reused, fresh = (shell.user_ns[n] for n in ("first", "reused", "fresh"))
    assert not any(n.startswith("Warm child not used") for n in first.notes + reused.notes)
    assert any(n.startswith("Warm child reused") for n in reused.notes)
    assert "warm child reused" in reused.summary_line()
    assert not any(n.startswith("Warm child") for n in fresh.notes)
    counts = _kernel_counts(fresh)
    # GEMM, embedding bag, conv (and its bias), top-k, the sum: each listed, twice or more (-n 2)
    assert len(counts) >= 5 and all(n >= 2 for n in counts.values()), counts
    assert _kernel_counts(reused) == counts
    assert _kernel_counts(first) == counts
    # the warm-up stayed out of the collection: the cell's NVTX range, once per report
    for rep, label in ((reused, "cell:warm2"), (fresh, "cell:fresh")):
        texts = rep.trace.nvtx["text"].tolist()
        assert sum(t.lstrip(":") == label for t in texts) == 1, texts
    for rep in (first, reused):
        phases = rep.trace.meta["phases"]
        assert {"capture", "tool start", "tool stop/flush", "export", "reading"} <= set(phases)
    assert "child start" in first.trace.meta["phases"]
    assert "child start" not in reused.trace.meta["phases"]
