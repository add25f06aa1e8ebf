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

from .name import Draft, dims, squash, upper
from .spelling import signature, template_args
from .stack import element_types, op_label, op_of, snake

#: The family of AMD's ROCm libraries (one timeline colour; ``library`` says which).
FAMILY = "rocm"

# --------------------------------------------------------------------------------------------------
# Tensile (hipBLASLt / rocBLAS GEMMs)
# --------------------------------------------------------------------------------------------------

#: Tensile's DataType.toChar() codes, longest first (a code is read greedily left to right)
_TENSILE_TYPES = (
    ("4xi8", "int8"),
    ("F8B8", "fp8/bf8"),
    ("B8F8", "bf8/fp8"),
    ("F8N", "fp8e4m3"),
    ("B8N", "fp8e5m2"),
    ("I8", "int8"),
    ("F8", "fp8e4m3"),
    ("B8", "fp8e5m2"),
    ("F6", "fp6"),
    ("F4", "fp4e2m1"),
    ("S", "fp32"),
    ("D", "fp64"),
    ("H", "fp16"),
    ("B", "bf16"),
    ("X", "xf32"),
    ("C", "complex64"),
    ("Z", "complex128"),
    ("I", "int32"),
)
_LAYOUT_A = {"Ailk": "N", "Alik": "T"}
_LAYOUT_B = {"Bljk": "N", "Bjlk": "T"}
_ONE_TYPE_FLAGS = re.compile(r"(4xi8|I8|F8|B8|S|D|H|B|X|C|Z|I)B(H?)")
_MT = re.compile(r"MT(\d+)x(\d+)x(\d+)")
_MI = re.compile(r"MI(\d+)x(\d+)x(\d+)(?:x(\d+))?")
_ISA = re.compile(r"ISA(\d{2,4}[a-f]?)")
_GSU = re.compile(r"GSU(\d+)")
_NUMBERED = re.compile(r"([A-Z]+)(\d+)")


def _tensile_types(code: str) -> list[str] | None:
    """'HHS' -> ['fp16', 'fp16', 'fp32']; None when ``code`` is not a run of type codes."""
    out: list[str] = []
    i = 0
    while i < len(code):
        for spelled, canon in _TENSILE_TYPES:
            if code.startswith(spelled, i):
                out.append(canon)
                i += len(spelled)
                break
        else:
            return None
    return out or None


def gfx_arch(isa: str) -> str:
    """'90a' -> 'gfx90a', '942' -> 'gfx942', '1151' -> 'gfx1151' (Tensile's ISA token)."""
    return f"gfx{isa}"


def _matrix_unit(isa: str | None) -> str:
    """MFMA on CDNA (gfx9xx), WMMA on RDNA 3/4 (gfx11xx, gfx12xx)."""
    return "WMMA" if isa and isa[:2] in ("11", "12") and len(isa) == 4 else "MFMA"


