"""What each spelling of an element type in a kernel name means: one map for every library, and
the per-library tables built from it.

The same type reaches the decoders spelled many ways: ``f16`` in a generated GEMM's name, ``half``
in cuFFT's, ``__half`` in a CUDA template, ``c10::Half`` in PyTorch's, ``Fp16`` in trtllm-gen's.
The meaning of each spelling lives here once; a library's module lists which spellings are its own
(:func:`precision_table`), with aliases for the few that mean something else to it alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

#: Every spelling of an element type that means the same whichever library's kernel name holds it,
#: grouped by the canonical name it stands for: the short codes of generated names (``f16``,
#: ``e4m3``, ``s8``), C and CUDA types (``float``, ``__half``, ``__nv_fp8_e4m3``), PyTorch's and
#: CUTLASS's (``c10::BFloat16``, ``cutlass::float_e2m1_t``). A spelling that means different
#: things to different libraries is not here but in the library's own table (:func:`precision_table`
#: ``aliases``): ``fp8`` is E4M3 to FlashAttention, XQA, aiter and MIOpen, an FP8 of unnamed format
#: in cuDNN's and CUTLASS's names; ``float2`` is a complex number to the math libraries.
_SPELLED: dict[str, tuple[str, ...]] = {
    "fp64": ("fp64", "f64", "double"),
    "fp32": ("fp32", "f32", "float", "float32"),
    "tf32": ("tf32", "cutlass::tfloat32_t"),
    "fp16": (
        "fp16",
        "f16",
        "half",
        "float16",
        "_Float16",
        "__half",
        "__half2",
        "half2",
        "nv_half",
        "c10::Half",
        "at::Half",
        "cutlass::half_t",
    ),
    "bf16": (
        "bf16",
        "bfloat16",
        "__nv_bfloat16",
        "__nv_bfloat162",
        "nv_bfloat16",
        "nv_bfloat162",
        "c10::BFloat16",
        "at::BFloat16",
        "cutlass::bfloat16_t",
    ),
    "fp8e4m3": (
        "fp8e4m3",
        "e4m3",
        "f8e4m3",
        "f8e4m3fn",
        "__nv_fp8_e4m3",
        "__nv_fp8x2_e4m3",
        "__nv_fp8x4_e4m3",
        "c10::Float8_e4m3fn",
        "c10::Float8_e4m3fnuz",
        "cutlass::float_e4m3_t",
    ),
    "fp8e5m2": (
        "fp8e5m2",
        "e5m2",
        "f8e5m2",
        "__nv_fp8_e5m2",
        "c10::Float8_e5m2",
        "cutlass::float_e5m2_t",
    ),
    "fp4e2m1": (
        "e2m1",
        "f4e2m1fn",
        "__nv_fp4_e2m1",
        "__nv_fp4x2_e2m1",
        "__nv_fp4x4_e2m1",
        "c10::Float4_e2m1fn_x2",
        "cutlass::float_e2m1_t",
        "cutlass::nv_float4_t",
        "cutlass::mx_float4_t",
        "cutlass::type_erased_dynamic_float4_t",
    ),
    "ue8m0": ("ue8m0", "cutlass::float_ue8m0_t"),
    "ue4m3": ("cutlass::float_ue4m3_t",),
    "mxfp8": ("mxfp8",),
    "mxfp4": ("mxfp4",),
    "nvfp4": ("nvfp4",),
    "nf4": ("nf4",),
    "int4": ("int4", "s4", "cutlass::int4b_t"),
    "uint4": ("uint4", "u4", "cutlass::uint4b_t"),
    "uint2": ("cutlass::uint2b_t",),
    "int8": ("int8", "s8", "i8", "int8_t", "signed char"),
    "uint8": ("uint8", "u8", "uint8_t", "unsigned char"),
    "int16": ("int16", "short"),
    "int32": ("int32", "s32", "i32", "int32_t", "int"),
    "uint32": ("uint32", "u32", "uint32_t", "unsigned int"),
    "int64": ("int64", "i64", "int64_t", "long"),
    "uint64": ("uint64", "u64", "uint64_t", "unsigned long"),
    "bool": ("bool",),
    "complex64": ("cf32", "c10::complex<float>"),
    "complex128": ("cf64",),
}
#: spelling -> canonical element type, for every spelling in :data:`_SPELLED`
PRECISION_SPELLINGS: dict[str, str] = {
    spelled: canon for canon, spellings in _SPELLED.items() for spelled in spellings
}


def precision_table(*spellings: str, aliases: Mapping[str, str] | None = None) -> dict[str, str]:
    """One library's spellings of element types -> their canonical names: each of ``spellings`` as
    :data:`PRECISION_SPELLINGS` reads it (a short code matched whatever its case: trtllm-gen's
    ``E4m3``, llama.cpp's ``BF16``), then ``aliases``, what only this library means by a spelling.

    Each library keeps its own table rather than the shared map because the table is also its
    vocabulary: ``token in table`` tells the library's type tokens from its other words, so it
    holds exactly the spellings given. A spelling the shared map does not know fails at import."""
    table = {s: PRECISION_SPELLINGS.get(s) or PRECISION_SPELLINGS[s.lower()] for s in spellings}
    table.update(aliases or {})
    return table


def alternation(spellings: Iterable[str]) -> str:
    """A regular-expression alternation of ``spellings`` (escaped), longest first: a spelling that
    begins another (``f8e4m3`` in ``f8e4m3fn``) never cuts the longer one short. Lets a decoder's
    pattern for its type tokens be built from its table, so the two cannot drift apart."""
    return "|".join(re.escape(s) for s in sorted(spellings, key=len, reverse=True))
