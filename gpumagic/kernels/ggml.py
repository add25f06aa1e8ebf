"""llama.cpp's CUDA kernels (ggml's CUDA backend), a common engine on the DGX Spark:
``mul_mat_q<(ggml_type)12, 64, false>`` is its quantized matrix multiply (MMQ) of Q4_K weights,
``mul_mat_vec_q<(ggml_type)2, 1>`` the matrix-vector form for one token, ``flash_attn_ext_f16``
its attention, ``quantize_q8_1`` the activation quantization before an MMQ. The weights' type is
the template's ``ggml_type`` number, read with ggml's own enum (``ggml/include/ggml.h``, which
keeps removed numbers as gaps).
"""

from __future__ import annotations

import re

from .name import Draft
from .precision import precision_table

__all__ = ["GGML_TYPES", "decode_ggml"]

#: ggml's ``enum ggml_type``: number -> name (gaps are types removed from the format).
GGML_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    6: "Q5_0",
    7: "Q5_1",
    8: "Q8_0",
    9: "Q8_1",
    10: "Q2_K",
    11: "Q3_K",
    12: "Q4_K",
    13: "Q5_K",
    14: "Q6_K",
    15: "Q8_K",
    16: "IQ2_XXS",
    17: "IQ2_XS",
    18: "IQ3_XXS",
    19: "IQ1_S",
    20: "IQ4_NL",
    21: "IQ3_S",
    22: "IQ2_S",
    23: "IQ4_XS",
    24: "I8",
    25: "I16",
    26: "I32",
    27: "I64",
    28: "F64",
    29: "IQ1_M",
    30: "BF16",
    34: "TQ1_0",
    35: "TQ2_0",
    39: "MXFP4",
    40: "NVFP4",
    41: "Q1_0",
}
#: the ggml types that are plain floating-point types (the others are its quantized formats)
_PLAIN = precision_table("F32", "F16", "BF16", "F64")
_KERNEL = re.compile(
    r"^(?:void )?(?P<fn>mul_mat_q|mul_mat_vec_q|mul_mat_q_stream_k_fixup|mul_mat_vec_f|mul_mat_f|"
    r"flash_attn_ext_f16|flash_attn_ext_vec|flash_attn_tile|flash_attn_combine_results|"
    r"quantize_q8_1|quantize_mmq_q8_1|dequantize_block|convert_unary|rms_norm_f32|norm_f32|"
    r"soft_max_f32|rope_neox|rope_norm|k_get_rows|k_bin_bcast|cpy_f32_f16|concat_f32|"
    r"gated_delta_net_cuda|ssm_conv_f32|ssm_scan_f32)"
    r"(?P<rest>[<(].*)?$"
)
_TYPE = re.compile(r"\(ggml_type\)(\d+)")
_OPS = {
    "mul_mat_q": ("gemm", "quantized matrix multiply (MMQ)"),
    "mul_mat_q_stream_k_fixup": ("gemm", "stream-K fix-up of a quantized matrix multiply"),
    "mul_mat_vec_q": ("gemv", "quantized matrix-vector multiply (one token)"),
    "mul_mat_vec_f": ("gemv", "matrix-vector multiply"),
    "mul_mat_f": ("gemm", "matrix multiply"),
    "flash_attn_ext_f16": ("attention", "fused attention (tensor cores)"),
    "flash_attn_ext_vec": ("attention", "fused attention, one query at a time"),
    "flash_attn_tile": ("attention", "fused attention (tiles)"),
    "flash_attn_combine_results": ("attention", "split attention's results combined"),
    "quantize_q8_1": ("quantize", "activations quantized to Q8_1 for the MMQ"),
    "quantize_mmq_q8_1": ("quantize", "activations quantized to Q8_1 for the MMQ"),
    "dequantize_block": ("dequantize", "weights dequantized"),
    "convert_unary": ("copy", "type conversion"),
    "rms_norm_f32": ("norm", "RMS norm"),
    "norm_f32": ("norm", "layer norm"),
    "soft_max_f32": ("softmax", "softmax"),
    "rope_neox": ("rope", "rotary embedding (NeoX)"),
    "rope_norm": ("rope", "rotary embedding"),
    "k_get_rows": ("gather", "embedding rows gathered"),
    "k_bin_bcast": ("elementwise", "broadcast binary op"),
    "cpy_f32_f16": ("copy", "fp32 to fp16 copy"),
    "concat_f32": ("copy", "concatenation"),
    # the recurrent layers of Qwen3-Next / Mamba models (gated-delta-net.cu, ssm-conv.cu, ...)
    "gated_delta_net_cuda": ("attention", "gated delta-net (linear attention) recurrence"),
    "ssm_conv_f32": ("conv", "state-space model causal convolution"),
    "ssm_scan_f32": ("scan", "state-space model selective scan"),
}


def decode_ggml(k: Draft, sym: str, full: str) -> bool:
    """``mul_mat_q<(ggml_type)12, 64, false>``: one of llama.cpp's CUDA kernels, with its weights'
    ggml type where the template gives one."""
    m = _KERNEL.match(full)
    if not m:
        return False
    fn = m["fn"]
    op, meaning = _OPS[fn]
    k.identify("ggml", "llama.cpp (ggml CUDA)", op)
    k.add(fn, "op", meaning)
    types = [int(t) for t in _TYPE.findall(m["rest"] or "")]
    if types:
        name = GGML_TYPES.get(types[0])
        if name is None:
            k.add(f"(ggml_type){types[0]}", "weights", "a ggml type this decoder does not know")
        else:
            k.details["weights"] = name
            k.precision = _PLAIN.get(name, name.lower())
            k.add(f"(ggml_type){types[0]}", "weights", f"{name} weights")
    elif fn.endswith("_f16"):
        k.precision = "fp16"
    k.tensor_cores = fn in ("mul_mat_q", "flash_attn_ext_f16") or None
    what = f"{k.details['weights']} " if "weights" in k.details else ""
    k.short = f"llama.cpp {what}{meaning}"
    return True
