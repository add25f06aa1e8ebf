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


def test_counters_give_each_heavy_kernel_its_verdict(tmp_path, own_names):
    shell = own_names
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
    assert "SMs active (0-100%)" in str(rep._timeline_figure().yaxis.major_label_overrides)


def test_a_notebook_training_step_gets_a_verdict_per_module_and_line(tmp_path, own_names):
    shell = own_names
    shell.run_line_magic("load_ext", "gpumagic")
    shell.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path)!r}")
    shell.run_cell(
        "import torch, torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.up, self.down = nn.Linear(2048, 8192), nn.Linear(8192, 2048)\n"
        "    def forward(self, x):\n"
        "        return self.down(torch.relu(self.up(x)))\n"
        "net = Net().cuda()\n"
        "opt = torch.optim.AdamW(net.parameters(), fused=True)\n"
        "inp = torch.randn(8192, 2048, device='cuda')"
    )
    step = "opt.zero_grad()\nloss = net(inp).pow(2).mean()\nloss.backward()\nopt.step()"
    shell.run_cell_magic("gpuprofile", "--nsys --counters -w 1 -o rep --no-timeline", step)
    rep = shell.user_ns["rep"]
    if rep.counters().empty:
        pytest.skip("no GPU metrics: " + next(n for n in rep.notes if "--counters" in n))
    mods = rep.counters("module")
    for name in ("up", "down"):
        for pass_ in ("forward", "backward"):
            mine = mods[(mods["Module"].str.split(".").str[-1] == name) & (mods["Pass"] == pass_)]
            assert len(mine) == 1, (name, pass_, mods[["Module", "Pass"]].to_dict("records"))
            assert mine["Kernels"].iloc[0] > 0 and mine["Verdict"].iloc[0], (name, pass_)
    lines = rep.counters("line")
    assert lines["Line"].str.contains("loss = net").any()
