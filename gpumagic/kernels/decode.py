"""``decode()``: one kernel name in, a frozen ``KernelName`` out; never raises.

Decoders are tried in order and the first that recognises the name wins. The order encodes which
reading is more specific: memory operations, NCCL and Triton names are unmistakable and cheap to
test, so they go first; then the LLM stack's libraries (vLLM, SGLang, FlashInfer, TensorRT-LLM,
FlashMLA, DeepGEMM, DeepEP, Transformer Engine, Liger, Mamba, xFormers, bitsandbytes, Apex,
torchao), which claim only their own namespaces and kernel names, before the generic readings those
names would otherwise get (ATen for anything naming ``c10::`` types, FlashAttention for ``fmha_*``
and ``flash_*mla`` names), and CUTLASS 3.x GEMM templates (``cutlass::device_kernel<...GemmUniversal
...>``) that no library claimed; generated GEMM names before the libraries that ship them (a CUTLASS
kernel inside cuBLAS is read as CUTLASS); ATen before the math libraries, whose helper-kernel names
are the most generic and so are tried last, cuBLAS's before cuSOLVER's because cuSOLVER's routines
launch cuBLAS kernels (TRSM, batched getrf) that must keep their owner's name.

A trace also knows how each kernel was launched. ``decode(name, launch=...)`` takes that as a
hint: a kernel launched through the driver API (``cuLaunchKernel``, ``hipModuleLaunchKernel``) with
a bare identifier for a name, that no decoder claims, is a user ``@triton.jit`` kernel (vLLM's,
SGLang's, flash-linear-attention's own), named after its Python function; without the hint such a
name stays ``other``, as a CUDA C++ kernel could have it too.

Names no decoder recognises keep their full text (``name``, ``demangled``) and get a ``short`` of at
most :data:`SHORT_MAX` characters: the function's name where the text parses as a signature, else
the text cut with an ellipsis; a mangled name that cannot be demangled (a profiler cut it off) is
read from its readable pieces (:func:`spelling.mangled_outline`) and decoded from those.

Results are cached (a trace holds a few hundred distinct names many thousand times) and shared,
hence frozen.

Decoding takes time linear in a name's length (no regular expression here or in ``spelling``
backtracks), and as a second line of defence a name longer than :data:`MAX_PARSED` characters, raw
or demangled, is not parsed at all: it decodes to family ``other`` with its full text kept
(``name``, ``demangled``) and ``details["not_parsed"]`` saying why. The longest real kernel names
seen (CUTLASS 3.x / CuTe templates) are about 5,000 characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from .aiter import decode_aiter
from .apex import decode_apex
from .aten import decode_aten
from .bitsandbytes import decode_bitsandbytes
from .cublas import decode_nvjet, decode_xmma
from .cublas_legacy import decode_arch_prefixed, decode_helper
from .cudnn import decode_cudnn, decode_flash
from .cufft import decode_cufft
from .cusolver import decode_cusolver
from .cusparse import decode_cusparse
from .cute_dsl import decode_cute_dsl, decode_cutlass_fmha
from .cutlass import decode_cutlass2, decode_cutlass3
from .cutlass_device import decode_cutlass_device
from .deepep import decode_deepep
from .deepgemm import decode_deepgemm
from .deepseek import decode_deepseek
from .flash4 import decode_flash4
from .flashinfer import decode_flashinfer
from .flashmla import decode_flashmla
from .ggml import decode_ggml
from .libraries import (
    decode_memop,
    decode_nccl,
    decode_profiler_range,
    decode_triton,
    decode_user_triton,
    is_driver_launch,
)
from .liger import decode_liger
from .magma import decode_magma
from .mamba import decode_mamba
from .miopen import decode_miopen
from .name import Draft, KernelName
from .nvfuser import decode_nvfuser
from .rocm import decode_ck, decode_rccl, decode_rocblas, decode_rocclr
from .sglang import decode_sglang
from .spelling import demangle, kernel_symbol, mangled_outline, normalize, signature
from .tensile import decode_tensile
from .torchao import decode_torchao
from .transformer_engine import decode_transformer_engine
from .trtllm import decode_trtllm
from .vllm import decode_vllm
from .xformers import decode_xformers

Decoder = Callable[[Draft, str, str], bool]
"""(draft, bare symbol, full normalised name) -> whether it recognised the name; it fills the draft
only then."""

DECODERS: tuple[Decoder, ...] = (
    decode_memop,
    decode_rocclr,
    decode_profiler_range,
    decode_nccl,
    decode_rccl,
    decode_triton,
    # AMD's GEMM names (Tensile) are unmistakable and cheap to test
    decode_tensile,
    # engines and code generators whose names are their own: llama.cpp's, nvFuser's, FA4's
    decode_ggml,
    decode_nvfuser,
    decode_flash4,
    decode_cute_dsl,
    decode_cutlass_fmha,
    decode_aiter,
    # the LLM stack's libraries: their own namespaces and kernel names, before the generic readings
    # they would otherwise fall to (ATen for anything naming c10:: types, FlashAttention for fmha_*
    # and flash_*mla names)
    decode_trtllm,
    decode_flashmla,
    decode_flashinfer,
    decode_deepgemm,
    decode_deepep,
    decode_deepseek,
    decode_vllm,
    decode_sglang,
    decode_transformer_engine,
    decode_liger,
    decode_mamba,
    decode_xformers,
    decode_bitsandbytes,
    decode_apex,
    decode_torchao,
    decode_ck,
    decode_cutlass_device,
    decode_cutlass3,
    decode_xmma,
    decode_nvjet,
    decode_cutlass2,
    decode_arch_prefixed,
    decode_flash,
    decode_cudnn,
    decode_aten,
    decode_miopen,
    decode_rocblas,
    decode_cufft,
    decode_helper,
    decode_cusolver,
    decode_cusparse,
    decode_magma,
)


#: Names longer than this many characters (raw, or once demangled) are kept whole but not parsed.
MAX_PARSED = 32_768
#: The longest ``short`` an undecoded (or cut-off) name gets; the full text stays in ``name``.
SHORT_MAX = 80


def bounded(text: str, limit: int = SHORT_MAX) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis where it was longer."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def _readable(full: str) -> str:
    """A short, readable label for a name no decoder knows: the function's name (its template
    arguments elided) where the text parses as a signature, else the text itself; bounded."""
    path, leaf, args = signature(full)
    if path and leaf:
        return bounded(leaf + ("<\u2026>" if args and len(leaf) < SHORT_MAX - 3 else ""))
    return bounded(full.strip())


def _not_parsed(raw: str, demangled: str) -> KernelName:
    why = f"a {len(demangled):,}-character name; names over {MAX_PARSED:,} are not parsed"
    return KernelName(
        name=raw,
        demangled=demangled,
        short=raw[:80],
        details={"not_parsed": why},
        tokens=((raw[:80] + "\u2026", "name", f"not parsed: {why}"),),
    )


#: How a table or a note marks a name it cut: an ellipsis at the end, or in the middle between two
#: of the name's ``_``-separated words (``..._tensorop_h256x256x16gemm_..._256x256x64``).
_ELLIPSIS = ("...", "\u2026")
_ELIDED = re.compile(r"_(?:\.\.\.|\u2026)_")


def uncut(full: str) -> tuple[str, str]:
    """``full`` without the marks of a cut (a trailing ellipsis, an elided middle), and what was
    cut ('end', 'middle', 'middle and end', or '' for a whole name). A C++ parameter list elided as
    ``(...)`` is the name's own spelling, not a cut. Linear: one scan and a suffix test."""
    where = []
    if _ELIDED.search(full):
        full = _ELIDED.sub("_", full)
        where.append("middle")
    stripped = full.rstrip()
    for mark in _ELLIPSIS:
        if stripped.endswith(mark) and not stripped.endswith("(" + mark):
            full = stripped[: -len(mark)].rstrip("_ ,<(")
            where.append("end")
            break
    return full, " and ".join(where)


