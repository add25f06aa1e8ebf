"""Mamba's kernels (state-spaces/mamba, Dao-AILab/causal-conv1d, and their copies in vLLM / SGLang):
the selective scan (``selective_scan_fwd_kernel<Selective_Scan_fwd_kernel_traits<32, 16, 1, true,
..., c10::BFloat16, float>>``), the short causal convolution
(``causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, ...>>``,
``causal_conv1d_channellast_fwd_kernel``, ``causal_conv1d_update_kernel``) and Mamba-2's Triton SSD
kernels (``_chunk_scan_fwd_kernel``, ``_chunk_state_fwd_kernel``, ``_state_passing_fwd_kernel``,
``_chunk_cumsum_fwd_kernel``, ``_bmm_chunk_fwd_kernel``, ``_selective_scan_update_kernel``,
``_layer_norm_fwd_1pass_kernel``). The CUDA kernels name their input type first among the traits'
types.
"""

from __future__ import annotations

from .name import Draft
from .spelling import signature
from .stack import claim, claim_listed, element_types

_CUDA = ("selective_scan_", "causal_conv1d_")
#: Mamba-2's Triton kernels (mamba_ssm/ops/triton) and their op
TRITON = {
    "_chunk_scan_fwd_kernel": "scan",
    "_chunk_scan_bwd_dx_kernel": "scan",
    "_chunk_scan_bwd_dz_kernel": "scan",
    "_chunk_scan_bwd_dstates_kernel": "scan",
    "_chunk_scan_chunk_state_bwd_dx_kernel": "scan",
    "_chunk_state_fwd_kernel": "scan",
    "_chunk_state_bwd_dx_kernel": "scan",
    "_chunk_state_varlen_kernel": "scan",
    "_state_passing_fwd_kernel": "scan",
    "_state_passing_bwd_kernel": "scan",
    "_chunk_cumsum_fwd_kernel": "scan",
    "_chunk_cumsum_bwd_kernel": "scan",
    "_bmm_chunk_fwd_kernel": "gemm",
    "_bmm_chunk_bwd_kernel": "gemm",
    "_selective_scan_update_kernel": "scan",
    "_layer_norm_fwd_1pass_kernel": "norm",
    "_layer_norm_bwd_kernel": "norm",
    "_causal_conv1d_fwd_kernel": "conv",
    "_causal_conv1d_update_kernel": "conv",
}


def decode_mamba(k: Draft, sym: str, full: str) -> bool:
    """Mamba-2's Triton kernels by their function names, and the CUDA selective-scan and
    causal-conv1d kernels, global functions with their input type among the traits' types."""
    name = full.strip()
    if name in TRITON:
        conv = "conv1d" in name
        library = "Mamba (causal-conv1d, Triton)" if conv else "Mamba (Triton)"
        claim_listed(
            k, name, name, family="mamba", library=library, ops=TRITON, mma_op="gemm", types=()
        )
        return True
    if "selective_scan" not in full and "causal_conv1d" not in full:
        return False
    path, leaf, args = signature(full)
    if not leaf.startswith(_CUDA) or "::" in path.replace("(anonymous namespace)::", ""):
        return False
    conv = leaf.startswith("causal_conv1d")
    claim(
        k,
        family="mamba",
        library="Mamba (causal-conv1d)" if conv else "Mamba",
        full=full,
        op="conv" if conv else "scan",
        label=leaf,
        types=element_types(args),
    )
    k.details["direction"] = "backward" if "bwd" in leaf else "forward"
    if "update" in leaf:
        k.details["phase"] = "decode (state update)"
    return True
