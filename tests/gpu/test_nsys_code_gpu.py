"""``%%gpuprofile --nsys`` on the GPU host gives the by-code answer the in-process path gives for
the same notebook training step: the kernels of each module, forward and backward, and of each
line (``capture/marks/code_marks.py``), in the warm child and in the one-shot run."""

from __future__ import annotations

import shutil

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
    pytest.mark.skipif(shutil.which("nsys") is None, reason="needs nsys on PATH"),
]

MODEL = """
import torch, torch.nn as nn
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))
class Net(nn.Module):
    def __init__(self, d=1024):
        super().__init__()
        self.blocks = nn.Sequential(Block(d), Block(d))
        self.head = nn.Linear(d, 256)
    def forward(self, x):
        return self.head(self.blocks(x))
net = Net().cuda()
opt = torch.optim.AdamW(net.parameters(), fused=True)
inp = torch.randn(4096, 1024, device="cuda")
"""
STEP = (
    "opt.zero_grad()\nfor _ in range(2):\n    loss = net(inp).pow(2).mean()\n"
    "    loss.backward()\nopt.step()"
)


def _per_module(rep):
    rows = rep.trace.by_module(memops=False)
    return {
        r["module"]: (r["kernels"], r["fwd_ns"] > 0, r["bwd_ns"] > 0) for _, r in rows.iterrows()
    }


def _per_line(rep):
    rows = rep.trace.by_line(memops=False)
    return {r["source"]: r["kernels"] for _, r in rows.iterrows()}


def test_nsys_gives_the_in_process_modules_and_lines(tmp_path, own_names):
    from IPython.utils.capture import capture_output

    shell = own_names
    shell.run_line_magic("load_ext", "gpumagic")
    shell.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path)!r}")
    shell.run_cell(MODEL)
    got = {}
    with capture_output():
        for name, flags in [("torch", ""), ("nsys", "--nsys"), ("again", "--nsys")]:
            shell.run_cell_magic("gpuprofile", f"{flags} -w 1 -o rep --no-timeline", STEP)
            got[name] = shell.user_ns["rep"]
    ref_mods, ref_lines = _per_module(got["torch"]), _per_line(got["torch"])
    assert ref_mods["blocks.0.up"][1:] == (True, True), ref_mods  # forward and backward
    for name in ("nsys", "again"):
        mods, lines = _per_module(got[name]), _per_line(got[name])
        assert mods == ref_mods, (name, mods, ref_mods)
        assert lines == ref_lines, (name, lines, ref_lines)
    nvtx = got["nsys"].trace.nvtx
    assert not nvtx["text"].astype(str).str.contains("op_id = ").any()  # the op ranges left


EARLIER_STEP = """
def step():
    opt.zero_grad()
    for _ in range(2):
        loss = net(inp).pow(2).mean()
        loss.backward()
    opt.step()
"""


def _line_tree(rep):
    rows = rep.trace.by_line(memops=False)
    return [(int(r["depth"]), r["source"], int(r["kernels"])) for _, r in rows.iterrows()]


def test_a_function_of_an_earlier_cell_has_the_same_rows_under_nsys(tmp_path, own_names):
    from IPython.utils.capture import capture_output

    shell = own_names
    shell.run_line_magic("load_ext", "gpumagic")
    shell.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path)!r}")
    shell.run_cell(MODEL)
    shell.run_cell(EARLIER_STEP, store_history=True)
    got = {}
    with capture_output():
        for name, flags in [("torch", ""), ("nsys", "--nsys")]:
            shell.run_cell_magic("gpuprofile", f"{flags} -w 1 -o rep --no-timeline", "step()")
            got[name] = shell.user_ns["rep"]
    ref = _line_tree(got["torch"])
    sources = [s for _, s, _ in ref]
    assert any(s.startswith("step()  [In [") for s in sources), ref
    deep = [(d, k) for d, s, k in ref if s == "loss = net(inp).pow(2).mean()"]
    assert deep and deep[0][0] == 3 and deep[0][1] > 0, ref  # cell line > step() > for > line
    assert _line_tree(got["nsys"]) == ref
    assert _per_module(got["nsys"]) == _per_module(got["torch"])
