"""AMD ROCm's kernels: Tensile GEMMs (inside hipBLASLt and rocBLAS), rocBLAS's own kernels, MIOpen,
Composable Kernel, RCCL and the HIP runtime's copy kernels.

Where each naming scheme comes from:

- Tensile / hipBLASLt (ROCm/Tensile ``Tensile/SolutionStructs.py``, ROCm/hipBLASLt
  ``tensilelite/Tensile/SolutionStructs``): a kernel is named after its problem type and then its
  solution parameters, abbreviated and joined with ``_``:
  ``Cijk_Ailk_Bjlk_HHS_BH_Bias_HA_S_SAV_UserArgs_MT128x64x32_MI16x16x16x1_SN_..._ISA942_...``.
  ``Cijk`` indexes C by (i, j, batch k); ``Ailk`` / ``Alik`` says A is stored with the free index
  i or the summation index l fastest (not transposed / transposed), ``Bljk`` / ``Bjlk`` likewise
  for B. Then the data types, one letter or code each (``S`` fp32, ``D`` fp64, ``H`` fp16, ``B``
  bf16, ``X`` xf32, ``I8`` int8, ``I`` int32, ``F8`` fp8, ``B8`` bf8, ``C`` / ``Z`` complex): the
  inputs', the output's and the compute type's when they differ (``HHS``: fp16 in and out,
  fp32 math), or one type followed by ``B`` (the problem uses beta) and ``H`` (high-precision
  accumulate): ``SB``, ``HBH``. ``Bias`` (and the bias / activation types after it), ``SAV``
  (scale-alpha vector), ``UserArgs`` name epilogue features; ``MT{M}x{N}x{K}`` is the macro tile
  (one workgroup's tile), ``MI{M}x{N}x{K}[x{B}]`` the matrix instruction (MFMA on CDNA, WMMA on
  RDNA; ``MI0`` or none: no matrix instruction), ``ISA{gfx}`` the target GPU, ``GSU`` global
  split-U (split-K), ``DTL`` direct-to-LDS, ``PGR`` prefetch global read, and so on.
- rocBLAS's own kernels (ROCm/rocBLAS ``library/src``): ``rocblas_{routine}_kernel`` and
  relatives; level-3 routines dispatch to Tensile.
- MIOpen (ROCm/MIOpen ``src/solver/*``, ``src/kernels``): assembly Winograd convolutions
  ``miopenSp3AsmConv{,Rage,Fury,Ultra}_v{ver}_{gfx}_{type}_{f}{m}x{r}_stride{s}``; the
  implicit-GEMM assembly kernels ``igemm_{fwd,bwd,wrw}_gtc{,x,x2,x3}_{layout}_{type}_bx{}_ex{}_
  bt{M}x{N}x{K}_wt{..}...`` (``gtc``: generic tensor contraction; ``wt32x32x8``: the MFMA shape);
  batch norm ``MIOpenBatchNorm{Fwd,Bwd}{Train,Infer}{Spatial,PerActivation}``; reference kernels
  ``naive_conv_{fwd,bwd,wrw}_{layout}_{types}``; layout helpers ``batched_transpose_*``,
  ``transpose_NCHW2CNHW``, ``SubTensorOp*``, ``Op{1,2,3}dTensor*``; and the older
  ``MIOpenConv*``, ``MIOpenCvD3x3*``, ``gcnAsmConv*``, ``mloPooling*``, ``MIOpenSoftmax*``, ...
- Composable Kernel (ROCm/composable_kernel ``include/ck/tensor_operation/gpu/grid``): templates
  in ``ck::`` (``ck::kernel_gemm_xdl_cshuffle_v3<...>``,
  ``ck::tensor_operation::device::kernel_grouped_conv_fwd_xdl_cshuffle_v3<...>``) and
  ``ck_tile::`` (``ck_tile::kentry<...FmhaFwdKernel...>``); ``xdl``/``xdlops`` kernels use MFMA,
  ``wmma`` WMMA, ``dl``/``dlops`` plain dot instructions. Element types are CK's own
  (``ck::half_t``, ``ck::bhalf_t``, ``ck::f8_t``, ``ck::f8_fnuz_t``, ``ck::bf8_t``).
- RCCL (ROCm/rccl): NCCL's names, plus ``rccl_main_kernel`` and ``ncclDevKernel_Generic_{n}``;
  the HIP runtime's blit kernels (ROCm/clr ``rocclr/device/blitcl.cpp``):
  ``__amd_rocclr_copyBuffer``, ``__amd_rocclr_fillBufferAligned``, ...

AMD's matrix units are "matrix cores" (MFMA instructions on CDNA: MI100/MI200/MI300; WMMA on RDNA
3/4). A kernel that uses them gets ``tensor_cores=True`` (the field's meaning is "matrix
multiply-accumulate units") with ``math`` saying which; there is no TF32 on them (MI300's xf32 is
its own type), so the decoded precision is the data type the name states.

Family: one for AMD's libraries (:data:`FAMILY`, ``rocm``: one timeline colour), the library
(Tensile, MIOpen, Composable Kernel, rocBLAS) named in ``library``.
"""

