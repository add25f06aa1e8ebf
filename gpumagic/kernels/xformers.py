"""xFormers' attention kernels: its CUTLASS memory-efficient attention
(``fmha_cutlassF_bf16_aligned_64x128_rf_sm80 (AttentionKernel<...>::Params)``, backward
``fmha_cutlassB_...``), generated under the same names as PyTorch's copy but outside PyTorch's
``PyTorchMemEffAttention`` namespace, and its Triton split-K decoding kernels
(``_fwd_kernel_splitK``, ``_splitK_reduce``).
"""

from __future__ import annotations

from .cudnn import _mem_efficient
from .name import Draft, squash, upper
from .stack import claim

TRITON = {
    "_fwd_kernel_splitK": "attention",
    "_splitK_reduce": "attention",
    "_fwd_kernel_splitK_autotune": "attention",
}


def decode_xformers(k: Draft, sym: str, full: str) -> bool:
    """xFormers' kernels: its Triton split-K decoding, its ``xformers::`` kernels, and its copy of
    the CUTLASS memory-efficient attention (outside PyTorch's namespace)."""
    name = full.strip()
    if name in TRITON or name.startswith("_fwd_kernel_splitK"):
        claim(
            k,
            family="xformers",
            library="xFormers (Triton)",
            full=name,
            op="attention",
            label=name,
            types=(),
            tensor_cores=True,
        )
        return True
    if (
        not name.startswith("fmha_cutlass")
        or "PyTorchMemEffAttention" in name
        or "pytorch" in name.lower()
    ):
        if "xformers::" not in full:
            return False
        claim(k, family="xformers", library="xFormers", full=full, label=None)
        return True
    k.family, k.op, k.tensor_cores, k.math = "xformers", "attention", True, "tensor cores (mma)"
    _mem_efficient(k, name.split("(")[0])
    k.library = "xFormers (CUTLASS memory-efficient attention)"
    k.short = squash(f"attention {k.details.get('direction', '')} (xFormers) {upper(k.precision)}")
    return True
