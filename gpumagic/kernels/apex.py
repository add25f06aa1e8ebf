"""NVIDIA Apex's kernels: fused layer / RMS norm (``cuApplyLayerNorm<...>``, ``cuApplyRMSNorm``,
``cuComputeGradInput``, ``cuComputePartGradGammaBeta``), its multi-tensor optimizers, which share
the name ``multi_tensor_apply_kernel`` with PyTorch's but outside ``at::native``
(``multi_tensor_apply_kernel<TensorListMetadata <4>, AdamFunctor<float, float>, ...>``), Megatron's
scaled (masked) softmax, and SyncBatchNorm's Welford kernels.

Apex's contrib FastLayerNorm (``apex/contrib/csrc/layer_norm/ln_{fwd,bwd}_kernels.cuh``) names its
kernels in namespace ``layer_norm``: ``layer_norm::ln_fwd_kernel<layer_norm::Kernel_traits<...>>``,
``ln_bwd_kernel``, ``ln_bwd_finalize_kernel`` (seen in DeepSeek's published training profile,
deepseek-ai/profile-data ``train.json``); the hidden size is the traits' first number.
"""

from __future__ import annotations

import re

from .name import Draft
from .spelling import signature
from .stack import claim, element_types, snake

_NORM = (
    "cuApplyLayerNorm",
    "cuApplyRMSNorm",
    "cuComputeGradInput",
    "cuComputeGradInputRMS",
    "cuComputePartGradGammaBeta",
    "cuComputeGradGammaBeta",
    "cuComputePartGradGamma",
    "cuComputeGradGamma",
    "cuWelfordMuSigma2",
)
_SOFTMAX = (
    "scaled_masked_softmax_warp_forward",
    "scaled_masked_softmax_warp_backward",
    "scaled_upper_triang_masked_softmax_warp_forward",
    "scaled_upper_triang_masked_softmax_warp_backward",
    "scaled_softmax_warp_forward",
    "scaled_softmax_warp_backward",
)
_BN = (
    "welford_kernel",
    "welford_kernel_c_last",
    "batchnorm_forward_kernel",
    "batchnorm_forward_c_last_kernel",
    "reduce_bn_kernel",
    "batchnorm_backward_kernel",
    "reduce_bn_c_last_kernel",
)
_FUNCTOR = re.compile(r"(?<![\w:])(\w+?)Functor<")
_OPTIMIZERS = ("Adam", "LAMB", "SGD", "Novo", "Adagrad", "Lion", "DistAdam", "DistOpt", "Lamb")


_FAST_LN = ("ln_fwd_kernel", "ln_bwd_kernel", "ln_bwd_finalize_kernel")


def decode_apex(k: Draft, sym: str, full: str) -> bool:
    """Apex's kernels: FastLayerNorm, its fused norms, its multi-tensor optimizers (told from
    PyTorch's by namespace), Megatron's scaled softmax and SyncBatchNorm's Welford kernels."""
    path, leaf, args = signature(full)
    if path.startswith("layer_norm::") and leaf in _FAST_LN:
        claim(k, family="apex", library="Apex (FastLayerNorm)", full=full, op="norm", label=leaf)
        k.details["direction"] = "forward" if "fwd" in leaf else "backward"
        return True
    ns = "apex::" in path
    if leaf == "multi_tensor_apply_kernel" and path == leaf:  # PyTorch's own is at::native::...
        fm = _FUNCTOR.search(args)
        functor = fm.group(1) if fm else ""
        apply_op = "optimizer" if functor.startswith(_OPTIMIZERS) else "foreach"
        claim(
            k,
            family="apex",
            library="Apex",
            full=full,
            op=apply_op,
            label=f"multi-tensor {functor or 'apply'}",
            types=element_types(args[fm.end() :] if fm else args),
        )
        k.details["functor"] = functor
        return True
    if not (
        ns
        or leaf in _NORM
        or leaf in _BN
        or (leaf in _SOFTMAX and "transformer_engine" not in full)
    ):
        return False
    if path != leaf and not ns and "(anonymous namespace)" not in path:
        return False
    op = "norm" if leaf in _NORM or leaf in _BN else "softmax" if leaf in _SOFTMAX else None
    claim(k, family="apex", library="Apex", full=full, op=op, words=snake(leaf), label=leaf)
    return True
