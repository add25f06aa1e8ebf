"""FlashAttention 4 (CuTe DSL, Blackwell) kernel names, as the DSL names its compiled kernels:
``flash_fwd_sm100_bf16_head_dim128_tile128x128...``: the direction (and a step such as
``combine``), the architecture, the element type, the head dimension and the Q×K tile; further
words (``causal``, ``varlen``, ``paged``...) are read as the variant they name.
"""

from __future__ import annotations

import re

from .name import MN_TOKEN, Draft, add_tile, squash, upper
from .precision import precision_table

__all__ = ["decode_flash4"]

LIBRARY = "FlashAttention 4 (CuTe DSL)"
_NAME = re.compile(
    r"^(?:void )?(?:kernel_)?flash_(?P<dir>fwd|bwd)(?P<step>(?:_[a-z]+)*?)_(?P<arch>sm1\d\d[af]?)_"
    r"(?P<rest>.*)$"
)
_DTYPE = precision_table("bf16", "fp16", "f16", "e4m3", aliases={"fp8": "fp8e4m3"})
_VARIANTS = {
    "causal": "causal mask",
    "varlen": "variable-length sequences",
    "paged": "paged KV cache",
    "local": "sliding-window (local) attention",
    "splitkv": "split-KV",
    "gqa": "grouped-query attention",
    "softcap": "soft-capped scores",
}


def decode_flash4(k: Draft, sym: str, full: str) -> bool:
    """``flash_fwd_sm100_bf16_head_dim128_tile128x128_causal``: direction and step, architecture,
    then dtype, head dimension, tile and variant words."""
    m = _NAME.match(full.split("(")[0])
    if not m:
        return False
    k.identify("flash_attention", LIBRARY, "attention", tensor_cores=True)
    direction = "forward" if m["dir"] == "fwd" else "backward"
    k.details["direction"] = direction
    k.add(f"flash_{m['dir']}", "op", f"fused attention, {direction}")
    step = m["step"].strip("_")
    if step:
        k.details["step"] = step
        k.add(step, "step", step.replace("_", " "))
    k.set_arch(m["arch"])
    k.math = "tensor cores (tcgen05)" if m["arch"].startswith("sm10") else "tensor cores"
    toks = m["rest"].split("_")
    i = 0
    while i < len(toks):
        t = toks[i]
        if t in _DTYPE:
            k.precision = _DTYPE[t]
            k.dtypes = (k.precision,)
            k.add(t, "dtype", f"{k.precision} Q/K/V")
        elif t == "head" and i + 1 < len(toks) and toks[i + 1].startswith("dim"):
            dim = toks[i + 1][3:]
            k.details["head_dim"] = int(dim) if dim.isdigit() else dim
            k.add(f"head_dim{dim}", "head dim", f"head dimension {dim}")
            i += 1
        elif t.startswith("hdim") and t[4:].isdigit():
            k.details["head_dim"] = int(t[4:])
            k.add(t, "head dim", f"head dimension {t[4:]}")
        elif t.startswith("tile") and MN_TOKEN.fullmatch(t[4:]):
            add_tile(k, t[4:], t)
        elif t in _VARIANTS:
            k.add(t, "variant", _VARIANTS[t])
        else:
            k.add(t, "raw", "not decoded")
        i += 1
    step_text = f" {step.replace('_', ' ')}" if step else ""
    dim = k.details.get("head_dim")
    k.short = squash(
        f"attention {direction}{step_text} (FlashAttention 4) {upper(k.precision)}"
        + (f" d{dim}" if dim else "")
    )
    return True
