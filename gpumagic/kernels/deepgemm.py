"""DeepGEMM (deepseek-ai/DeepGEMM): JIT-compiled FP8 / BF16 GEMMs for Hopper and Blackwell.

Kernel names say the architecture, the input types and the scaling granularity of each operand:
``deep_gemm::sm90_fp8_gemm_1d2d_impl<...>`` is Hopper, FP8 (e4m3) inputs, per-128-channel scales for
A (1D) and per-128×128-block scales for B (2D); ``sm100_fp8_fp4_gemm_1d1d_impl`` Blackwell with FP8
activations and FP4 weights; ``sm90_bf16_gemm_impl`` plain BF16. The grouped forms (MoE experts) are
the same kernels instantiated with ``(deep_gemm::GemmType)1`` (M-grouped, contiguous) or ``2``
(M-grouped, masked); older releases name the kernel ``fp8_gemm_kernel``. ``*_mqa_logits`` kernels
compute the sparse-attention indexer's logits.
"""

from __future__ import annotations

import re

from .name import Draft, squash, upper
from .spelling import signature
from .stack import claim, set_types

_GEMM_TYPE = re.compile(r"GemmType\)(\d)|GemmType::(\w+)")
#: DeepGEMM's GemmType enum: (value, the names releases give it, what it is). A name spells the
#: type by value (``(deep_gemm::GemmType)1``) or by name (``GemmType::MGroupedContiguous``).
_GEMM_KINDS = (
    ("0", ("Normal",), "normal"),
    ("1", ("GroupedContiguous", "MGroupedContiguous"), "grouped (M, contiguous)"),
    ("2", ("GroupedMasked", "MGroupedMasked"), "grouped (M, masked)"),
    ("3", ("KGroupedContiguous",), "grouped (K, contiguous)"),
    ("4", ("Batched",), "batched"),
)
_GEMM_TYPES = {spelled: kind for value, names, kind in _GEMM_KINDS for spelled in (value, *names)}
_WORD_TYPES = (
    ("fp8_fp4", ("fp8e4m3", "fp4e2m1")),
    ("fp8", ("fp8e4m3",)),
    ("fp4", ("fp4e2m1",)),
    ("bf16", ("bf16",)),
    ("tf32", ("tf32",)),
)


def decode_deepgemm(k: Draft, sym: str, full: str) -> bool:
    """DeepGEMM's ``deep_gemm::`` kernels: architecture, input types, scaling granularity and the
    GEMM type (normal, M- or K-grouped, batched)."""
    if "deep_gemm" not in full:
        return False
    path, leaf, args = signature(full)
    if not path.startswith("deep_gemm::"):
        return False
    gemm = "gemm" in leaf
    op = "gemm" if gemm else "attention" if "logits" in leaf else None
    claim(
        k,
        family="deepgemm",
        library="DeepGEMM",
        full=full,
        op=op,
        label=leaf,
        types=(),
        tensor_cores=True if gemm or op == "attention" else None,
    )
    types = next((t for w, t in _WORD_TYPES if w in leaf), ())
    if gemm and not types and leaf.startswith("fp8"):
        types = ("fp8e4m3",)
    if types:
        set_types(
            k,
            types + (("bf16",) if gemm and types[0].startswith("fp") and "fp4" not in leaf else ()),
            k.op,
        )
        if k.precision in ("fp8e4m3",) and len(types) > 1:
            k.precision = "fp8e4m3"
    arch = re.match(r"(sm\d+)_", leaf)
    if arch:
        k.set_arch(arch.group(1))
    scales = re.search(r"_(\dd\dd)_", f"_{leaf}_")
    if scales:
        k.details["scaling"] = scales.group(1)
        k.add(
            scales.group(1),
            "scaling",
            f"scale granularity of A and B: {scales.group(1)[:2]} × {scales.group(1)[2:]} "
            "(1D: per 128 channels; 2D: per 128×128 block)",
        )
    gm = _GEMM_TYPE.search(args)
    if gm:
        kind = _GEMM_TYPES.get(gm.group(1) or gm.group(2), "normal")
        k.details["gemm_type"] = kind
        if kind != "normal":
            k.details["grouped"] = kind
    group = f" {k.details['grouped']}" if k.details.get("grouped") else ""
    k.short = squash(f"DeepGEMM {upper(k.precision)} {'GEMM' if gemm else leaf}{group}")
    return True
