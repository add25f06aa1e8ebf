"""FlashMLA (deepseek-ai/FlashMLA): multi-head latent attention decode kernels.

``flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8,
cutlass::bfloat16_t, 512>, ...>`` computes split-KV partial attention over the paged latent cache
(head dim 576 = 512 latent + 64 RoPE dims, on tensor cores); ``flash_fwd_mla_combine_kernel`` merges
the partial results; ``get_mla_metadata_kernel`` plans the splits. Newer releases put them in
``sm90::`` / ``sm100::`` namespaces and add FP8 and sparse variants
(``flash_fwd_splitkv_mla_fp8_sparse_kernel``). They are told from FlashAttention's kernels, whose
names they share in part, by ``mla`` in the kernel's own name.
"""

from __future__ import annotations

import re

from .name import Draft, squash, upper
from .spelling import signature
from .stack import claim, element_types

_TRAITS = re.compile(r"Flash_fwd_kernel_traits_mla<(\d+), (\d+), (\d+), (\d+)")


def decode_flashmla(k: Draft, sym: str, full: str) -> bool:
    """FlashMLA's kernels: split-KV MLA decode attention, its combine step and the metadata
    planner."""
    if "mla" not in full:
        return False
    path, leaf, args = signature(full)
    name = leaf or full.split("(")[0].strip()
    if not (
        ("flash" in name and "mla" in name)
        or name.startswith("get_mla_metadata")
        or "FlashMLA" in path
    ):
        return False
    if path.startswith(("vllm::", "flashinfer::", "tensorrt_llm::")):
        return False
    combine = "combine" in name
    metadata = "metadata" in name
    claim(
        k,
        family="flashmla",
        library="FlashMLA",
        full=full,
        op="attention" if not metadata else "other",
        tensor_cores=None if combine or metadata else True,
        label=name,
        types=element_types(args),
    )
    if "fp8" in name:
        k.precision = "fp8e4m3"
        k.dtypes = tuple(dict.fromkeys(("fp8e4m3", *k.dtypes)))
    if "sparse" in name:
        k.details["sparse"] = True
    arch = re.match(r"(sm\d+)::", path)
    if arch:
        k.set_arch(arch.group(1))
    tm = _TRAITS.search(args)
    if tm:
        k.details["head_dim"] = int(tm.group(1))
        k.tile = f"{tm.group(2)}x{tm.group(3)}"
        k.warps = tm.group(4)
        k.add(
            tm.group(0),
            "traits",
            f"head dim {tm.group(1)}, block {tm.group(2)}×{tm.group(3)}, {tm.group(4)} warps",
        )
    what = (
        "split-KV combine"
        if combine
        else "scheduling metadata"
        if metadata
        else "MLA decode attention"
    )
    k.short = squash(f"FlashMLA {upper(k.precision)} {what}")
    return True
