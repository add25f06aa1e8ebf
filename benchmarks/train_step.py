"""The training step users profile, as a notebook holds it: a Llama-style model whose classes are
defined in the notebook (RMSNorm, causal attention through SDPA, a SwiGLU MLP, the head tied to the
embedding), fused AdamW, bf16 autocast, two micro-steps of gradient accumulation.

``NOTEBOOK`` is the cells before (``SIZES`` picks the model: ``"step"`` for profiling, ``"ship"``
for a ~1.3 GB model + AdamW state), ``STEP`` the cell under ``%%gpuprofile``. Used by
``nsys_phases.py --workload train``, ``shipping_speed.py`` and ``tests/gpu``.
"""

from __future__ import annotations

#: Model sizes: (layers, dim, heads, hidden, vocab, batch, seq).
SIZES = {
    "step": (4, 1024, 16, 2816, 32000, 4, 512),
    "ship": (6, 1024, 16, 2816, 32000, 2, 256),
}

NOTEBOOK = """
import dataclasses
import torch
import torch.nn as nn
import torch.nn.functional as F

@dataclasses.dataclass
class LlamaConfig:
    layers: int = {0}
    dim: int = {1}
    heads: int = {2}
    hidden: int = {3}
    vocab: int = {4}

class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * self.w

class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n1, self.n2, self.h = RMSNorm(c.dim), RMSNorm(c.dim), c.heads
        self.qkv = nn.Linear(c.dim, 3 * c.dim, bias=False)
        self.o = nn.Linear(c.dim, c.dim, bias=False)
        self.gate_up = nn.Linear(c.dim, 2 * c.hidden, bias=False)
        self.down = nn.Linear(c.hidden, c.dim, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.n1(x)).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, D))
        g, u = self.gate_up(self.n2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)

class TinyLlama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.tok = nn.Embedding(c.vocab, c.dim)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.dim)
        self.head = nn.Linear(c.dim, c.vocab, bias=False)
        self.head.weight = self.tok.weight  # tied

    def forward(self, idx, tgt):
        x = self.tok(idx)
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.view(-1))

torch.manual_seed(0)
cfg = LlamaConfig()
llm = TinyLlama(cfg).cuda()
opt = torch.optim.AdamW(llm.parameters(), lr=3e-4, fused=True)
idx = torch.randint(0, cfg.vocab, ({5}, {6}), device="cuda")
tgt = torch.randint(0, cfg.vocab, ({5}, {6}), device="cuda")
"""

STEP = """assert opt.param_groups[0]["params"][0] is llm.tok.weight and llm.head.weight is llm.tok.weight
opt.zero_grad(set_to_none=True)
for micro in range(2):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = llm(idx, tgt) / 2
    loss.backward()
opt.step()
"""


def notebook(size: str = "step") -> str:
    """The notebook's cells before the step, for a model of ``SIZES[size]``."""
    return NOTEBOOK.format(*SIZES[size])


def optimizer_kernels(names: list[str]) -> list[str]:
    """The names of fused AdamW's kernels among ``names`` (its multi-tensor apply)."""
    return [n for n in names if "Adam" in n or "multi_tensor_apply" in n]
