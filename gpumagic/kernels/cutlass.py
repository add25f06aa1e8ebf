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
    MN_TOKEN,
    MNK_TOKEN,
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
    tensor_core_math,
    upper,
)

_C2 = re.compile(
    r"^cutlass(?:__5x_cudnn)?_(?:(?P<arch>\d{2,3}a?)_)?(?P<opclass>tensorop|simt|wmma_tensorop|wmmatensorop|wmma|gemv)_"
    # the generator's extended name may lead with the A/B element type:
    # cutlass_tensorop_f16_s16816gemm_f16_...
    r"(?:(?P<ab>bf16|f16|tf32|f32|f64|cf32|cf64|s8|u8|s4|u4|e4m3|e5m2)_)?"
    r"(?P<core>[a-z]\d*(?!\d)[a-z0-9]*?(?:gemm|fprop|dgrad|wgrad|conv\w*?|gemv)(?:_grouped|_planar_complex|_sparse)?)"
    r"(?P<rest>_.*)?$"
)
_C2_CORE = re.compile(r"^([a-z])(\d*)(?!\d)([a-z0-9]*?)(gemm|fprop|dgrad|wgrad|gemv|conv\w*?)(.*)$")
#: the instruction part's op word -> (op, what it means); any other word is its own op and meaning
_C2_OPS = {
    "gemm": ("gemm", "matrix multiply (GEMM)"),
    "fprop": ("conv_fprop", "convolution forward"),
    "dgrad": ("conv_dgrad", "convolution data gradient"),
    "wgrad": ("conv_wgrad", "convolution weight gradient"),
}


def decode_cutlass2(k: Draft, sym: str, full: str) -> bool:
    """``cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4``: a CUTLASS 2.x procedural name (also
    as cuBLAS and cuDNN ship it), read token by token after the instruction part."""
    m = _C2.match(sym)
    if not m:
        return False
    where = " (in cuDNN)" if "cudnn" in full else " (in cuBLAS)" if "cublas" in full else ""
    k.identify("cutlass2", "CUTLASS 2.x" + where)
    k.add("cutlass", "library", "CUTLASS 2.x procedural name")
    if m.group("arch"):
        k.set_arch(m.group("arch"))
    opclass = m.group("opclass")
    # cuBLAS's WMMA fallbacks on SM 12.x say ``wmma`` alone (cutlass_80_wmma_h161616gemm_...)
    k.tensor_cores = "tensorop" in opclass or "wmma" in opclass
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
        elif MN_TOKEN.fullmatch(t) and k.tile is None:
            add_tile(k, t)
            nxt = toks[i + 1] if i + 1 < len(toks) else ""
            if MN_TOKEN.fullmatch(nxt):
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
    k.op, meaning = _C2_OPS.get(op, (op, op))
    k.add(op + tail, "op", meaning)