def decode_tensile(k: Draft, sym: str, full: str) -> bool:
    """``Cijk_Ailk_Bjlk_HHS_BH_..._MT128x64x32_MI16x16x16x1_..._ISA942_...``: a Tensile GEMM."""
    s = full.strip()
    at = s.find("Cijk_")
    if at < 0 or (at and s[:at] not in ("Custom_", "void ")):
        return False
    name = s[at:].split("(", 1)[0]
    toks = name.split("_")
    if len(toks) < 4 or toks[1] not in _LAYOUT_A or toks[2] not in _LAYOUT_B:
        return False
    k.family = FAMILY
    k.library = "hipBLASLt/rocBLAS (Tensile)"
    k.op = "gemm"
    k.details["generator"] = "Tensile"
    k.add("Cijk", "op", "Tensile GEMM: C[i,j,batch] = Σ_l A·B")
    layout = _LAYOUT_A[toks[1]] + _LAYOUT_B[toks[2]]
    k.layout = layout
    k.add(
        f"{toks[1]}_{toks[2]}",
        "layout",
        f"A {'transposed' if layout[0] == 'T' else 'not transposed'}, "
        f"B {'transposed' if layout[1] == 'T' else 'not transposed'} ({layout})",
    )
    _tensile_type_token(k, toks[3])
    isa = None
    epilogue: list[str] = []
    rest = toks[4:]
    for i, t in enumerate(rest):
        m = _MT.fullmatch(t)
        if m:
            k.tile = "x".join(str(int(g)) for g in m.groups())  # older names pad: MT032x016x08
            k.add(t, "tile", f"macro tile M×N×K = {dims(k.tile)} (one workgroup)")
            continue
        m = _MI.fullmatch(t)
        if m:
            k.details["matrix_instruction"] = "x".join(g for g in m.groups() if g)
            k.add(t, "math", f"matrix instruction {dims(k.details['matrix_instruction'])}")
            continue
        m = _ISA.fullmatch(t)
        if m:
            isa = m.group(1)
            k.arch = gfx_arch(isa)
            k.add(t, "arch", f"compiled for {k.arch}")
            continue
        if t == "BH" or t == "B":
            k.add(t, "flags", "uses beta" + (", high-precision accumulate" if t == "BH" else ""))
        elif t == "Bias":
            epilogue.append("bias")
            k.add(t, "epilogue", "bias added in the epilogue")
        elif epilogue and "A" in t and _tensile_types(t.replace("A", "", 1) or "S"):
            # bias types, 'A' and the activation's compute type (HA, HAS, AS): the kernel can apply
            # an activation, which one (or none) is chosen at run time
            k.details["activation"] = "supported (chosen at run time)"
            k.add(t, "epilogue", "activation supported in the epilogue (chosen at run time)")
        elif t == "SAV":
            k.details["scale_alpha_vector"] = True
            k.add(t, "epilogue", "per-row alpha scaling supported (scale-alpha vector)")
        elif t.startswith("Aux"):
            epilogue.append("aux output")
            k.add(t, "epilogue", "auxiliary output (pre-activation) written")
        elif t == "UserArgs":
            k.add(t, "flags", "arguments passed in a user buffer (hipBLASLt)")
        elif t.startswith("GSU"):
            gm = _GSU.match(t)
            if gm and gm.group(1) != "1":
                k.details["split_k"] = int(gm.group(1))
            k.add(t, "split-K", "global split-U (split-K across workgroups)")
        elif t.startswith("MX") and t[2:3] in ("A", "B"):
            k.details.setdefault("scaling", "microscaling (MX) block scales")
            k.add(t, "scaling", f"MX block scales for {t[2]} (block {t[3:]})")
        else:
            k.add(t, "raw", "Tensile solution parameter")
        if i > 80:  # the parameters that matter come first; the rest are tuning knobs
            break
    mi = k.details.get("matrix_instruction")
    if mi and not mi.startswith("0"):
        unit = _matrix_unit(isa)
        k.tensor_cores = True
        k.math = f"matrix cores ({unit})"
        k.details["matrix_unit"] = unit
    elif mi is not None or k.tile:
        # MI0, or no matrix-instruction parameter at all: Tensile's MAC kernel on the vector ALUs
        k.tensor_cores = False
        k.math = "vector ALUs (no matrix cores)"
    if epilogue:
        k.epilogue = "+".join(dict.fromkeys(epilogue))
    label = f"({k.details['matrix_unit']})" if k.tensor_cores else ""
    if k.tensor_cores is False:
        label = "(no MFMA)"
    geo = f" {dims(k.tile)}" if k.tile else ""
    k.short = squash(
        f"Tensile {upper(k.precision)} GEMM {label}{geo}, {layout}"
        + (f", {k.epilogue}" if k.epilogue else "")
    )
    return True


def _tensile_type_token(k: Draft, t: str) -> None:
    m = _ONE_TYPE_FLAGS.fullmatch(t)
    if m:
        types = _tensile_types(m.group(1)) or []
        k.add(t, "dtype", f"{types[0]} throughout; uses beta" + (", HPA" if m.group(2) else ""))
    else:
        types = _tensile_types(t) or []
        if types:
            k.add(t, "dtype", _types_meaning(types))
        else:
            k.add(t, "raw", "not decoded")
    if not types:
        return
    k.precision = types[0]
    k.dtypes = tuple(dict.fromkeys(types))
    if len(types) >= 2:
        k.details["compute_type"] = types[-1]
        k.details["output_type"] = types[-2]


def _types_meaning(types: list[str]) -> str:
    if len(types) == 1:
        return f"{types[0]} throughout"
    ins = types[:-2] or types[:1]
    return f"{'/'.join(ins)} inputs, {types[-2]} output, {types[-1]} compute"


# --------------------------------------------------------------------------------------------------
# MIOpen
# --------------------------------------------------------------------------------------------------

_MIOPEN_TYPES = {
    "fp32": "fp32",
    "fp16": "fp16",
    "bf16": "bf16",
    "float": "fp32",
    "half": "fp16",
    "bfloat16": "bf16",
    "double": "fp64",
    "int8": "int8",
    "int8x4": "int8",
    "fp8": "fp8e4m3",
    "bf8": "fp8e5m2",
}
_DIRECTION = {"fwd": "conv_fprop", "bwd": "conv_dgrad", "wrw": "conv_wgrad"}
_IGEMM = re.compile(r"igemm_(fwd|bwd|wrw)_(gtc\w*?)_(n\w+?|c\w+?)_(fp32|fp16|bf16|int8\w*?)(?:_|$)")
_BT = re.compile(r"_bt(\d+)x(\d+)x(\d+)")
_WT = re.compile(r"_wt(\d+)x(\d+)x(\d+)")
_WINOGRAD = re.compile(
    r"miopenSp3AsmConv(\w*?)(?:_v\d+_\d+_\d+)?(?:_gfx\w+?)?(?:_(fp32|fp16)\w*)?$"
)
_BN = re.compile(r"MIOpenBatchNorm(Fwd|Bwd)(Train|Infer)?(\w*)")
_NAIVE = re.compile(r"naive_conv_(?:ab_)?(?:nonpacked_|packed_)?(fwd|bwd|wrw)_(\w+?)_(\w+)")


