"""vLLM's own kernels (``csrc/``): ``vllm::`` custom ops, its Marlin / Machete / AWQ / GPTQ
weight-only GEMMs and the Triton kernels of its MoE layer and attention backends.

The C++ kernels live in namespace ``vllm`` and are named after their op
(``vllm::rms_norm_kernel<c10::BFloat16, 8>``, ``vllm::rotary_embedding_kernel<c10::BFloat16,
true>``, ``vllm::act_and_mul_kernel<..., &vllm::silu_kernel<..>>``,
``vllm::paged_attention_v2_kernel<...>``, ``vllm::reshape_and_cache_flash_kernel<...>``,
``vllm::moe::topkGatingSoftmax<...>``), so the op comes from those words and the precision from the
element types. Marlin's first template arguments are ``vllm::ScalarType`` ids, 64-bit numbers that
pack the type's exponent, mantissa, sign and bias (``csrc/core/scalar_type.hpp``): 1125899906843648
is uint4 (GPTQ's uint4b8 has bias 8), 1125899906910725 fp16. The Triton kernels carry only their
Python function's name (``fused_moe_kernel``).
"""

from __future__ import annotations

import re

from .name import Draft, upper
from .spelling import signature
from .stack import claim, claim_listed, set_types, snake

_FAMILY = "vllm"
_MARLIN = re.compile(
    r"(?:^|::)(?:marlin|marlin_moe_wna16|MarlinMoE|fp8_marlin|gptq_marlin|marlin_24|awq_marlin)::"
)
_SCALAR_ID = re.compile(r"(?<![\w.])(\d{13,20})l?\b")
#: the Python function names of vLLM's Triton kernels (vllm/model_executor/layers/...), and their op
TRITON = {
    "fused_moe_kernel": "gemm",
    "fused_moe_kernel_gptq_awq": "gemm",
    "kernel_unified_attention_2d": "attention",
    "kernel_unified_attention_3d": "attention",
    "reduce_segments": "attention",
    "_w8a8_block_fp8_matmul": "gemm",
    "_w8a8_triton_block_scaled_mm": "gemm",
    "_per_token_group_quant_fp8": "quantize",
    "_per_token_group_quant_fp8_colmajor": "quantize",
    "_silu_mul_fp8_quant_deep_gemm": "elementwise",
    "_count_expert_num_tokens": "moe_routing",
    "_fwd_kernel_flash_attn_v2": "attention",
    "_fwd_kernel_alibi": "attention",
    "chunked_prefill_paged_decode": "attention",
    "kernel_paged_attention_2d": "attention",
    "_topk_log_softmax_kernel": "sampling",
    "_gumbel_sample_kernel": "sampling",
    "_apply_penalties_kernel": "sampling",
    "_ranks_kernel": "sampling",
    "_penalties_and_temperature_kernel": "sampling",
    "_prepare_prefill_inputs_kernel": "copy",
    "_compute_slot_mappings_kernel": "kv_cache_write",
    "_fused_moe_lora_kernel": "gemm",
    "_lora_shrink_kernel": "gemm",
    "_lora_expand_kernel": "gemm",
}
_TRITON_FP8 = {"_w8a8_block_fp8_matmul": "fp8e4m3", "_w8a8_triton_block_scaled_mm": "fp8e4m3"}


def scalar_type(type_id: int) -> str | None:
    """A vLLM ``ScalarType`` id -> canonical dtype: exponent (8 bits), mantissa (8), signed (1),
    bias (32), finite-values-only (1), NaN representation (8), packed from the low bits up."""
    exponent, mantissa = type_id & 0xFF, (type_id >> 8) & 0xFF
    signed = (type_id >> 16) & 1
    if (
        exponent == 0
        # an integer type: mantissa bits (+1 sign bit); a bias of 2^(bits-1) makes it signed
        # (uint4b8)
    ):
        bits = mantissa + signed
        bias = (type_id >> 17) & 0xFFFFFFFF
        signed = signed or (bits > 1 and bias == 1 << (bits - 1))
        return f"{'int' if signed else 'uint'}{bits}" if bits in (2, 3, 4, 8) else None
    return {
        (5, 10): "fp16",
        (8, 7): "bf16",
        (4, 3): "fp8e4m3",
        (5, 2): "fp8e5m2",
        (2, 1): "fp4e2m1",
        (8, 0): "ue8m0",
    }.get((exponent, mantissa))


