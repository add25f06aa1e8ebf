"""AMD's aiter (ROCm's AI tensor engine: the attention, GEMM and MoE kernels vLLM and SGLang use on
MI300/MI350): ``aiter::fmha_fwd_hd128_bf16_causal...`` and its mangled spellings. Its attention is
its own (assembly or CK-based), not FlashAttention: the head dimension, element type and mask are in
the name.
"""

from __future__ import annotations

import re

from .name import Draft, squash, upper
from .precision import precision_table

__all__ = ["decode_aiter"]

_AITER = re.compile(r"(?:^|\b|_ZN\d*)aiter(?:::|\d+)(?P<leaf>[A-Za-z_]\w*)")
_DTYPE = precision_table("bf16", "fp16", "f16", "i8", aliases={"fp8": "fp8e4m3"})
_OPS = (
    ("fmha", "attention"),
    ("mha", "attention"),
    ("pa_", "attention"),
    ("paged_attention", "attention"),
    ("gemm", "gemm"),
    ("moe", "moe"),
    ("rmsnorm", "norm"),
    ("layernorm", "norm"),
    ("rope", "rope"),
    ("quant", "quantize"),
)


def _weight_format(leaf: str, toks: list[str], full: str) -> str | None:
    """The format that decides a GEMM's or MoE's rate where aiter's name gives one beside the
    activations' type: MXFP4 weights (``MXfp4``, FP4 with one scale per 1x32: ``per1x32Fp4``),
    FP8 GEMMs (``fp8gemm_bf16_...``: FP8 operands, BF16 output); else the mangled element type
    (``IDF16b``: ``__bf16``, ``IDF16_``: ``_Float16``) of a kernel whose words name none."""
    low = leaf.lower()
    if "mxfp4" in low or ("fp4" in low and "1x32" in low):
        return "mxfp4"
    if toks and toks[0].startswith(("fp8gemm", "f8gemm")):
        return "fp8e4m3"
    if not any(t in _DTYPE for t in toks):
        if "IDF16b" in leaf or "__bf16" in full or "bfloat16" in full:
            return "bf16"
        if "IDF16_" in leaf or "_Float16" in full:
            return "fp16"
    return None


def decode_aiter(k: Draft, sym: str, full: str) -> bool:
    """``aiter::fmha_fwd_hd128_bf16_causal...`` (or mangled): op, element type, head dimension,
    layout and mask from the words of aiter's kernel name."""
    m = _AITER.search(full[:2000])
    if not m:
        return False
    leaf = m["leaf"]
    low = leaf.lower()
    k.identify("rocm", "aiter (ROCm)", next((op for key, op in _OPS if key in low), "other"))
    k.add(leaf, "op", f"aiter's {leaf}")
    toks = low.split("_")
    for t in toks:
        if t in _DTYPE and k.precision is None:
            k.precision = _DTYPE[t]
        elif re.fullmatch(r"hd\d+", t):
            k.details["head_dim"] = int(t[2:])
    weights = _weight_format(leaf, toks, full[:2000])
    if weights:
        k.details["weights"] = weights
        k.precision = weights
    if "tn" in toks or "nt" in toks:
        k.layout = "tn" if "tn" in toks else "nt"
        k.add(k.layout, "layout", "A row-major, B column-major (K contiguous in both)")
    if "causal" in toks:
        k.details["mask"] = "causal"
    direction = " backward" if "bwd" in toks else " forward" if "fwd" in toks else ""
    dim = f" d{k.details['head_dim']}" if "head_dim" in k.details else ""
    k.tensor_cores = True if k.op in ("attention", "gemm", "moe") else None
    k.short = squash(f"aiter {k.op}{direction} {upper(k.precision)}{dim}")
    return True
