"""torchao's kernels: its CUDA extensions in namespace ``torchao`` (2:4-sparse Marlin ``Marlin_24``,
the FP6-LLM ``QUANT_GEMM_Kernel<TilingConfig<...>, __half, 3, 2>`` with ``SplitK_Reduction``, MX /
FP8 CUTLASS GEMMs) and its Triton kernels for float8 / MX training (``_to_mxfp8_dim1_kernel``,
``triton_fp8_gemm_1x128_128x128_kernel``, ``fp8_blockwise_act_quant_kernel``, ...). FP6-LLM's
template arguments give the weight's exponent and mantissa bits (3, 2: fp6 e3m2).
"""

from __future__ import annotations

import re

from .name import Draft
from .spelling import signature, split_top
from .stack import claim, op_of, snake

TRITON_PREFIX = (
    "_to_mxfp8",
    "to_mxfp8",
    "triton_fp8",
    "_triton_fp8",
    "fp8_blockwise",
    "_fp8_blockwise",
    "triton_mx",
    "_triton_mx",
    "to_mx_",
    "_to_mx_",
    "triton_scale_swizzle",
    "_triton_scale_swizzle",
    "triton_f6",
    "triton_f4",
    "_mx_fp",
    "torchao_",
)
_FP6 = ("QUANT_GEMM_Kernel", "SplitK_Reduction")


def decode_torchao(k: Draft, sym: str, full: str) -> bool:
    """torchao's kernels: its Triton kernels by their name's prefix, and its ``torchao::`` CUDA
    extensions (Marlin 2:4, FP6-LLM, MX / FP8 GEMMs)."""
    name = full.strip()
    if "<" not in name and "(" not in name and " " not in name:
        if not name.startswith(TRITON_PREFIX):
            return False
        words = snake(name)
        op = op_of(words)
        claim(
            k, family="torchao", library="torchao (Triton)", full=name, op=op, label=name, types=()
        )
        if "mxfp8" in words or "fp8" in words:
            k.precision = "fp8e4m3"
            k.dtypes = ("fp8e4m3",)
        return True
    path, leaf, args = signature(full)
    if leaf in _FP6 and path == leaf:
        gemm = leaf == "QUANT_GEMM_Kernel"
        claim(
            k,
            family="torchao",
            library="torchao (FP6-LLM)",
            full=full,
            op="gemm" if gemm else "reduce",
            label=leaf,
            tensor_cores=True if gemm else None,
        )
        top = split_top(args)
        if gemm and len(top) >= 4 and top[-2].isdigit() and top[-1].isdigit():
            bits = 1 + int(top[-2]) + int(top[-1])
            k.precision = f"fp{bits}e{top[-2]}m{top[-1]}"
            act = "fp16" if "half" in args else "bf16"
            k.details["activation"] = act
            k.details["weight_only"] = True
            k.dtypes = (act, k.precision)
            k.short = f"torchao FP6-LLM W{bits}A16 GEMM (e{top[-2]}m{top[-1]})"
        return True
    if not (path.startswith("torchao::") or "::torchao::" in path):
        return False
    words = snake(leaf)
    claim(k, family="torchao", library="torchao", full=full, words=words, label=leaf)
    if "marlin" in words:
        k.details["sparsity"] = "2:4" if "24" in words else None
        if k.precision in ("fp16", "bf16"):
            k.details.update(activation=k.precision, weight_only=True)
            k.dtypes, k.precision = (k.precision, "int4"), "int4"
    if re.search(r"(?<![a-z])(?:mx|fp8|f8f8)", words) and k.op == "gemm" and not k.precision:
        k.precision = "fp8e4m3"
    return True
