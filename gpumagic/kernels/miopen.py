"""AMD's MIOpen convolutions, batch norm and layout helpers, from their kernel names.

Where the naming comes from: ROCm/MIOpen ``src/solver/*`` and ``src/kernels`` (see :mod:`.rocm`
for the schemes, spelled out).
"""

from __future__ import annotations

import re

from .name import Draft, dims, squash, upper
from .precision import precision_table
from .spelling import signature
from .stack import element_types, op_label
from .tensile import FAMILY

# --------------------------------------------------------------------------------------------------
# MIOpen
# --------------------------------------------------------------------------------------------------

#: MIOpen's type words; its ``fp8`` / ``bf8`` are AMD's names for E4M3 / E5M2
_MIOPEN_TYPES = precision_table(
    "fp32",
    "fp16",
    "bf16",
    "float",
    "half",
    "bfloat16",
    "double",
    "int8",
    aliases={"int8x4": "int8", "fp8": "fp8e4m3", "bf8": "fp8e5m2"},
)
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
    k.identify(FAMILY, "MIOpen")
    k.short = squash(f"MIOpen {upper(k.precision)} {what}")
    return True


def _miopen_kind(k: Draft, name: str, args: str) -> str | None:
    """What an MIOpen kernel is, by its solver's naming (the op, types and geometry it gives, filled
    in); returns the label's words, or None when the name is no MIOpen kernel's."""
    for reader in (_igemm, _winograd, _batch_norm, _naive_conv, _layout_and_tensor_ops):
        what = reader(k, name, args)
        if what is not None:
            return what
    return _older_solvers(k, name)


def _igemm(k: Draft, name: str, args: str) -> str | None:
    """``igemm_{fwd,bwd,wrw}_gtc{,x,x2,x3}_{layout}_{type}_..._bt{M}x{N}x{K}_wt{..}``: the
    implicit-GEMM assembly kernels; the xdlops (gtcx) variants run on MFMA."""
    if not name.startswith("igemm_"):
        return None
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
        shape = "x".join(wt.groups())
        k.details["matrix_instruction"] = shape
        k.add(wt.group(0)[1:], "math", f"MFMA wave tile {dims(shape)}")
    elif gtc == "gtc":
        k.tensor_cores = False
        k.math = "vector ALUs (no matrix cores)"
    return f"implicit-GEMM {op_label(k.op)} {k.layout}" + (f" {dims(k.tile)}" if k.tile else "")


def _winograd(k: Draft, name: str, args: str) -> str | None:
    """``miopenSp3AsmConv{,Rage,Fury,Ultra}_v{ver}_{gfx}_{type}_{f}{m}x{r}...``: the assembly
    Winograd convolutions."""
    if not name.startswith("miopenSp3AsmConv"):
        return None
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


def _batch_norm(k: Draft, name: str, args: str) -> str | None:
    """``MIOpenBatchNorm{Fwd,Bwd}{Train,Infer}{Spatial,PerActivation}``."""
    m = _BN.match(name)
    if not m:
        return None
    k.op = "norm"
    direction = "forward" if m.group(1) == "Fwd" else "backward"
    mode = {"Train": " training", "Infer": " inference"}.get(m.group(2) or "", "")
    k.add(name, "op", f"batch norm {direction}{mode} ({m.group(3) or 'spatial'})")
    args_types(k, args)
    return f"batch norm {direction}{mode}"


def _naive_conv(k: Draft, name: str, args: str) -> str | None:
    """``naive_conv_{fwd,bwd,wrw}_{layout}_{types}``: the reference convolutions."""
    m = _NAIVE.match(name)
    if not m:
        return None
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


def _layout_and_tensor_ops(k: Draft, name: str, args: str) -> str | None:
    """The layout transposes around a convolution and the sub-tensor ops and tensor helpers."""
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
        args_types(k, args)
        return f"tensor op {name}"
    if name.startswith(("OpTensor", "SetTensor", "ScaleTensor", "CopyTensor", "CastTensor")):
        k.op = "copy" if "Copy" in name or "Cast" in name else "elementwise"
        k.add(name, "op", "tensor helper")
        return f"tensor helper {name}"
    return None


def _older_solvers(k: Draft, name: str) -> str | None:
    """The older solvers' kernels (``MIOpenConv*``, ``gcnAsmConv*``, ``mloPooling*``,
    ``MIOpenSoftmax*``, ...) and the HIP implicit-GEMM ones, by their name's prefix."""
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


def args_types(k: Draft, args: str) -> None:
    types = element_types(args)
    if types:
        k.precision, k.dtypes = types[0], types