#: words one of which every MIOpen kernel name holds (a cheap test before parsing)
_MIOPEN_MARKS = (
    "igemm_",
    "MIOpen",
    "miopen",
    "naive_conv_",
    "transpose",
    "Tensor",
    "mloPooling",
    "gcnAsmConv",
    "Im2",
    "convolution_",
    "Softmax",
)


def decode_miopen(k: Draft, sym: str, full: str) -> bool:
    """MIOpen's kernels, named after their solver (see the module docstring)."""
    if len(full) > 2000 or not any(w in full for w in _MIOPEN_MARKS):
        return False
    path, leaf, args = signature(full)
    name = leaf if path else full.split("(", 1)[0].strip()
    what = _miopen_kind(k, name, args)
    if what is None:
        return False
    k.family = FAMILY
    k.library = "MIOpen"
    k.short = squash(f"MIOpen {upper(k.precision)} {what}")
    return True


def _miopen_kind(k: Draft, name: str, args: str) -> str | None:
    if name.startswith("igemm_"):
        m = _IGEMM.match(name)
        if not m:
            return None
        direction, gtc, layout, dtype = m.groups()
        k.op = _DIRECTION[direction]
        k.precision = _MIOPEN_TYPES.get(dtype.split("_")[0], dtype)
        k.dtypes = (k.precision,)
        k.layout = layout.upper()
        k.add(f"igemm_{direction}", "op", f"implicit-GEMM convolution, {op_label(k.op)}")
        k.add(gtc, "variant", "generic tensor contraction assembly kernel (MIOpen's igemm)")
        k.add(layout, "layout", f"tensor layout {layout.upper()}")
        k.add(dtype, "dtype", f"{k.precision} data")
        bt = _BT.search(name)
        if bt:
            k.tile = "x".join(bt.groups())
            k.add(bt.group(0)[1:], "tile", f"block tile M×N×K = {dims(k.tile)}")
        wt = _WT.search(name)
        if wt and gtc.startswith("gtcx"):  # the xdlops (MFMA) variants: gtcx, gtcx2, gtcx3
            k.tensor_cores = True
            k.math = "matrix cores (MFMA)"
            k.details["matrix_instruction"] = "x".join(wt.groups())
            k.add(
                wt.group(0)[1:], "math", f"MFMA wave tile {dims(k.details['matrix_instruction'])}"
            )
        elif gtc == "gtc":
            k.tensor_cores = False
            k.math = "vector ALUs (no matrix cores)"
        return f"implicit-GEMM {op_label(k.op)} {k.layout}" + (f" {dims(k.tile)}" if k.tile else "")
    if name.startswith("miopenSp3AsmConv") or name.startswith("miopenSp3AsmConvRxSf"):
        m = _WINOGRAD.match(name)
        k.op = "conv"
        k.details["algorithm"] = "winograd"
        k.tensor_cores = False
        k.math = "vector ALUs (Winograd assembly)"
        dt = m.group(2) if m else None
        if dt:
            k.precision = _MIOPEN_TYPES[dt]
            k.dtypes = (k.precision,)
        if "_fp16" in name and not dt:
            k.precision, k.dtypes = "fp16", ("fp16",)
        tile = re.search(r"_f(\d)x(\d)", name)
        if tile:
            k.details["winograd"] = f"F({tile.group(1)},{tile.group(2)})"
        k.add(name, "op", "Winograd convolution (MIOpen assembly solver)")
        return "Winograd conv" + (f" {k.details['winograd']}" if "winograd" in k.details else "")
    m = _BN.match(name)
    if m:
        k.op = "norm"
        direction = "forward" if m.group(1) == "Fwd" else "backward"
        mode = {"Train": " training", "Infer": " inference"}.get(m.group(2) or "", "")
        k.add(name, "op", f"batch norm {direction}{mode} ({m.group(3) or 'spatial'})")
        _args_types(k, args)
        return f"batch norm {direction}{mode}"
    m = _NAIVE.match(name)
    if m:
        direction, layout, types = m.groups()
        k.op = _DIRECTION[direction]
        k.layout = layout.upper()
        k.tensor_cores = False
        k.math = "vector ALUs (reference kernel)"
        first = types.split("_")[0]
        if first in _MIOPEN_TYPES:
            k.precision = _MIOPEN_TYPES[first]
            k.dtypes = (k.precision,)
        k.add(name, "op", f"naive (reference) convolution, {op_label(k.op)}, {k.layout}")
        return f"naive {op_label(k.op)} {k.layout}"
    low = name.lower()
    if (
        name.startswith("batched_transpose")
        or low.startswith("transpose_nchw")
        or low.startswith("transpose_cnhw")
    ):
        k.op = "transpose"
        k.add(name, "op", "layout transpose before / after a convolution")
        for word, canon in (("dword", "32-bit"), ("half", "16-bit"), ("byte", "8-bit")):
            if f"_{word}" in name:
                k.details["element"] = canon
        return f"transpose ({name})"
    if name.startswith(("SubTensorOp", "Op1dTensor", "Op2dTensor", "Op3dTensor", "Op4dTensor")):
        k.op = "elementwise"
        k.add(name, "op", "tensor op (add / mul / scale on a sub-tensor)")
        _args_types(k, args)
        return f"tensor op {name}"
    if name.startswith(("OpTensor", "SetTensor", "ScaleTensor", "CopyTensor", "CastTensor")):
        k.op = "copy" if "Copy" in name or "Cast" in name else "elementwise"
        k.add(name, "op", "tensor helper")
        return f"tensor helper {name}"
    if name.startswith(
        ("MIOpenConv", "MIOpenCvD", "gcnAsmConv", "miopenGcnAsmConv", "MIOpenCvFwd")
    ):
        k.op = "conv"
        k.tensor_cores = False
        k.math = "vector ALUs"
        k.add(name, "op", "direct convolution (MIOpen)")
        return f"direct conv {name}"
    if name.startswith(("mloPooling", "MIOpenPooling")):
        k.op = "pool"
        k.add(name, "op", "pooling")
        return f"pooling {name}"
    if name.startswith(("MIOpenSoftmax", "SoftmaxForward", "SoftmaxBackward")):
        k.op = "softmax"
        k.add(name, "op", "softmax")
        return "softmax"
    if name.startswith(("MIOpenNeuron", "MIOpenActive")):
        k.op = "elementwise"
        k.details["category"] = "activation"
        k.add(name, "op", "activation (neuron) kernel")
        return "activation"
    if name.startswith(("MIOpenLRN", "MIOpenReduce", "MIOpenIm2Col", "Im2Col", "Im2d2Col")):
        k.op = "reduce" if "Reduce" in name else "copy" if "Col" in name else "norm"
        k.add(name, "op", name)
        return name
    if name.startswith(("gridwise_convolution_", "convolution_forward_implicit_gemm")):
        k.op = "conv"
        if "xdlops" in name:
            k.tensor_cores, k.math = True, "matrix cores (MFMA)"
        k.add(name, "op", "implicit-GEMM convolution (MIOpen's HIP solvers)")
        return "implicit-GEMM conv"
    return None