_C3 = re.compile(
    r"^cutlass3x_(?P<arch>sm\d+a?)_(?P<opclass>tensorop|simt|bstensorop|sptensorop|bssptensorop)_"
    r"(?P<body>.*)$"
)
# the MMA instruction: Hopper / datacenter Blackwell spell it M×N×K (s64x128x16gemm); SM 12.x's
# warp-level mma spells it as digits (s16832gemm: m16n8k32), as CUTLASS 2.x did
_C3_INSTR = re.compile(
    r"(?:([shdi])(?=\d|gemm))?(\d+x\d+x\d+|\d{4,6}(?=gemm))?([a-z0-9]*?)"
    r"(gemm|conv\dd\w*|fprop|dgrad|wgrad|sparse_gemm|bsspgemm|spgemm)"
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
    """``cutlass3x_sm90_tensorop_s64x128x16gemm_f16_f16_f32_..._128x128x64_1x2x1_0_tnn_align8_...``:
    a CUTLASS 3.x generated name: instruction, dtypes, then geometry, schedule and epilogue."""
    m = _C3.match(sym)
    if not m:
        return False
    k.identify("cutlass3", "CUTLASS 3.x")
    k.add("cutlass3x", "library", "CUTLASS 3.x (CuTe) generated kernel")
    k.set_arch(m.group("arch"))
    k.tensor_cores = m.group("opclass") != "simt"
    if k.tensor_cores:
        k.math = tensor_core_math(k.arch)
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
        k.details["mma_shape"] = dims(shape) if "x" in shape else mma_dims(shape)
        meaning += f"; MMA instruction {k.details['mma_shape']}"
    if mmain in DTYPE:
        k.precision = DTYPE[mmain]
        meaning += f"; MMA consumes {k.precision}"
    elif acc == "h":
        k.precision = "fp16"  # accumulating in fp16: fp16 operands
    k.add(toks[0], "op", meaning)
    return 1 + _c3_block_scaled(k, toks, 1)


#: Block-scaled operand types (``ue4m3xe2m1``: UE4M3 scale factors over E2M1 elements), as
#: CUTLASS's generator names them (scale type x element type); ``f4`` is its short E2M1.
_BS_PAIR = re.compile(r"(?P<scale>ue4m3|ue8m0)x(?P<elem>e2m1|f4|e4m3|e5m2|e2m3|e3m2|f6|f8)")
_BS_ELEMENT = {"f4": "e2m1", "f8": "e4m3", "f6": "e3m2"}
_BLOCKWISE = re.compile(r"\d+x\d+f32x(?P<elem>e4m3|e5m2|bf16|f16)")


def block_scaled_precision(scale: str, elem: str) -> str:
    """NVFP4 is E2M1 data with a UE4M3 scale per 16 elements; MX formats are UE8M0-scaled (per 32):
    MXFP8 (E4M3/E5M2), MXFP6 (E2M3/E3M2), MXFP4 (E2M1). A UE4M3 scale over another element type
    gets that type with the scale said, not a format name the library does not use."""
    elem = _BS_ELEMENT.get(elem, elem)
    if scale == "ue4m3":
        return "nvfp4" if elem == "e2m1" else f"fp8{elem}" if elem in ("e4m3", "e5m2") else elem
    if elem == "e2m1":
        return "mxfp4"
    return f"mxfp6{elem}" if elem in ("e2m3", "e3m2") else f"mxfp8{elem}"


def _c3_block_scaled(k: Draft, toks: list[str], i: int) -> int:
    """After the instruction: ``block_scaled`` and the A and B ``<scale>x<element>`` pairs of a
    block-scaled GEMM, or the ``<granularity>f32x<element>`` pairs of a blockwise-scaled one; the
    precision is the operands' (mixed A and B: none, both in ``dtypes``).
    Returns the tokens used."""
    start = i
    if toks[i : i + 2] == ["block", "scaled"]:
        k.add("block_scaled", "block scaled", "operands carry per-block scale factors")
        i += 2
    kinds = []
    while i < len(toks) and (pm := _BS_PAIR.fullmatch(toks[i]) or _BLOCKWISE.fullmatch(toks[i])):
        if "scale" in pm.groupdict():
            kind = block_scaled_precision(pm["scale"], pm["elem"])
            k.details["block_scaled"] = True
            k.add(toks[i], "dtype", f"{kind}: {pm['scale'].upper()} scales over {pm['elem']}")
        else:
            kind = DTYPE.get(pm["elem"], pm["elem"])
            k.details["blockwise_scaled"] = True
            k.add(toks[i], "dtype", f"{kind} with fp32 scales per {pm.group(0).split('f32')[0]}")
        kinds.append(kind)
        i += 1
    if kinds:
        k.dtypes = tuple(kinds)
        k.precision = kinds[0] if len(set(kinds)) == 1 else None
        if len(set(kinds)) > 1:
            k.details["mixed_inputs"] = " x ".join(kinds)
        while i < len(toks) and toks[i] in DTYPE:  # accumulator, C, D
            k.add(toks[i], "dtype", f"{DTYPE[toks[i]]} accumulator / C / D")
            i += 1
    return i - start


def _c3_token(k: Draft, toks: list[str], i: int) -> int:
    """Decode the geometry / schedule / epilogue token at ``i``; returns the index of the last token
    consumed."""
    t = toks[i]
    if MNK_TOKEN.fullmatch(t) and k.tile is None:
        add_tile(k, t)
    elif MNK_TOKEN.fullmatch(t) and k.cluster is None:
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
    elif t in ("1sm", "2sm"):
        k.details["cta_group"] = int(t[0])
        k.add(t, "cta group", "one MMA per CTA" if t == "1sm" else "2-SM MMA: a CTA pair per tile")
    elif re.fullmatch(r"vs\d+", t):
        k.details["scale_vector"] = int(t[2:])
        k.add(t, "scale vector", f"one scale factor per {t[2:]} elements")
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
