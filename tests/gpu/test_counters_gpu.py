"""``%%gpuprofile --nsys --counters`` on the GPU host: nsys samples the GPU metrics in the warm
child's capture and the report gives a memory-bound add and a tensor-core bound GEMM."""

from __future__ import annotations

import shutil

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
    pytest.mark.skipif(shutil.which("nsys") is None, reason="needs nsys on PATH"),
]


def test_counters_give_each_heavy_kernel_its_verdict(tmp_path):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpumagic")
    shell.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path)!r}")
    shell.run_cell(
        "import torch\nx = torch.randn(1 << 26, device='cuda')\n"
        "a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)"
    )
    cell = "for _ in range(20):\n    y = x + x\nfor _ in range(10):\n    c = a @ a"
    shell.run_cell_magic("gpuprofile", "--nsys --counters -w 1 -o rep --no-timeline", cell)
    rep = shell.user_ns["rep"]
    table = rep.counters()
    if table.empty:
        pytest.skip("no GPU metrics: " + next(n for n in rep.notes if "--counters" in n))
    verdicts = dict(zip(table["Name"], table["Verdict"]))
    gemm = next(v for n, v in verdicts.items() if "gemm" in n.lower() or n.startswith("nvjet"))
    add = next(v for n, v in verdicts.items() if "CUDAFunctor_add" in n)
    assert gemm.startswith("tensor-core bound") and add.startswith("memory-bound"), verdicts
    assert "What the silicon says" in rep._repr_html_()
