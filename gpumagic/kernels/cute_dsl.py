"""Kernels compiled by CUTLASS's Python CuTe DSL, and CUTLASS's own C++ FMHA kernels.

The CuTe DSL names a compiled kernel after the Python function and its module path run together,
then ``_object_at_`` and a digest of its arguments: ``kernel_cutlass_kernel_`` +
``flash_attncuteflash_fwd_sm100`` (module ``flash_attn.cute.flash_fwd_sm100``) +
``FlashAttentionForwardSm100`` (the class) + ``_object_at__tensor...``; a script run as a program
gives ``__main__`` (``kernel_cutlass_kernel___main__PersistentDenseGemmKernel_object_at__...``).
The argument digest spells the element types it was compiled for (``tensorptrbf16gmem...``, or a
copy atom's ``Valuetypef16``); the MMA atom's shape (``ShapeMNK1281288``) names no type, so no
precision is read from it.

FlashAttention 4 is such a kernel (its module path starts ``flash_attncute``); FlashInfer's CuTe DSL
kernels are read by :mod:`.flashinfer`. CUTLASS's C++ FMHA (``cutlass::fmha::kernel::
Sm100FmhaFwdKernelTmaWarpspecialized``, examples 77 and 88) is read here too: it is attention, not
one of the GEMM templates :mod:`.cutlass_device` reads.
"""

from __future__ import annotations

import re

from .flash4 import LIBRARY as FLASH4
from .flashinfer import cute_dsl_types
from .name import Draft, upper
from .precision import alternation, precision_table
from .stack import op_label, op_of, snake

__all__ = ["decode_cute_dsl", "decode_cutlass_fmha"]

_DSL = re.compile(r"^kernel_cutlass_kernel_(?P<body>\w*?)(?:_object_at_(?P<args>\w*))?$")
#: a copy atom's element type in the argument digest (``Valuetypef16``)
_VALUE_CANON = precision_table("bf16", "f16", "f32", "tf32", "f8e4m3fn", "f8e5m2")
_VALUE_TYPE = re.compile(r"Valuetype(" + alternation(_VALUE_CANON) + r")(?=[a-z_]|$)")
#: an architecture the class or module names: Sm100, sm_120, or the generation's name
_ARCH = re.compile(r"(?:[Ss][Mm]_?(1\d\d|90|80)[af]?)|(Hopper|Blackwell|Ampere)")
_GENERATION = {"Hopper": "sm90", "Blackwell": "sm100", "Ampere": "sm80"}
_CLASS = re.compile(r"[A-Z][A-Za-z0-9]*$")


def _dsl_arch(k: Draft, text: str) -> None:
    m = _ARCH.search(text)
    if not m:
        return
    if m.group(1):
        k.set_arch("sm" + m.group(1))
    else:
        k.arch = _GENERATION[m.group(2)]
        k.add(m.group(2), "arch", f"{m.group(2)} kernel ({k.arch})")


def _dsl_types(args: str) -> tuple[str, ...]:
    found = [_VALUE_CANON[t] for t in _VALUE_TYPE.findall(args)]
    return tuple(dict.fromkeys(found)) or cute_dsl_types(args)


def decode_cute_dsl(k: Draft, sym: str, full: str) -> bool:
    """``kernel_cutlass_kernel_<module><Class>_object_at_<digest>``: a CuTe DSL kernel
    (FlashAttention 4's, or a CUTLASS one), its op from the class name, types from the argument
    digest."""
    m = _DSL.match(full.strip())
    if not m or m["body"].startswith("flashinfer"):
        return False
    body, args = m["body"], m["args"] or ""
    cls = _CLASS.search(body)
    name = cls.group(0) if cls else body
    module = body[: len(body) - len(name)] if cls else ""
    k.add("kernel_cutlass_kernel_", "library", "compiled by CUTLASS's CuTe DSL (Python)")
    if body.startswith("flash_attncute"):
        k.identify("flash_attention", FLASH4, "attention", tensor_cores=True)
        direction = "backward" if "bwd" in body.lower() else "forward"
        k.details["direction"] = direction
        k.add(body, "op", f"FlashAttention 4 {direction} ({module or body})")
    else:
        words = snake(name)
        op = "gemm" if "gemm" in words else op_of(words) or "other"
        k.identify("cutlass3", "CUTLASS (CuTe DSL)", op)
        if k.op in ("gemm", "attention"):
            k.tensor_cores = True
        where = "a script run as a program" if module.startswith("__main__") else module
        k.add(name, "op", f"{op_label(k.op)} ({name}, from {where or 'its module'})")
    _dsl_arch(k, body)
    types = _dsl_types(args)
    if types:
        k.precision = types[0]
        k.dtypes = types
        k.add(args[:40], "dtype", f"{', '.join(types)} operands (the argument digest)")
    what = "FlashAttention 4" if k.family == "flash_attention" else "CuTe DSL"
    k.short = " ".join(p for p in (what, op_label(k.op), upper(k.precision), k.arch or "") if p)
    k.details["kernel"] = name
    return True


_FMHA = re.compile(r"cutlass::fmha::kernel::(?P<cls>(?P<arch>Sm\d+)?\w*)")


def decode_cutlass_fmha(k: Draft, sym: str, full: str) -> bool:
    """``cutlass::device_kernel<cutlass::fmha::kernel::Sm100FmhaFwdKernelTmaWarpspecialized<..>>``:
    CUTLASS's Blackwell FMHA (what FlashInfer's and SGLang's CUTLASS attention backends run)."""
    m = _FMHA.search(full)
    if not m:
        return False
    k.identify("cutlass3", "CUTLASS 3.x (FMHA)", "attention", tensor_cores=True)
    cls = m["cls"]
    direction = "backward" if "Bwd" in cls else "forward"
    k.details["direction"] = direction
    k.add(cls, "op", f"CUTLASS fused multi-head attention, {direction}")
    if m["arch"]:
        k.set_arch(m["arch"])
    k.short = f"CUTLASS FMHA {direction}" + (f" {k.arch}" if k.arch else "")
    return True
