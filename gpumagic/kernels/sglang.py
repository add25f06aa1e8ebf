"""SGLang's kernels: ``sgl-kernel`` (CUDA, mostly outside any namespace:
``moe_align_block_size_kernel<int>``, ``topkGatingSoftmax<__nv_bfloat16, ...>``,
``per_token_group_quant_8bit_kernel<c10::BFloat16, __nv_fp8_e4m3, ...>``,
``sglang::cross_device_reduce_1stage<...>``), its JIT kernels (``(anonymous
namespace)::fused_rope_kernel<...>``) and the Triton kernels of its attention backends
(``_fwd_grouped_kernel_stage1``, ``create_flashinfer_kv_indices_ triton``). Un-namespaced names are
claimed only from the list of sgl-kernel's entry points (``sgl-kernel/csrc``), with their template
arguments, so a bare word elsewhere is not taken for SGLang's.
"""

from __future__ import annotations

from .name import Draft
from .spelling import signature
from .stack import claim, claim_listed, snake

_FAMILY = "sglang"
#: sgl-kernel's un-namespaced CUDA kernels (sgl-kernel/csrc/moe, gemm, elementwise, allreduce)
CUDA = {
    "moe_align_block_size_kernel",
    "moe_align_block_size_small_batch_expert_kernel",
    "count_and_sort_expert_tokens_kernel",
    "topkGatingSoftmax",
    "moeSoftmax",
    "moeTopK",
    "moe_fused_gate_kernel",
    "moe_sum_reduce_kernel",
    "per_token_group_quant_8bit_kernel",
    "per_tensor_quant_fp8_kernel",
    "per_token_quant_fp8_kernel",
    "per_tensor_absmax_kernel",
    "fused_rope_kernel",
    "fused_rope_store_kernel",
    "fused_qknorm_warp",
    "fused_qk_norm_rope_kernel",
    "store_kvcache_kernel",
    "apply_rope_pos_ids_cos_sin_cache_kernel",
    "grouped_topk_kernel",
    "int8_scaled_mm_kernel",
    "fp8_blockwise_scaled_mm_kernel",
    "ep_moe_pre_reorder_kernel",
    "ep_moe_post_reorder_kernel",
    "silu_and_mul_kernel",
    "cross_device_reduce_1stage",
    "cross_device_reduce_2stage",
}
#: SGLang's Triton kernels (python/sglang/srt/layers/attention/triton_ops, mem_cache, moe) and their
#: op
TRITON = {
    "_fwd_grouped_kernel_stage1": "attention",
    "_fwd_kernel_stage1": "attention",
    "_fwd_kernel_stage2": "attention",
    "_fwd_kernel_unified": "attention",
    "create_flashinfer_kv_indices_triton": "copy",
    "create_flashmla_kv_indices_triton": "copy",
    "write_req_to_token_pool_triton": "copy",
    "compute_position_kernel": "copy",
    "_set_kv_buffer_kernel": "kv_cache_write",
    "set_mla_kv_buffer_kernel": "kv_cache_write",
    "moe_sum_reduce_triton": "moe_permute",
    "deepep_permute_triton_kernel": "moe_permute",
    "deepep_post_reorder_triton_kernel": "moe_permute",
    "pre_reorder_triton_kernel": "moe_permute",
    "post_reorder_triton_kernel": "moe_permute",
    "silu_and_mul_triton_kernel": "elementwise",
    "_per_token_group_quant_8bit": "quantize",
    "_per_token_group_quant_fp8": "quantize",
    "fused_moe_router_kernel": "moe_routing",
    "compute_src2dst_triton_kernel": "moe_routing",
}


def decode_sglang(k: Draft, sym: str, full: str) -> bool:
    """SGLang's kernels: its Triton kernels by name, ``sglang::`` / ``sgl_kernel::`` templates, and
    the un-namespaced sgl-kernel entry points from its list, with their template arguments."""
    path, leaf, _ = signature(full)
    name = leaf or sym
    if name in TRITON and "<" not in full and "(" not in full:
        library = "SGLang (Triton)"
        claim_listed(k, name, full, family=_FAMILY, library=library, ops=TRITON, mma_op="attention")
        return True
    sglang_ns = path.startswith(("sglang::", "sgl_kernel::", "sgl_hpu::")) or "::sglang::" in path
    anon = path.startswith("(anonymous namespace)::") and path.count("::") == 1
    bare = path == leaf
    if not (sglang_ns or (name in CUDA and (bare or anon) and ("<" in full or "(" in full))):
        return False
    words = snake(leaf)
    claim(k, family=_FAMILY, library="SGLang (sgl-kernel)", full=full, words=words, label=leaf)
    return True
