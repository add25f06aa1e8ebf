"""cuBLAS's older kernels: architecture-prefixed GEMMs (``ampere_sgemm_128x64_nn``,
``volta_h884gemm_64x64_ldg8_nn``) and the hand-written helper kernels behind GEMV, dot, norms, small
or skinny GEMMs, TRSM and split-K reductions.

The prefixed names follow one grammar, read here token by token:
``{arch}_[{in}_]{s|h|d|c|z|i}[MMA]gemm_[{in}_]
{M}x{N}[_sliced{a}x{b}][_ldg{n}][_relu][_f2f][_stages_{K}x{S}][_lower|_upper]_{layout}`` (taken from
the kernel names in libcublasLt 13 and public nvprof / nsys / torch.profiler tables).

The helper kernels carry no architecture or tile, only a routine name (``gemv2T_kernel_val``,
``dot_kernel``) and C++ template arguments. A bare routine name says too little to name its library,
since any project may have a ``dot_kernel``; profilers report the full signature, whose template
arguments and ``cublas*Params`` parameter types do. So helpers decode only from a signature, and the
most generic names only when the signature mentions cuBLAS.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .name import (
    ARCH_NAMES,
    MN_TOKEN,
    PREFIX,
    Draft,
    add_ktile_stages,
    add_layout,
    add_tile,
    dims,
    geometry,
    mma_dims,
    mma_precision,
    squash,
    upper,
)
from .precision import precision_table
from .spelling import signature, value_types

_LEGACY = re.compile(r"^(?P<arch>" + "|".join(ARCH_NAMES) + r")_(?P<body>.*)$")
#: cuDNN's kernels from before the architecture led the name (seen on a T4):
#: ``scudnn_128x32_relu_small_nn_v1`` reads as its arch-prefixed kin, the arch unknown.
_BARE_CUDNN = re.compile(r"^(?P<body>[shd]cudnn_(?:winograd_)?\d+x\d+\w*)$")
_LEGACY_OP = re.compile(r"(g?)([a-z]?)(\d*)(gemm|gemv|conv\w*)")
_LEGACY_DTYPE = precision_table("fp16", "bf16", "tf32", "fp32", "int8", "s8")


def decode_arch_prefixed(k: Draft, sym: str, full: str) -> bool:
    """``ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x4_nn`` and its relatives (and cuDNN's
    ``*_scudnn_*``)."""
    m = _LEGACY.match(sym) or _BARE_CUDNN.match(sym)
    if not m or not re.search(r"gemm|conv|cudnn|gemv", sym):
        return False
    if "gemm" in m.group("body") and "cudnn" not in sym:
        k.identify("cublas_legacy", "cuBLAS")
    else:
        k.identify("cudnn", "cuDNN")
    if "arch" in m.groupdict():
        k.set_arch(m.group("arch"))
    toks = m.group("body").split("_")
    for i, t in enumerate(toks):
        gm = _LEGACY_OP.fullmatch(t)
        if gm and not k.op:
            _legacy_op(k, t, *gm.groups())
        elif t in _LEGACY_DTYPE or t == "i8816":
            d = _LEGACY_DTYPE.get(t, "int8")
            k.dtypes += (d,)
            k.add(t, "dtype", f"{d} operands")
        elif MN_TOKEN.fullmatch(t) and k.tile is None:
            add_tile(k, t)
        elif re.fullmatch(r"sliced\d+x\d+", t):
            k.details["sliced"] = t[6:]
            k.add(t, "sliced-K", f"K split {dims(t[6:])} inside each block")
        elif t.startswith("ldg") and t[3:].isdigit():
            k.alignment = t[3:]
            k.add(t, "alignment", f"{t[3:]}-element global loads")
        elif t == "f2f":
            k.add(t, "raw", "float-to-float conversion variant")
        elif t == "relu":
            k.epilogue = "relu"
            k.add(t, "epilogue", "relu fused into the epilogue")
        elif (mma := re.fullmatch(r"([shd])(\d{3,5})cudnn", t)) is not None:
            k.tensor_cores = True
            k.math = "tensor cores (mma)"
            k.details["mma_shape"] = mma_dims(mma[2])
            k.details["accumulator"] = PREFIX.get(mma[1], mma[1])
            k.add(t, "op", f"convolution on tensor cores, {mma_dims(mma[2])} MMA")
        elif re.fullmatch(r"[shd]cudnn", t):
            k.precision = PREFIX.get(t[0])
            k.add(t, "precision", f"cuDNN's {k.precision} (SIMT) convolution kernel")
        elif t == "winograd":
            k.details["algorithm"] = "winograd"
            k.add(t, "algorithm", "Winograd convolution")
        elif t in ("lower", "upper"):
            k.details["fill"] = t
            k.add(t, "fill", f"writes only the {t} triangle of C (SYRK / HERK-style update)")
        elif t == "stages" and i + 1 < len(toks):
            continue
        elif MN_TOKEN.fullmatch(t) and k.tile is not None and i > 0 and toks[i - 1] == "stages":
            add_ktile_stages(k, t, "stages_" + t, extend_tile=False)
        elif re.fullmatch(r"[ntc]{2}", t):
            add_layout(k, t, "AB")
        else:
            k.add(t, "raw", "not decoded")
    if not k.op and "cudnn" in sym:
        k.op = "conv"  # cuDNN's implicit-GEMM convolutions (scudnn: single-precision cuDNN)
    if k.tensor_cores is None:
        k.tensor_cores = False
    if (
        k.dtypes
    ):  # an explicit operand type wins over what the MMA shape suggests (Turing's 1688 is fp16)
        d = k.dtypes[0]
        k.precision = "tf32" if d == "fp32" and k.tensor_cores else d
    label = "tensor-core" if k.tensor_cores else "SIMT"
    k.short = squash(
        f"{k.library} {label} {upper(k.precision)} {k.op.upper() if k.op == 'gemm' else k.op}"
    )
    k.short += geometry(k)
    return True


def _legacy_op(k: Draft, t: str, gauss: str, prefix: str, shape: str, op: str) -> None:
    """'sgemm', 'h884gemm', 's16816gemm', 'i8816gemm', 'cgemm', 'gcgemm': precision, and MMA shape
    if any."""
    k.op = "gemm" if op == "gemm" else op
    if gauss:
        k.details["variant"] = "g"
    if shape:
        k.tensor_cores = True
        k.math = "tensor cores (mma)"
        k.details["mma_shape"] = mma_dims(shape)
        k.details["accumulator"] = PREFIX.get(prefix, prefix)
        meaning = (
            f"GEMM on tensor cores, {k.details['mma_shape']} MMA, accumulate in "
            f"{PREFIX.get(prefix, prefix)}"
        )
        k.add(t, "op", meaning)
        mp = mma_precision(prefix, shape)
        if mp and "/" not in mp:
            k.precision = mp
        return
    k.tensor_cores = False
    k.math = "SIMT (CUDA cores)"
    k.precision = PREFIX.get(prefix, prefix)
    meaning = f"{k.precision} GEMM on CUDA cores (SIMT), no tensor cores"
    if gauss:  # gcgemm / gzgemm: a second complex GEMM flavour next to cgemm / zgemm in libcublasLt
        meaning += (
            "; 'g' variant (not published; likely the Gauss / 3M complex product of "
            "cublas<t>gemm3m)"
        )
    k.add(t, "op", meaning)


# --- helper kernels
# -----------------------------------------------------------------------------------------------


class _Helper(NamedTuple):
    pattern: re.Pattern[str]  # on the function path, anchored at a '::' boundary and at the end
    op: str
    meaning: str
    label: str  # for the short form
    generic: bool  # a name any project might use: decoded only when the signature mentions cuBLAS


def _h(pattern: str, op: str, meaning: str, label: str, generic: bool = False) -> _Helper:
    return _Helper(re.compile(r"(?:^|::)(?:" + pattern + r")$"), op, meaning, label, generic)


_HELPERS = (
    _h(
        r"([sdcz])gemm_largek\w*", "gemm", "GEMM for a large K on CUDA cores (SIMT)", "large-K GEMM"
    ),
    _h(
        r"gemmSN_(NN|TN)_kernel\w*|gemmSN_kernel\w*",
        "gemm",
        "GEMM for a small N on CUDA cores",
        "small-N GEMM",
    ),
    _h(r"gemmk1_kernel\w*", "gemm", "GEMM with K = 1 (an outer product)", "K=1 GEMM"),
    _h(
        r"(?:fermi|kepler)[SDCZH]gemm\w*",
        "gemm",
        "GEMM from cuBLAS' Fermi / Kepler-era kernels (SIMT)",
        "legacy GEMM",
    ),
    _h(
        r"magma_[sh]gemm\w*Ex_kernel",
        "gemm",
        "MAGMA-derived GEMM shipped inside cuBLAS",
        "MAGMA GEMM",
    ),
    _h(
        r"\w*gemm_?(?:kernel)?\dx\d\w*_core\w*|batch_gemm_kernel\w*",
        "gemm",
        "GEMM for tiny matrices",
        "tiny GEMM",
    ),
    _h(r"gemv2([NT])_kernel\w*", "gemv", "matrix-vector product (GEMV)", "GEMV"),
    _h(
        r"gemvx::kernel|gemvx_kernel\w*|gemvNSP_kernel\w*|gemvk1_kernel\w*",
        "gemv",
        "matrix-vector product",
        "GEMV",
    ),
    _h(r"gbmv_kernel\w*", "gbmv", "banded matrix-vector product", "GBMV"),
    _h(
        r"dot_kernel",
        "dot",
        "dot product, first pass (per-block partial sums)",
        "dot product",
        True,
    ),
    _h(
        r"reduce_1Block_kernel",
        "reduce",
        "last pass of a dot / nrm2 / asum: one block sums the partials",
        "reduction (2nd pass)",
    ),
    _h(r"nrm2\w*_kernel", "nrm2", "Euclidean norm (nrm2)", "nrm2"),
    _h(r"asum_kernel", "asum", "sum of absolute values (asum)", "asum"),
    _h(r"iama[xn]_kernel", "iamax", "index of the largest / smallest |element|", "iamax / iamin"),
    _h(r"axpy_kernel\w*", "axpy", "y = a·x + y (axpy)", "axpy", True),
    _h(r"scal\w*_kernel\w*", "scal", "x = a·x (scal)", "scal", True),
    _h(r"swap_kernel", "swap", "swap two vectors", "swap", True),
    _h(r"copy_kernel", "copy", "copy a vector", "copy", True),
    _h(r"rot\w*_kernel\w*", "rot", "plane rotation (rot, rotg, rotm)", "rot", True),
    _h(r"ger_kernel", "ger", "rank-1 update (ger)", "GER"),
    _h(
        r"(?:syr|her|sphpr)2?_kernel\w*",
        "syr",
        "symmetric / Hermitian rank-1 or rank-2 update",
        "SYR / HER",
    ),
    _h(
        r"(?:cuds_)?symv\w*|syhemv\w*|sphpmv\w*|sbhbmv\w*",
        "symv",
        "symmetric / Hermitian matrix-vector product",
        "SYMV",
    ),
    _h(
        r"trsv_\w*exec\w*|dtrsv_init\w*|tbsv_kernel|tpsv_kernel",
        "trsv",
        "triangular solve, one right-hand side",
        "TRSV",
    ),
    _h(
        r"trmv\w*kernel\w*|tbmv\w*kernel\w*|tpmv\w*kernel\w*",
        "trmv",
        "triangular matrix-vector product",
        "TRMV",
    ),
    # TRSM: these kernels live in libcublas, not libcusolver, also when cuSOLVER's getrs / potrs
    # launch them, which is how public profiles show them: next to getrf / potrf kernels. So they
    # decode as cuBLAS.
    _h(
        r"trsm_(?:l[nt]|left|right|batch)\w*|kernel_trsm\w*|batch_trsm\w*",
        "trsm",
        "triangular solve, many right-hand sides (TRSM)",
        "TRSM",
    ),
    _h(
        r"trmm\w*_kernel\w*|magma_lds128_[sdcz]trmm\w*",
        "trmm",
        "triangular matrix multiply (TRMM)",
        "TRMM",
    ),
    _h(r"syherk_kernel\w*", "syrk", "symmetric / Hermitian rank-k update (SYRK / HERK)", "SYRK"),
    _h(r"syhemm_kernel\w*", "symm", "symmetric / Hermitian matrix multiply (SYMM)", "SYMM"),
    _h(r"geam_kernel", "geam", "C = a·op(A) + b·op(B) (geam)", "GEAM"),
    _h(r"dgmm\w*kernel", "dgmm", "multiply by a diagonal matrix", "DGMM"),
    _h(
        r"magma_bdmm\w*kernel",
        "bdmm",
        "MAGMA-derived 'bdmm' kernel inside cuBLAS (meaning not published)",
        "bdmm",
    ),
    _h(
        r"transpose_readWrite_alignment\w*kernel",
        "transpose",
        "out-of-place transpose",
        "transpose",
        True,
    ),
    # cublas<t>getrfBatched / getriBatched / matinvBatched / geqrfBatched: LAPACK-like routines for
    # small matrices
    _h(
        r"getrf_(?:panel|1x1|2x2|kernelWarp|semiwarp)|laswp_kernel(?:_reverse)?",
        "lu",
        "batched LU factorisation (cublas<t>getrfBatched)",
        "batched LU",
    ),
    _h(
        r"getri_\w+|matinv_kernelWarp",
        "inverse",
        "batched matrix inverse (getriBatched / matinvBatched)",
        "inverse",
    ),
    _h(
        r"geqr2_batch_kernel\w*|geqrSolve_batch_kernel",
        "qr",
        "batched QR (geqrfBatched / gelsBatched)",
        "batched QR",
    ),
    _h(
        r"splitKreduce_kernel",
        "splitk_reduce",
        "split-K GEMM: sums the K-slices' partial results",
        "split-K reduction",
    ),
    _h(
        r"cublasLt::epilogue(?:::\w+)+",
        "epilogue",
        "GEMM epilogue as its own kernel (bias, activation)",
        "epilogue",
    ),
)
_PRECISION_LETTER = re.compile(
    r"(?:magma_(?:lds128_)?|fermi|kepler)?([sdczhSDCZH])(?:gemm_largek|gemm\w*Ex_kernel|trmm|gemm_v\d)"
)
_CUDA_CORES = (
    "gemv",
    "gbmv",
    "dot",
    "reduce",
    "nrm2",
    "asum",
    "iamax",
    "axpy",
    "scal",
    "swap",
    "copy",
    "rot",
    "ger",
)
#: cuBLAS's operand wrappers in a helper's template: ``cublasGemvTensorStridedBatched<T const>``.
_OPERAND = re.compile(r"cublasGemvTensor\w*<\s*([^<>,]+?)\s*>")
_SIMT_GEMM = ("large-K GEMM", "small-N GEMM", "K=1 GEMM", "tiny GEMM", "legacy GEMM")


def decode_helper(k: Draft, sym: str, full: str) -> bool:
    """cuBLAS / cuBLASLt helper kernels, from their full signature (see the module docstring); a
    bare name only where it says its namespace (``cublasLt::splitKreduce_kernel``)."""
    if "<" not in full and "(" not in full and "cublas" not in full:
        return False
    path, name, args = signature(full)
    for helper in _HELPERS:
        m = helper.pattern.search(path)
        if m:
            break
    else:
        return False
    if helper.generic and "cublas" not in full:
        return False
    k.identify("cublas_legacy", "cuBLASLt" if "cublasLt::" in path else "cuBLAS", helper.op)
    k.add(path if helper.op == "epilogue" else name, "op", helper.meaning)
    types = value_types(args)
    letter = _PRECISION_LETTER.match(
        name
    )  # sgemm_largek, magma_hgemmEx_kernel, fermiCgemm_v3_kernel, ...
    k.precision = PREFIX[letter.group(1).lower()] if letter else types[0] if types else None
    if types:
        k.dtypes = types
        k.add(
            f"<{args[:60]}{'…' if len(args) > 60 else ''}>",
            "template",
            f"instantiated for {', '.join(types)}",
        )
    wrapped = _OPERAND.search(args)
    if wrapped and value_types(wrapped.group(1)):
        # gemmSN_TN_kernel<float, ..., cublasGemvTensorStridedBatched<__nv_bfloat16 const>, ...>:
        # the leading type is the compute type; the operands are the wrappers' (bf16 here)
        operand = value_types(wrapped.group(1))[0]
        if not letter and operand != k.precision:
            k.details["compute"] = k.precision
            k.precision = operand
            k.add(
                wrapped.group(0),
                "operands",
                f"{operand} operands (computed in {k.details['compute']})",
            )
    if helper.op in _CUDA_CORES or helper.label in _SIMT_GEMM:
        k.tensor_cores = False  # vector, matrix-vector and small-matrix kernels: no MMA
        k.math = "SIMT (CUDA cores)"
    k.short = squash(f"{k.library} {upper(k.precision)} {helper.label}{_helper_detail(k, name, m)}")
    return True


def _helper_detail(k: Draft, name: str, m: re.Match[str]) -> str:
    """What the routine name adds: GEMV's transposition, small-N GEMM's layout, TRSM's side."""
    if name.startswith("gemv2"):
        k.details["transpose_a"] = m.group(1) == "T"
        return " (y = Aᵀx)" if m.group(1) == "T" else " (y = Ax)"
    if name.startswith("gemmSN_") and m.group(1):
        add_layout(k, m.group(1).lower(), "AB")
        return f" ({m.group(1)})"
    side = re.match(r"(?:kernel_|batch_)?trsm_(?:batch_)?(l|r)", name)
    if side:
        k.details["side"] = "left" if side.group(1) == "l" else "right"
        return f" ({k.details['side']})"
    return ""
