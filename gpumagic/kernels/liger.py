"""Liger Kernel (linkedin/Liger-Kernel): Triton kernels for LLM training, named by their Python
functions (``src/liger_kernel/ops/*.py``): ``_rms_norm_forward_kernel``,
``liger_cross_entropy_kernel``, ``_swiglu_forward_kernel``, ``_triton_rope``, ``_jsd_kernel``, ... A
profiler shows a Triton kernel's bare function name with no types, so only the op is read (from the
name's words); the names are claimed from Liger's own list, since bare words like
``_layer_norm_forward_kernel`` could be anyone's, unless the name says ``liger``.
"""

from __future__ import annotations

from .name import Draft
from .stack import claim, op_of, snake

#: kernel function names defined in Liger's ops (and their op where the words alone would read
#: otherwise)
KERNELS = {
    "_rms_norm_forward_kernel": "norm",
    "_rms_norm_backward_kernel": "norm",
    "_block_rms_norm_forward_kernel": "norm",
    "_block_rms_norm_backward_kernel": "norm",
    "_fused_add_rms_norm_forward_kernel": "norm",
    "_fused_add_rms_norm_backward_kernel": "norm",
    "_layer_norm_forward_kernel": "norm",
    "_layer_norm_backward_kernel": "norm",
    "_group_norm_forward_kernel": "norm",
    "_group_norm_backward_kernel": "norm",
    "_poly_norm_forward_kernel": "norm",
    "_poly_norm_backward_kernel": "norm",
    "_dyt_fwd_kernel": "norm",
    "_dyt_bwd_kernel": "norm",
    "liger_cross_entropy_kernel": "loss",
    "element_mul_kernel": "elementwise",
    "_swiglu_forward_kernel": "elementwise",
    "_swiglu_backward_kernel": "elementwise",
    "_geglu_tanh_forward_kernel": "elementwise",
    "_geglu_tanh_backward_kernel": "elementwise",
    "_triton_rope": "rope",
    "_triton_qwen2vl_mrope": "rope",
    "_llama4_rope_kernel": "rope",
    "_jsd_kernel": "loss",
    "_kldiv_kernel_forward": "loss",
    "_kldiv_kernel_backward": "loss",
    "_tv_distance_kernel": "loss",
    "_selective_log_softmax_kernel": "loss",
    "_grpo_loss_fwd_kernel": "loss",
    "_grpo_loss_bwd_kernel": "loss",
    "_softmax_single_block_forward_kernel": "softmax",
    "_softmax_multi_block_forward_kernel": "softmax",
    "_softmax_single_block_backward_kernel": "softmax",
    "_softmax_multi_block_backward_kernel": "softmax",
    "_sparsemax_forward_kernel": "softmax",
    "_sparsemax_backward_kernel": "softmax",
    "embedding_forward_kernel": "embedding",
    "embedding_backward_kernel": "embedding",
    "_mask_fwd_kernel": "attention",
    "_mask_bwd_kernel": "attention",
    "_neighborhood_mask_kernel": "attention",
}


def decode_liger(k: Draft, sym: str, full: str) -> bool:
    """A bare Triton function name from Liger's list, or one that says ``liger``."""
    name = full.strip()
    if "<" in name or "(" in name or " " in name:
        return False
    op = KERNELS.get(name)
    if op is None and not name.lower().startswith(("liger_", "_liger_")):
        return False
    claim(
        k,
        family="liger",
        library="Liger (Triton)",
        full=name,
        op=op or op_of(snake(name)),
        label=name,
        types=(),
    )
    if "backward" in name or "_bwd" in name:
        k.details["direction"] = "backward"
    elif "forward" in name or "_fwd" in name:
        k.details["direction"] = "forward"
    return True