def _args_types(k: Draft, args: str) -> None:
    types = element_types(args)
    if types:
        k.precision, k.dtypes = types[0], types


# --------------------------------------------------------------------------------------------------
# Composable Kernel, rocBLAS, RCCL, HIP runtime
# --------------------------------------------------------------------------------------------------

_CK_TYPES = {
    "ck::half_t": "fp16",
    "_Float16": "fp16",
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
    "int8_t": "int8",
    "signed char": "int8",
    "float": "fp32",
    "double": "fp64",
}
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
    k.family = FAMILY
    k.library = "Composable Kernel"
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
    k.family = FAMILY
    k.library = "rocBLAS"
    if blas:
        k.op = blas.group(1)
    else:
        k.op = op_of(snake(body)) or body.split("_")[0] or "other"
    _args_types(k, args)
    k.tensor_cores, k.math = False, "vector ALUs"
    k.add(name, "op", f"rocBLAS {k.op} kernel")
    k.short = squash(f"rocBLAS {upper(k.precision)} {k.op} ({name})")
    return True


def decode_rccl(k: Draft, sym: str, full: str) -> bool:
    """RCCL's single entry kernel, ``rccl_main_kernel(ncclDevComm*, ...)``: every collective runs
    through it, so the name says only that it is RCCL's."""
    if not full.lstrip().startswith(("rccl_main_kernel", "void rccl_main_kernel")):
        return False
    k.family = "nccl"
    k.library = "RCCL"
    k.op = "communication"
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
    k.family = "memop"
    k.library = "HIP runtime (ROCclr)"
    fill = what.startswith("fill")
    k.op = "memset" if fill else "copy"
    k.details["kind"] = "memset" if fill else "memcpy"
    k.add(s, "op", f"HIP runtime blit kernel: {'fill (memset)' if fill else 'copy'} ({what})")
    k.short = f"HIP {'memset' if fill else 'copy'} kernel ({what})"
    return True
