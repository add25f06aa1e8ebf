"""The two workloads of the committed trace fixtures: a 4096² fp32 matmul, and a transformer block
like the series' (batch 16, seq 512, hidden 4096, FFN 16384: QKV, QKᵀ, softmax, attention·V +
residual, FFN with ReLU + residual), fp32 without TF32. Shared by the torch.profiler and nsys
capture scripts."""

from __future__ import annotations

import torch


def make_inputs(device: str = "cuda") -> dict:
    g = torch.Generator(device=device).manual_seed(0)

    def rnd(*s: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*s, device=device, generator=g) * scale

    return {
        "A": rnd(4096, 4096),
        "B": rnd(4096, 4096),
        "x": rnd(16, 512, 4096),
        "Wqkv": rnd(4096, 3 * 4096, scale=0.02),
        "W1": rnd(4096, 16384, scale=0.02),
        "W2": rnd(16384, 4096, scale=0.02),
    }


def matmul(ns: dict) -> torch.Tensor:
    return ns["A"] @ ns["B"]


def block(ns: dict, mark=None) -> torch.Tensor:
    """``mark(name)`` returns a context manager around each stage (NVTX ranges in the nsys
    fixture)."""
    import contextlib

    mark = mark or (lambda name: contextlib.nullcontext())
    x = ns["x"]
    with mark("qkv"):
        qkv = x @ ns["Wqkv"]
        q, k, v = qkv.split(4096, dim=-1)
    with mark("scores"):
        scores = q @ k.transpose(-2, -1) / 64.0
    with mark("softmax"):
        attn = torch.softmax(scores, dim=-1)
    with mark("attn_v_residual"):
        h = attn @ v + x
    with mark("ffn"):
        f = torch.relu(h @ ns["W1"]) @ ns["W2"]
    with mark("residual"):
        return f + h