def _mark_cut(k: Draft, where: str) -> None:
    """Say that the name was cut off and that what survives is what was decoded."""
    k.details["cut_off"] = f"the name is cut off ({where}): what survives is decoded"
    k.add("\u2026", "cut off", f"the profiler or the table cut the name ({where})")
    if k.short and "(cut off)" not in k.short:
        k.short = bounded(k.short + " (cut off)")


def _run(raw: str, full: str, launch: str | None) -> Draft:
    """The decoders over one normalised name, first claim wins; the launch hint last."""
    k = Draft(raw, full)
    sym = kernel_symbol(full)
    for dec in DECODERS:
        if dec(k, sym, full):
            break
    else:
        if not (is_driver_launch(launch) and decode_user_triton(k, full)):
            k.short = _readable(full)
    return k


@lru_cache(maxsize=65536)
def decode(name: str, launch: str | None = None) -> KernelName:
    """Decode a kernel name as a profiler reports it. Never raises; unknown names get family
    'other'.

    ``launch``, optional: the API call that launched the kernel, as the trace records it
    (``cudaLaunchKernel``, ``cuLaunchKernel``, ``hipModuleLaunchKernel``, ...; or ``"driver"``). A
    driver-API launch of a name no decoder knows that is a bare identifier decodes as a user
    ``@triton.jit`` kernel; any other launch changes nothing."""
    raw = name if isinstance(name, str) else str(name)
    if len(raw) > MAX_PARSED:
        return _not_parsed(raw, raw)
    try:
        stripped = raw.strip()
        demangled = demangle(stripped)
        if len(demangled) > MAX_PARSED:  # a short mangled name can expand a great deal
            return _not_parsed(raw, demangled)
        full, cut = uncut(normalize(demangled))
        k = _run(raw, full, launch)
        if cut:
            _mark_cut(k, cut)
        if demangled == stripped and stripped.startswith("_Z") and not k.library:
            # a mangled name no decoder read as it is: decode its readable pieces instead
            outline = mangled_outline(stripped)
            if outline:
                k = _run(raw, normalize(outline), launch)
                k.details["not_demangled"] = (
                    "a mangled name that does not demangle (cut off by the profiler?): "
                    "read from its readable pieces"
                )
                if not k.library:
                    k.short = bounded(outline + " (cut off)")
        k.short = re.sub(r"\s+", " ", k.short).strip() or bounded(full)
        return k.freeze()
    except Exception as exc:  # noqa: BLE001 - a decoder bug must never break a profile
        return KernelName(
            name=raw, demangled=raw, short=bounded(raw), details={"decode_error": repr(exc)}
        )