def _marlin(k: Draft, full: str, args: str) -> None:
    """Marlin: dtypes from ScalarType ids (activation, weight, ...) or from named types (older
    builds)."""
    ids = [scalar_type(int(m.group(1))) for m in _SCALAR_ID.finditer(args[:400])]
    types = tuple(dict.fromkeys(t for t in ids if t))
    claim(
        k,
        family=_FAMILY,
        library="vLLM (Marlin)",
        full=full,
        op="gemm",
        tensor_cores=True,
        label="Marlin GEMM",
    )
    if types:
        set_types(k, types, "gemm")
        act = next((t for t in types if t in ("fp16", "bf16")), None)
        weight = next((t for t in types if t != act), None)
        if act and weight:  # Marlin is weight-only: the weight type is the narrow one, fp8 included
            k.precision = weight
            k.details.update(activation=act, weight_only=True)
            bits = "".join(c for c in weight if c.isdigit())[:1] or "?"
            k.short = f"vLLM Marlin W{bits}A16 GEMM ({weight} weights, {act} activations)"
        else:
            k.short = f"vLLM Marlin {upper(k.precision)} GEMM"
    if "moe" in full[:60].lower():
        k.details["grouped"] = "MoE experts"
        k.short += " (MoE)"


def decode_vllm(k: Draft, sym: str, full: str) -> bool:
    """vLLM's kernels: its Triton kernels by name, Marlin's weight-only GEMMs, and ``vllm::``
    templates (GPTQ / AWQ / Machete GEMMs and dequantization, MoE routing, paged attention, ...)."""
    if "vllm" not in full and "arlin" not in full and sym not in TRITON:
        return False
    path, leaf, args = signature(full)
    if sym in TRITON or leaf in TRITON:
        name = leaf or sym
        library = "vLLM (Triton)"
        claim_listed(k, name, full, family=_FAMILY, library=library, ops=TRITON, mma_op="gemm")
        if name in _TRITON_FP8:
            set_types(k, (_TRITON_FP8[name],), "gemm")
        return True
    if _MARLIN.search(path):
        _marlin(k, full, args)
        return True
    if not (path.startswith("vllm::") or "::vllm::" in path):
        return False
    words = snake(leaf)
    sub = path.split("::")[1] if path.count("::") >= 2 else ""
    op = None
    if sub in ("gptq", "awq", "machete", "allspark"):
        op = (
            "dequantize"
            if "dequant" in words or "reconstruct" in words or "repack" in words
            else "gemm"
        )
    elif sub == "moe" and "gemm" not in words:
        op = "moe_routing" if "sum" not in words else "moe_permute"
    elif "paged_attention" in words:
        op = "attention"
    cuda_cores = op == "attention" or (
        sub == "gptq" and "exllama" not in words and op == "gemm" and "alt" in words
    )
    claim(
        k,
        family=_FAMILY,
        library="vLLM",
        full=full,
        words=words,
        op=op,
        tensor_cores=False if cuda_cores else None,
        label=leaf,
    )
    if sub in ("gptq", "awq") and k.op in ("gemm", "dequantize"):
        bits = re.search(r"(\d)bit", words)
        weight = f"int{bits.group(1)}" if bits else "int4"
        act = next((t for t in k.dtypes if t in ("fp16", "bf16")), "fp16")
        k.precision, k.dtypes = weight, (act, weight)
        k.details["activation"] = act
        k.details["weight_only"] = True
        if sub == "gptq" and k.op == "gemm":
            k.tensor_cores = False  # exllama-style half2 dot products on CUDA cores
            k.math = "CUDA cores (no tensor cores)"
        k.short = f"vLLM {sub.upper()} W{weight[3:]}A16 {leaf}"[:110]
    kv = full.find("Fp8KVCacheDataType)")
    if kv >= 0 and full[kv + 19 : kv + 20] in ("1", "2"):  # kAuto = 0, kFp8E4M3 = 1, kFp8E5M2 = 2
        k.details["kv_cache"] = "fp8e4m3" if full[kv + 19] == "1" else "fp8e5m2"
    return True
