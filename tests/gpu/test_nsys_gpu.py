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
