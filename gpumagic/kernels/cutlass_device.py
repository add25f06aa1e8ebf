"""CUTLASS 3.x GEMMs as profilers print them when the library that built them did not use CUTLASS's
generator: the C++ template itself, ``cutlass::device_kernel<...GemmUniversal<ProblemShape,
CollectiveMma<Mainloop<stages, cluster, schedule>, tile, ElementA, ...,
TiledMma<MMA_Atom<SM90_64x16x16_F32BF16BF16_SS>>, ...>, epilogue>>``, often inside a wrapper that
names its owner: PyTorch's ``at::cuda::detail::enable_3x_kernel_for_sm9x<...>`` (FP8 row-wise
``_scaled_mm``, ``_grouped_mm``), vLLM's ``vllm::enable_sm90_or_later<...>`` (``cutlass_scaled_mm``,
Machete), TensorRT-LLM's and SGLang's MoE GEMMs.

The template says what the generated names say: the block tile (the first ``cute::tuple<cute::C<M>,
cute::C<N>, cute::C<K>>`` after the mainloop's cluster shape), the pipeline stages and cluster (the
mainloop policy's arguments), the element types, the kernel schedule (cooperative, ping-pong,
pointer-array for grouped GEMMs), FP8 block scaling, and the MMA instruction (``SM90_*`` / ``GMMA``
is Hopper's wgmma, ``SM100_*`` / ``UMMA`` Blackwell's tcgen05). Non-GEMM kernels in
``device_kernel`` (FlashAttention 3, FlashInfer, FlashMLA) belong to their own decoders and are not
claimed here.
"""

from __future__ import annotations

import re

from .name import Draft, add_tile, dims, squash, tensor_core_math, upper
from .precision import precision_table
from .stack import element_types, precision_label, set_types

_GEMM = (
    "GemmUniversal",
    "gemm::kernel::",
    "CollectiveMma<",
    "GemmWithVisitor",
    "DefaultGemm",
    "machete::",
)
_TUPLE3 = re.compile(r"cute::tuple<cute::C<(\d+)l?>, cute::C<(\d+)l?>, cute::C<(\d+)l?> ?>")
_MAINLOOP = re.compile(r"\b(Mainloop\w*)<(\d+)(?:u|l)?, ")
_MMA = re.compile(
    r"\b(SM\d+)_(\d+x\d+x\d+)_(\w+?)_(?:SS|RS|TN|NT)\w*|\bMMA_(\d+x\d+x\d+)_(\w+?)_(?:SS|RS)\w*"
)
_OWNERS = (
    ("at::cuda::detail::", "PyTorch"),
    ("at::native::", "PyTorch"),
    ("vllm::", "vLLM"),
    ("machete::", "vLLM"),
    ("tensorrt_llm::", "TensorRT-LLM"),
    ("EpilogueMoeFusedFinalize", "TensorRT-LLM"),
    ("sglang::", "SGLang"),
    ("flashinfer::", "FlashInfer"),
    ("torchao::", "torchao"),
    ("deep_gemm::", "DeepGEMM"),
)
_SCHEDULES = (
    "PtrArrayTmaWarpSpecializedCooperative",
    "PtrArrayTmaWarpSpecializedPingpong",
    "TmaWarpSpecializedCooperative",
    "TmaWarpSpecializedPingpong",
    "TmaWarpSpecialized",
    "Sm100",
    "KernelMultistage",
    "Multistage",
)


_MANGLED_MMA = re.compile(r"MMA_(\d+x\d+x\d+)_F32([A-Z0-9]+?)_(?:SS|RS)")
#: the MMA atom's A and B types, spelled together in capitals (``F32BF16BF16``: BF16 in, FP32 out)
_MMA_INPUT = {
    spelled.upper() * 2: canon
    for spelled, canon in precision_table("bf16", "f16", "e4m3", "e5m2", "tf32").items()
}


def _mangled(k: Draft, full: str) -> bool:
    """A CUTLASS 3.x GEMM whose mangled name does not demangle (profilers and tables sometimes cut
    or alter them): the identifiers in it still say GEMM, grouped, the architecture and the MMA's
    input type."""
    if "GemmUniversal" not in full[:200]:
        return False
    k.identify("cutlass3", "CUTLASS 3.x", "gemm", tensor_cores=True)
    k.details["not_demangled"] = (
        "the mangled name does not demangle; read from the identifiers in it"
    )
    k.add(
        "_ZN7cutlass13device_kernel",
        "library",
        "CUTLASS 3.x GEMM template (mangled; not demangled)",
    )
    arch = re.search(r"(?:MainloopSm|arch4Sm|SM)(\d{2,3})", full)
    if arch:
        k.set_arch(f"sm{arch.group(1)}")
    mma = _MANGLED_MMA.search(full)
    k.math = tensor_core_math(k.arch)
    if mma and mma.group(2) in _MMA_INPUT:
        k.precision = _MMA_INPUT[mma.group(2)]
        k.dtypes = (k.precision,)
        k.details["mma_shape"] = dims(mma.group(1))
        k.add(mma.group(0), "math", f"MMA instruction {dims(mma.group(1))}, {k.precision} inputs")
    ml = re.search(r"Mainloop\w*?ILi(\d+)E", full[:2000])
    if ml:
        k.stages = int(ml.group(1))
    if "GroupProblemShape" in full or "PtrArray" in full:
        k.details["grouped"] = "grouped GEMM (one problem per group / expert)"
    if "EpilogueMoeFusedFinalize" in full:
        k.library = "CUTLASS 3.x (in TensorRT-LLM)"
    grouped = " grouped" if "grouped" in k.details else ""
    k.short = squash(f"CUTLASS 3 {upper(k.precision)}{grouped} GEMM (mangled)")
    return True


