"""CUDA graphs captured inside a profiled cell, for the by-code view's graph x-ray: run on the GPU
host from the project root, ``python3 tests/data/capture/graph_capture.py OUT``. Writes
``OUT/graph_in_cell.json.gz``: ``%%gpuprofile --trace`` of a cell that captures a notebook-defined
MLP's forward into a ``torch.cuda.CUDAGraph`` and replays it twice (the capture's launches with
their module and line ranges; each replay's kernels under its ``cudaGraphLaunch``), and
``OUT/graph_elsewhere.json.gz``: a cell that only replays a graph an earlier cell captured."""

from __future__ import annotations

import gzip
import os
import shutil
import sys

MODEL = """
import torch
from torch import nn

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(1024, 4096)
        self.act = nn.GELU()
        self.down = nn.Linear(4096, 1024)

    def forward(self, x):
        return self.down(self.act(self.up(x)))

model = MLP().cuda()
x = torch.randn(256, 1024, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(2):
        y = model(x)
torch.cuda.current_stream().wait_stream(side)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = model(x)
"""

IN_CELL = """\
g2 = torch.cuda.CUDAGraph()
with torch.cuda.graph(g2):
    y2 = model(x)
g2.replay()
g2.replay()"""


def main(out: str) -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpumagic")
    ip.run_line_magic("config", "GpuMagics.history = ''")
    ip.run_cell(MODEL, store_history=True)
    for name, cell in (("graph_in_cell", IN_CELL), ("graph_elsewhere", "g.replay()")):
        path = os.path.join(out, f"{name}.json")
        with capture_output():
            ip.run_cell_magic("gpuprofile", f"-w 1 --no-timeline --trace {path}", cell)
        with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.remove(path)
        print("wrote", path + ".gz")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "."))