from __future__ import annotations

import re

from .miopen import args_types
from .name import Draft, squash, upper
from .precision import precision_table
from .spelling import signature, template_args
from .stack import op_label, op_of, snake
from .tensile import FAMILY

__all__ = ["decode_ck", "decode_rccl", "decode_rocblas", "decode_rocclr"]


# --------------------------------------------------------------------------------------------------
# Composable Kernel, rocBLAS, RCCL, HIP runtime
# --------------------------------------------------------------------------------------------------

#: Composable Kernel's element types (its own ``ck::`` and ``ck_tile::`` ones, and the C types its
#: templates also take)
_CK_TYPES = precision_table(
    "_Float16",
    "int8_t",
    "signed char",
    "float",
    "double",
    aliases={
        "ck::half_t": "fp16",
        "ck::bhalf_t": "bf16",
        "ck::f8_t": "fp8e4m3",
        "ck::f8_fnuz_t": "fp8e4m3",
        "ck::f8_ocp_t": "fp8e4m3",
        "ck::bf8_t": "fp8e5m2",
        "ck::bf8_fnuz_t": "fp8e5m2",
        "ck::bf8_ocp_t": "fp8e5m2",
        "ck::pk_i4_t": "int4",
        "ck::f4x2_pk_t": "fp4e2m1",
        "ck_tile::half_t": "fp16",
        "ck_tile::bf16_t": "bf16",
        "ck_tile::fp16_t": "fp16",
        "ck_tile::fp8_t": "fp8e4m3",
        "ck_tile::bf8_t": "fp8e5m2",
        # the data-type tags of ck_tile's generated code: DF16b bf16, DF16 fp16
        "ck_tile::DF16b": "bf16",
        "ck_tile::DF16": "fp16",
    },
)
_CK_TYPE_WORD = re.compile(r"ck(?:_tile)?::\w+|_Float16|int8_t|signed char|float|double")


def _ck_types(text: str) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for m in _CK_TYPE_WORD.finditer(text[:4000]):
        canon = _CK_TYPES.get(m.group(0))
        if canon:
            out.setdefault(canon, None)
    return tuple(out)