_WRAPPERS = (
    "void cutlass::device_kernel<",
    "cutlass::device_kernel<",
    "void cutlass::Kernel2<",
    "cutlass::Kernel2<",
    "void cutlass::Kernel<",
    "cutlass::Kernel<",
)


def decode_cutlass_device(k: Draft, sym: str, full: str) -> bool:
    """A CUTLASS 3.x GEMM template inside ``cutlass::device_kernel<...>`` (or a mangled one that
    does not demangle): owner, architecture and MMA, the mainloop's stages, cluster and tile, the
    element types, then grouping, schedule and scaling."""
    if full.startswith("_ZN7cutlass13device_kernel"):
        return _mangled(k, full)
    if not full.startswith(_WRAPPERS):
        return False
    head = full[:600]
    if (
        not any(g in full for g in _GEMM)
        or "flash::" in head
        or "FlashAttn" in head
        or "fmha" in head.lower()
    ):
        return False
    owner = next((who for key, who in _OWNERS if key in full), None)
    library = "CUTLASS 3.x" + (f" (in {owner})" if owner else "")
    k.identify("cutlass3", library, "gemm", tensor_cores=True)
    k.add(
        "cutlass::device_kernel",
        "library",
        "CUTLASS 3.x GEMM template" + (f", built by {owner}" if owner else ""),
    )
    _arch_and_mma(k, full)
    start = full.find("CollectiveMma<")
    body = full[start:] if start >= 0 else full
    _mainloop(k, body)
    set_types(k, element_types(body[:4000]), "gemm")
    grouped = _features(k, full)
    what = "grouped GEMM" if grouped else "GEMM"
    prec = precision_label(k)
    scaling = f" ({k.details['scaling']} scaled)" if "scaling" in k.details else ""
    k.short = squash(f"CUTLASS 3 {prec} {what}{scaling}") + (f" {dims(k.tile)}" if k.tile else "")
    return True


def _arch_and_mma(k: Draft, full: str) -> None:
    """The architecture the wrapper or mainloop names, and the MMA atom: ``SM90_*`` / GMMA is
    Hopper's wgmma, ``SM100_*`` Blackwell's tcgen05."""
    arch = re.search(
        r"(?:enable_(?:3x_kernel_for_)?sm|arch::Sm|MainloopSm|KernelTmaWarpSpecializedSm)(\d{2,3})",
        full,
    )
    if arch:
        k.set_arch(f"sm{arch.group(1)[:3] if arch.group(1).startswith('1') else arch.group(1)[:2]}")
    mma = _MMA.search(full)
    if mma:
        shape = mma.group(2) or mma.group(4)
        k.details["mma_shape"] = dims(shape)
        k.math = (
            "tensor cores (tcgen05)"
            if (mma.group(1) or "").startswith("SM100")
            else "tensor cores (wgmma)"
        )
        k.add(mma.group(0), "math", f"MMA instruction {dims(shape)}")
    else:
        k.math = tensor_core_math(k.arch)


def _mainloop(k: Draft, body: str) -> None:
    """``Mainloop<stages, cluster, schedule>, tile``: the pipeline stages, then the first
    ``cute::tuple`` the cluster shape and the second the block tile (only the tile where the
    mainloop names no cluster)."""
    ml = _MAINLOOP.search(body)
    if ml:
        k.details["mainloop"] = ml.group(1)
        if ml.group(2) != "0":
            k.stages = int(ml.group(2))
            k.add(f"{ml.group(1)}<{ml.group(2)}", "stages", f"{ml.group(2)}-stage pipeline")
    tuples = [m for m, _ in zip(_TUPLE3.finditer(body), range(2))]
    if ml and len(tuples) == 2:  # Mainloop<stages, cluster, schedule>, tile
        k.cluster = "x".join(tuples[0].groups())
        k.add(tuples[0].group(0), "cluster", f"thread-block cluster {dims(k.cluster)}")
        add_tile(k, "x".join(tuples[1].groups()), tuples[1].group(0))
    elif tuples:
        add_tile(k, "x".join(tuples[0].groups()), tuples[0].group(0))


def _features(k: Draft, full: str) -> bool:
    """Grouping (one problem per expert), the kernel schedule, FP8 block or row-wise scaling and
    Machete; returns whether the GEMM is grouped."""
    grouped = "GroupProblemShape" in full or "PtrArray" in full or "ArrayTma" in full
    if grouped:
        what = "grouped GEMM (one problem per group / expert)"
        k.details["grouped"] = what
        k.add("GroupProblemShape", "grouped", what)
    sched = next((s for s in _SCHEDULES if s in full), None)
    if sched:
        k.details["schedule"] = sched
    if re.search(r"BlockScal|Blockwise|GroupwiseScal|blockwise", full):
        k.details["scaling"] = "blockwise"
    elif "RowBroadcast" in full and "ColBroadcast" in full:
        k.details["scaling"] = "rowwise"
    if "machete" in full:
        k.details["kernel"] = "Machete (mixed-input GEMM)"
    return grouped
