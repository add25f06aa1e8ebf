"""CUTLASS kernel names: the 2.x procedural names and the 3.x (CuTe) names of CUTLASS's own
generator.

Both are assembled by CUTLASS's ``generator.py`` from fixed parts, so they decode token by token:
``cutlass_80_ tensorop_s1688gemm_128x128_32x3_nn_align4`` is SM 8.0, tensor cores, fp32 accumulate
with the 16×8×8 (TF32) MMA, a 128×128 block tile, K-tile 32 with 3 pipeline stages, both operands
column-major, 4-element alignment. cuBLAS and cuDNN ship CUTLASS kernels under these names too,
which is why the library string says where one came from.
"""

from __future__ import annotations

import re

from .name import (
    DTYPE,
    OP_LABEL,
    PREFIX,
    Draft,
    add_alignment,
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

_C2 = re.compile(
    r"^cutlass(?:__5x_cudnn)?_(?:(?P<arch>\d{2,3}a?)_)?(?P<opclass>tensorop|simt|wmma_tensorop|wmmatensorop|gemv)_"
    # the generator's extended name may lead with the A/B element type:
    # cutlass_tensorop_f16_s16816gemm_f16_...
    r"(?:(?P<ab>bf16|f16|tf32|f32|f64|cf32|cf64|s8|u8|s4|u4|e4m3|e5m2)_)?"
    r"(?P<core>[a-z]\d*(?!\d)[a-z0-9]*?(?:gemm|fprop|dgrad|wgrad|conv\w*?|gemv)(?:_grouped|_planar_complex|_sparse)?)"
    r"(?P<rest>_.*)?$"
)
_C2_CORE = re.compile(r"^([a-z])(\d*)(?!\d)([a-z0-9]*?)(gemm|fprop|dgrad|wgrad|gemv|conv\w*?)(.*)$")
_C2_OP = {
    "gemm": "gemm",
    "fprop": "conv_fprop",
    "dgrad": "conv_dgrad",
    "wgrad": "conv_wgrad",
    "gemv": "gemv",
}
_C2_OP_MEANING = {
    "gemm": "matrix multiply (GEMM)",
    "fprop": "convolution forward",
    "dgrad": "convolution data gradient",
    "wgrad": "convolution weight gradient",
}
_MN = re.compile(r"\d+x\d+")
_MNK = re.compile(r"\d+x\d+x\d+")


def decode_cutlass2(k: Draft, sym: str, full: str) -> bool:
    m = _C2.match(sym)
    if not m:
        return False
    k.family = "cutlass2"
    k.library = "CUTLASS 2.x" + (
        " (in cuDNN)" if "cudnn" in full else " (in cuBLAS)" if "cublas" in full else ""
    )
    k.add("cutlass", "library", "CUTLASS 2.x procedural name")
    if m.group("arch"):
        k.set_arch(m.group("arch"))
    opclass = m.group("opclass")
    k.tensor_cores = "tensorop" in opclass
    k.math = "tensor cores (mma)" if k.tensor_cores else "SIMT (CUDA cores, FFMA)"
    if "wmma" in opclass:
        k.math = "tensor cores (WMMA fragments)"
        k.details["wmma"] = True
    k.add(
        opclass, "math", "tensor cores" if k.tensor_cores else "SIMT: CUDA cores, no tensor cores"
    )
    _core(k, m.group("core"))
    ab = m.group("ab")
    if ab:
        k.dtypes += (DTYPE[ab],)
        k.add(ab, "dtype", f"{DTYPE[ab]} A and B operands")
        k.precision = DTYPE[ab]
    rest = (m.group("rest") or "").lstrip("_")
    toks = rest.split("_") if rest else []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t in DTYPE and k.tile is None:
            k.dtypes += (DTYPE[t],)
            k.add(t, "dtype", f"{DTYPE[t]} operands")
            if k.precision is None or k.precision == "fp16/bf16":
                k.precision = DTYPE[t] if DTYPE[t] != "fp32" or not k.tensor_cores else "tf32"
        elif t in (
            "relu",
            "gelu",
            "silu",
            "sigmoid",
            "tanh",
            "hardswish",
            "leaky",
            "clamp",
            "bias",
        ):
            k.epilogue = t
            k.add(t, "epilogue", f"fused {t} epilogue")
        elif t in ("optimized", "analytic", "fixed", "few", "unity"):
            k.add(t, "iterator", f"{t} iterator / channels")
        elif _MN.fullmatch(t) and k.tile is None:
            add_tile(k, t)
            nxt = toks[i + 1] if i + 1 < len(toks) else ""
            if _MN.fullmatch(nxt):
                add_ktile_stages(k, nxt)
                i += 1
        elif re.fullmatch(r"[ntch]{2,3}", t):
            add_layout(k, t, style="cutlass")
        elif t in ("nhwc", "nchw", "ndhwc", "ncxhwx"):
            k.layout = t
            k.add(t, "layout", f"tensor layout {t.upper()}")
        elif t.startswith("align") and t[5:].isdigit():
            add_alignment(k, t)
        elif t == "stride":
            k.add(t, "stride", "unit-stride specialisation")
        else:
            k.add(t, "raw", "not decoded")
        i += 1
    kind = "SIMT" if not k.tensor_cores else "WMMA" if k.details.get("wmma") else "tensor-core"
    k.short = squash(f"CUTLASS {kind} {upper(k.precision)} {OP_LABEL.get(k.op, k.op)}") + geometry(
        k, mn_only=True
    )
    return True


def _core(k: Draft, core: str) -> None:
    """The instruction part: [s|h|d|i|c|z][MMA shape][input type](gemm|fprop|dgrad|wgrad)."""
    cm = _C2_CORE.match(core)
    if not cm:
        return
    prefix, shape, mid, op, tail = cm.groups()
    accum = PREFIX.get(prefix)
    if shape:
        mma_prec = mma_precision(prefix, shape)
        k.add(
            prefix + shape,
            "mma",
            f"accumulate in {accum or prefix}; {mma_dims(shape)} MMA instruction"
            + (f" ({mma_prec} inputs)" if mma_prec else ""),
        )
        k.details["mma_shape"] = mma_dims(shape)
        k.details["accumulator"] = accum
        k.precision = mma_prec if mma_prec and "/" not in mma_prec else None
        if prefix == "h" and mma_prec == "fp16/bf16":
            k.precision = "fp16"  # accumulating in fp16: fp16 inputs (bf16 MMAs accumulate in fp32)
    else:
        k.add(prefix, "precision", f"{accum} throughout (SIMT {prefix}{op})")
        k.precision = accum
        k.details["accumulator"] = accum
    if mid:
        k.add(mid, "mma input", f"{DTYPE.get(mid, mid)} inputs to the MMA")
        k.precision = DTYPE.get(mid, mid)
    k.op = _C2_OP.get(op, op)
    k.add(op + tail, "op", _C2_OP_MEANING.get(op, op))


_C3 = re.compile(
    r"^cutlass3x_(?P<arch>sm\d+a?)_(?P<opclass>tensorop|simt|bstensorop|sptensorop)_(?P<body>.*)$"
)
_C3_INSTR = re.compile(
    r"(?:([shdi])(?=\d|gemm))?(\d+x\d+x\d+)?([a-z0-9]*?)(gemm|conv\dd\w*|fprop|dgrad|wgrad|sparse_gemm)"
)
_SCHEDULE_PARTS = (
    "cooperative",
    "pingpong",
    "persistent",
    "warpspecialized",
    "2sm",
    "1sm",
    "fp8",
    "fastaccum",
)
_MIXED = {
    "cvt": "convert only",
    "scl": "scale",
    "sclzr": "scale with zero point",
    "shfl": "shuffled narrow-type layout",
}
_EPI_ACT = ("bias", "relu", "gelu", "silu", "sigmoid", "clamp", "swish", "tanh")


def decode_cutlass3(k: Draft, sym: str, full: str) -> bool:
    m = _C3.match(sym)
    if not m:
        return False
    k.family = "cutlass3"
    k.library = "CUTLASS 3.x"
    k.add("cutlass3x", "library", "CUTLASS 3.x (CuTe) generated kernel")
    k.set_arch(m.group("arch"))
    k.tensor_cores = m.group("opclass") != "simt"
    if k.tensor_cores:
        k.math = "tensor cores (wgmma)" if k.arch == "sm90" else "tensor cores"
    else:
        k.math = "SIMT"
    k.add(m.group("opclass"), "math", "tensor cores" if k.tensor_cores else "SIMT: CUDA cores")
    toks = m.group("body").split("_")
    i = _c3_instruction(k, toks)
    dts = []
    while i < len(toks) and toks[i] in DTYPE:
        dts.append(toks[i])
        i += 1
    if dts:
        k.dtypes = tuple(DTYPE[d] for d in dts)
        for role, d in zip(["A", "B", "accumulator", "C", "D"], dts):
            k.add(d, f"dtype {role}", f"{role}: {DTYPE[d]}")
        if k.precision is None:
            a = DTYPE[dts[0]]
            k.precision = "tf32" if a == "fp32" and k.tensor_cores else a
        if len(dts) >= 3:
            k.details["accumulator"] = DTYPE[dts[2]]
    while i < len(toks):
        i = _c3_token(k, toks, i) + 1
    k.short = (
        f"CUTLASS 3 {upper(k.precision)} {k.op.upper() if k.op == 'gemm' else k.op}"
        + geometry(k, cluster=True, schedule=True)
    )
    return True


def _c3_instruction(k: Draft, toks: list[str]) -> int:
    """The first token: [s|h|...][MxNxK][tf32]gemm, or plain 'gemm'. Returns the index of the next
    token."""
    im = _C3_INSTR.fullmatch(toks[0])
    if not im:
        return 0
    acc, shape, mmain, op = im.groups()
    k.op = "gemm" if "gemm" in op else op
    meaning = "matrix multiply (GEMM)"
    if acc:
        k.details["accumulator"] = PREFIX.get(acc, acc)
        meaning += f"; MMA accumulates in {PREFIX.get(acc, acc)}"
    if shape:
        k.details["mma_shape"] = dims(shape)
        meaning += f"; MMA instruction {dims(shape)}"
    if mmain:
        k.precision = DTYPE.get(mmain, mmain)
        meaning += f"; MMA consumes {k.precision}"
    k.add(toks[0], "op", meaning)
    return 1


def _c3_token(k: Draft, toks: list[str], i: int) -> int:
    """Decode the geometry / schedule / epilogue token at ``i``; returns the index of the last token
    consumed."""
    t = toks[i]
    if _MNK.fullmatch(t) and k.tile is None:
        add_tile(k, t)
    elif _MNK.fullmatch(t) and k.cluster is None:
        k.cluster = t
        k.add(t, "cluster", f"thread-block cluster {dims(t)}")
    elif t.isdigit() and k.stages is None and k.cluster is not None:
        k.stages = int(t) or None
        k.add(
            t,
            "stages",
            "pipeline stages chosen automatically" if t == "0" else f"{t} pipeline stages",
        )
    elif re.fullmatch(r"[ntch]{3}", t):
        add_layout(k, t, style="cutlass")
    elif t.startswith("align") and t[5:].isdigit():
        add_alignment(k, t, "A and B")
    elif t in _MIXED:
        k.add(t, "mixed dtype", _MIXED[t])
    elif t in ("warpspecialized", "tma"):
        sched = [t]
        while i + 1 < len(toks) and toks[i + 1] in _SCHEDULE_PARTS:
            i += 1
            sched.append(toks[i])
        k.details["schedule"] = "_".join(sched)
        k.add(
            "_".join(sched), "schedule", "warp-specialized " + (" ".join(sched[1:]) or "mainloop")
        )
    elif t in DTYPE and k.epilogue and k.tokens and k.tokens[-1][0] == "bias":
        k.add(t, "epilogue", f"bias in {DTYPE[t]}")
    elif t in _EPI_ACT:
        k.epilogue = (k.epilogue + "+" if k.epilogue else "") + t
        k.add(t, "epilogue", f"{t} fused into the epilogue")
    elif t == "epi":
        ep = [toks[i + 1]] if i + 1 < len(toks) else []
        i += len(ep)
        k.epilogue = "_".join(["epi", *ep])
        meaning = {"tma": "epilogue stores through TMA", "nosmem": "epilogue without shared memory"}
        k.add(k.epilogue, "epilogue", meaning.get(ep[0] if ep else "", "epilogue " + " ".join(ep)))
    else:
        k.add(t, "raw", "not decoded")
    return i
