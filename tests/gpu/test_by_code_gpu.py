"""%%gpuprofile's by-code view on a real GPU: a transformer's training step, its kernels put on the
cell's lines and the model's modules, the backward on the modules whose forward caused it.

The model computes its loss in its forward (as nanoGPT's does), so every backward kernel but the
optimizer's has a module to go to: the by-module backward must hold at least 95% of the backward
kernel time, that time computed here independently (kernels whose launching CUDA call ran on a
thread other than the cell's: autograd's)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

CELL = """\
opt.zero_grad(set_to_none=True)
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = model(idx, idx)
loss.backward()
opt.step()"""


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 4096, d: int = 512, heads: int = 8, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


@pytest.fixture
def shell(ip):
    torch.manual_seed(0)
    model = GPT().cuda()
    ip.user_ns.update(
        torch=torch,
        model=model,
        opt=torch.optim.AdamW(model.parameters(), lr=1e-4),
        idx=torch.randint(0, 4096, (8, 256), device="cuda"),
    )
    yield ip
    for name in ("model", "opt", "idx", "loss", "rep"):
        ip.user_ns.pop(name, None)
    torch.cuda.synchronize()


def gpu_total(trace) -> int:
    k, m = trace.kernels, trace.memops
    return int((k["end"] - k["start"]).sum() + (m["end"] - m["start"]).sum())


def backward_ns(trace) -> int:
    """Kernel and memory-operation time launched from a thread other than the one that ran most
    launches (the cell's): autograd's engine thread runs the backward."""
    api = trace.api.dropna(subset=["correlation"]).drop_duplicates("correlation")
    main = api["thread"].value_counts().index[0]
    thread_of = dict(zip(api["correlation"], api["thread"]))
    total = 0
    for table in (trace.kernels, trace.memops):
        for c, s, e in zip(table["correlation"], table["start"], table["end"]):
            if thread_of.get(c, main) != main:
                total += int(e - s)
    return total


def test_a_training_step_by_module_and_by_line(shell):
    shell.run_cell_magic("gpuprofile", "-w 2 -o rep --no-timeline", CELL)
    rep = shell.user_ns["rep"]
    trace = rep.trace
    total = gpu_total(trace)
    assert total > 0
    mods = rep.by_module()
    top = mods[mods["depth"] == 0]
    assert int(top["total_ns"].sum()) == total  # modules + outside make the GPU time exactly
    backward = backward_ns(trace)
    assert backward > 0
    in_modules = int(top.loc[top["instance"] != "", "bwd_ns"].sum())
    assert in_modules >= 0.95 * backward, (in_modules, backward, mods.to_string())
    names = set(mods["module"])
    assert {"blocks.0.attn", "blocks.1.mlp.0", "head"} <= names or {
        "blocks.0",
        "blocks.1",
        "head",
    } <= names
    for i in (0, 1):
        block = mods[mods["module"] == f"blocks.{i}"].iloc[0]
        assert block["bwd_ns"] > 0 and block["fwd_ns"] > 0
    lines = rep.by_line()
    assert int(lines["total_ns"].sum()) == total == int(lines["launched_ns"].sum())
    body = lines[lines["line"].notna()].set_index("line")
    assert sorted(body.index) == [1, 2, 3, 4, 5]
    # the backward is launched by loss.backward() and belongs to the forward line
    assert body.loc[4, "launched_bwd_ns"] >= 0.95 * backward
    assert body.loc[3, "bwd_ns"] >= 0.95 * backward
    assert body.loc[5, "fwd_ns"] > 0  # the optimizer's step
    text = str(rep)
    assert "By module, forward and backward" in text and "blocks.0" in text