def decode_ck(k: Draft, sym: str, full: str) -> bool:
    """Composable Kernel's templates (``ck::kernel_gemm_xdl_cshuffle_v3<...>``, ``ck_tile::kentry<
    ...>``)."""
    s = full.lstrip()
    if s.startswith("void "):
        s = s[5:]
    if not (s.startswith("ck::") or s.startswith("ck_tile::")):
        return False
    path, leaf, args = signature(full)
    inner = args or template_args(full)
    words = snake(leaf) + " " + snake(inner[:600])
    low_leaf = leaf.lower()
    if "fmha" in words or "attention" in low_leaf:
        k.op = "attention"
        what = "attention " + ("backward" if "bwd" in words else "forward")
    elif "conv" in low_leaf or "bwd_weight" in low_leaf or "bwd_data" in low_leaf:
        k.op = (
            "conv_wgrad"
            if "bwd_weight" in low_leaf
            else "conv_dgrad"
            if "bwd_data" in low_leaf
            else "conv_fprop"
        )
        what = f"grouped conv {op_label(k.op)[5:]}" if "grouped" in low_leaf else op_label(k.op)
    elif "gemm" in low_leaf or "gemm" in words:
        k.op = "gemm"
        what = "GEMM"
        if "grouped" in low_leaf or "moe" in words:
            k.details["grouped"] = True
            what = "grouped GEMM"
        elif "batched" in low_leaf:
            what = "batched GEMM"
    elif s.startswith("ck_tile::"):
        k.op = op_of(words) or "other"
        what = op_label(k.op)
    else:
        k.op = op_of(snake(leaf)) or "other"
        what = leaf
    k.identify(FAMILY, "Composable Kernel")
    k.add(path or leaf, "op", f"Composable Kernel: {what}")
    if "xdl" in words:
        k.tensor_cores, k.math = True, "matrix cores (MFMA)"
        k.add("xdl", "math", "XDL: MFMA matrix-core instructions")
    elif "wmma" in words:
        k.tensor_cores, k.math = True, "matrix cores (WMMA)"
        k.add("wmma", "math", "WMMA matrix-core instructions (RDNA)")
    elif "_dl" in words or "dlops" in words:
        k.tensor_cores, k.math = False, "vector ALUs (dot instructions)"
    elif k.op in ("gemm", "attention", "conv_fprop", "conv_dgrad", "conv_wgrad"):
        k.tensor_cores, k.math = True, "matrix cores (MFMA)"
    types = _ck_types(inner)
    if not types and "unsigned short" in inner[:2000] and k.op == "gemm":
        types = ("bf16",)  # CK's bhalf_t is a ushort: a mangled name demangles it as one
    if types:
        k.dtypes = types
        narrow = next((t for t in types if t.startswith(("fp8", "int8", "int4", "fp4"))), None)
        k.precision = narrow or types[0]
        k.add(", ".join(types), "dtype", f"{k.precision} data")
    if "blockscale" in low_leaf or "ABScale" in inner[:300] or "blockscale" in words:
        k.details["scaling"] = "block scales"
    k.short = squash(f"CK {upper(k.precision)} {what}")
    return True


def decode_rocblas(k: Draft, sym: str, full: str) -> bool:
    """rocBLAS's own kernels (``rocblas_gemvt_kernel``, ``rocblas_dot_kernel_inc1``, ...)."""
    if "rocblas" not in full:
        return False
    path, leaf, args = signature(full)
    name = leaf if path else full.split("(", 1)[0].strip()
    if not name.startswith("rocblas_") and "rocblas::" not in path:
        return False
    body = name[8:] if name.startswith("rocblas_") else name
    routine = body.split("_")[0]
    blas = re.fullmatch(
        r"[sdchzxb]?(gemv|gemm|trsm|trsv|trmm|syrk|herk|dot|axpy|scal|copy|nrm2|"
        r"asum|swap|ger|symv|hemv|gbmv|tbmv|trmv|rot|iamax|iamin|syr2k|her2k|"
        r"geam|dgmm|symm|hemm)\w*?",
        routine,
    )
    op = blas.group(1) if blas else op_of(snake(body)) or body.split("_")[0] or "other"
    k.identify(FAMILY, "rocBLAS", op)
    args_types(k, args)
    k.tensor_cores, k.math = False, "vector ALUs"
    k.add(name, "op", f"rocBLAS {k.op} kernel")
    k.short = squash(f"rocBLAS {upper(k.precision)} {k.op} ({name})")
    return True


def decode_rccl(k: Draft, sym: str, full: str) -> bool:
    """RCCL's single entry kernel, ``rccl_main_kernel(ncclDevComm*, ...)``: every collective runs
    through it, so the name says only that it is RCCL's."""
    if not full.lstrip().startswith(("rccl_main_kernel", "void rccl_main_kernel")):
        return False
    k.identify("nccl", "RCCL", "communication")
    k.details["collective"] = "any"
    k.add("rccl_main_kernel", "collective", "RCCL's entry kernel (the collective is not named)")
    k.short = "RCCL collective"
    return True


_ROCCLR = "__amd_rocclr_"


def decode_rocclr(k: Draft, sym: str, full: str) -> bool:
    """The HIP runtime's blit kernels (``__amd_rocclr_copyBuffer``, ``__amd_rocclr_fillBuffer``):
    hipMemcpy / hipMemset done as kernels."""
    s = full.strip()
    if not s.startswith(_ROCCLR):
        return False
    what = s[len(_ROCCLR) :].split("(", 1)[0]
    fill = what.startswith("fill")
    k.identify("memop", "HIP runtime (ROCclr)", "memset" if fill else "copy")
    k.details["kind"] = "memset" if fill else "memcpy"
    k.add(s, "op", f"HIP runtime blit kernel: {'fill (memset)' if fill else 'copy'} ({what})")
    k.short = f"HIP {'memset' if fill else 'copy'} kernel ({what})"
    return True
