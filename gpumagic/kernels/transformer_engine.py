"""NVIDIA Transformer Engine's own kernels (namespace ``transformer_engine``): FP8 / MXFP8 casts and
cast-transposes (``cast_transpose_kernel``, ``multi_cast_transpose_kernel``,
``cast_mxfp8_2D_kernel``), the normalization kernels
(``normalization::rmsnorm_fwd_general_kernel<Kernel_traits<...>>``, ``ln_fwd_tuned_kernel``,
``rmsnorm_bwd_finalize_general_kernel``), fused RoPE, scaled (masked) softmax, gated activations,
MoE permutation, the delayed-scaling amax/scale update, and its userbuffers communication kernels.
TE's GEMMs run through cuBLASLt, so they are read as cuBLAS (nvjet / xmma) kernels.
"""

from __future__ import annotations

from .name import Draft
from .spelling import signature
from .stack import claim, snake


def decode_transformer_engine(k: Draft, sym: str, full: str) -> bool:
    """Transformer Engine's own ``transformer_engine::`` kernels (its GEMMs are cuBLASLt's)."""
    if "transformer_engine" not in full:
        return False
    path, leaf, _args = signature(full)
    if "transformer_engine::" not in path and not path.startswith("transformer_engine"):
        return False
    words = snake(leaf)
    op = None
    if "userbuffers" in words or "::userbuffers" in path:
        op = "communication"
    elif "delayed_scaling" in path or "amax" in words or "compute_scale" in words:
        op = "quantize"
    elif "unary" in words or "gated" in words or "act_" in words or "gelu" in words:
        op = "elementwise"
    claim(
        k,
        family="transformer_engine",
        library="Transformer Engine",
        full=full,
        words=words,
        op=op,
        label=leaf,
    )
    if k.op == "norm" and k.dtypes and any(t.startswith("fp8") for t in k.dtypes):
        k.details["fused"] = "quantize to " + next(t for t in k.dtypes if t.startswith("fp8"))
    return True
