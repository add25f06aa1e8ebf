"""cuBLAS and cuDNN's generated GEMM kernels: the xmma generator's names and cuBLASLt's nvjet names.

``sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_
cublas`` lists the operation, the dtypes (inputs, math and accumulator, output), the layouts, the
tile and the warp arrangement. Telling FFMA kernels from tensor-core ones matters most here: an fp32
GEMM that runs on CUDA cores is the first thing a profile should point out, and the only sign of it
may be ``ffma`` or ``f32f32_f32f32`` in the name. nvjet names are terser and partly unpublished;
what is not published is labelled so rather than guessed. Since cuBLAS 12.9 the architecture token
is left out (``nvjet_tst_192x8_64x8_2x1_v_bz_TNT`` beside the older ``nvjet_sm90_tst_...``); the
rest of the grammar is the same, so both read alike, the newer without an arch.
"""

from __future__ import annotations

import re

from .name import (
    DTYPE,
    MN_TOKEN,
    MNK_TOKEN,
    OP_LABEL,
    Draft,
    add_ktile_stages,
    add_layout,
    add_tile,
    dims,
    geometry,
    layout_meaning,
    tensor_core_math,
    upper,
)

_XMMA = re.compile(
    r"^(?P<arch>sm\d+a?)_xmma_(?P<body>.*?)(?:__(?P<ver>\d+x)_(?P<lib>cublas|cudnn|cublasLt))?$"
)
_XMMA_OP = re.compile(
    r"gemm|fprop|dgrad|wgrad|implicit|indexed|gemv|grouped|batched|syr2k|her2k|syrk|herk|trmm|conv\w*"
)
#: xmma's dtype codes, a subset of CUTLASS's (:data:`.name.DTYPE` says what each means)
_XMMA_CODES = r"cf64|cf32|bf16|tf32|f16|f32|f64|e4m3|e5m2|s8|s32|i8|i32|u8|f8"
_XMMA_DTYPES = re.compile(rf"(?:{_XMMA_CODES})+")
_XMMA_CODE = re.compile(_XMMA_CODES)
_MAX_VARIANT_WORDS = 3
_XMMA_VARIANT = {"wo_smem": "without shared-memory staging"}
_KSPLIT = {
    "segment_k_off": "segment-K off",
    "segment_k_on": "segment-K: K split across CTAs",
    "split_k": "split-K: partial sums reduced after",
}


def decode_xmma(k: Draft, sym: str, full: str) -> bool:
    """``sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32_..._cublas``: the xmma
    generator's GEMMs and convolutions, read left to right: op, variant words, dtypes, then layout,
    geometry and schedule tokens; whether the math runs on tensor cores last, from all of them."""
    m = _XMMA.match(sym)
    if not m:
        return False
    # a convolution is cuDNN's whatever the suffix says: cuBLAS runs no convolutions
    conv = re.match(r"(?:fprop|dgrad|wgrad)_", m.group("body")) is not None
    lib = m.group("lib") or ("cudnn" if "cudnn" in full or conv else "cublas")
    if lib == "cudnn":
        k.identify("cudnn", "cuDNN")
    else:
        k.identify("cublas_xmma", "cuBLAS")
    k.set_arch(m.group("arch"))
    k.add("xmma", "library", f"{k.library}'s xmma kernel generator")
    toks = m.group("body").split("_")
    i = _xmma_variant(k, toks, _xmma_op(k, toks))
    i, parsed = _xmma_dtypes(k, toks, i)
    ffma = False
    while i < len(toks):
        i, is_ffma = _xmma_token(k, toks, i)
        ffma = ffma or is_ffma
        i += 1
    # FFMA in the name, or fp32 math on fp32 inputs (f32f32_f32f32, not tf32f32), is the CUDA-core
    # path
    ffma = ffma or (
        len(parsed) >= 2 and parsed[0][:1] in (["f32"], ["cf32"]) and parsed[1][:1] == ["f32"]
    )
    k.tensor_cores = not ffma
    if ffma:
        k.math = "SIMT (CUDA cores, FFMA)"
    else:
        k.math = "tensor cores (wgmma)" if k.warpgroups else "tensor cores (mma)"
    path = "FFMA" if ffma else "tensor-core"
    k.short = f"{k.library} {upper(k.precision)} {OP_LABEL.get(k.op, k.op)} ({path})" + geometry(k)
    return True


def _xmma_op(k: Draft, toks: list[str]) -> int:
    """The op words that lead the body (gemm | fprop_implicit_gemm | wgrad_indexed_implicit_gemm |
    syr2k_l | ...), with a rank-k update's fill letter; returns the index of the next token."""
    ops = []
    i = 0
    while i < len(toks) and _XMMA_OP.fullmatch(toks[i]):
        ops.append(toks[i])
        i += 1
    opname = "_".join(ops)
    k.op = (
        ("conv_" + ops[0])
        if ops and ops[0] in ("fprop", "dgrad", "wgrad")
        else "gemm"
        if "gemm" in ops
        else opname
    )
    k.add(opname, "op", {"gemm": "matrix multiply (GEMM)"}.get(opname, opname.replace("_", " ")))
    if i < len(toks) and toks[i] in ("l", "u") and k.op in ("syr2k", "her2k", "syrk", "herk"):
        k.details["fill"] = "lower" if toks[i] == "l" else "upper"
        k.add(toks[i], "fill", f"writes the {k.details['fill']} triangle of C")
        i += 1
    return i


def _xmma_variant(k: Draft, toks: list[str], i: int) -> int:
    """Variant words between the op and the dtypes (implicit_gemm_indexed_wo_smem_tf32f32...): the
    dtypes must still be found, so words are read as a variant only when a dtype token follows
    within a few tokens. Returns the index of the next token."""
    j = next(
        (
            j
            for j in range(i, min(i + _MAX_VARIANT_WORDS + 1, len(toks)))
            if _XMMA_DTYPES.fullmatch(toks[j])
        ),
        i,
    )
    if j > i and all(t.isalpha() for t in toks[i:j]):
        variant = "_".join(toks[i:j])
        k.details["variant"] = variant
        k.add(variant, "variant", _XMMA_VARIANT.get(variant, "kernel variant (not decoded)"))
        return j
    return i


def _xmma_dtypes(k: Draft, toks: list[str], i: int) -> tuple[int, list[list[str]]]:
    """Up to three tokens of concatenated dtype codes: inputs (A, B), math and accumulator, output.
    Returns the index of the next token and each token's codes."""
    dt_roles = []
    while i < len(toks) and _XMMA_DTYPES.fullmatch(toks[i]):
        dt_roles.append(toks[i])
        i += 1
    parsed = [_XMMA_CODE.findall(d) for d in dt_roles]
    for tok, codes, label in zip(
        dt_roles, parsed, ["inputs (A, B)", "math and accumulator", "output"]
    ):
        k.add(tok, "dtype", f"{label}: {', '.join(DTYPE[c] for c in codes)}")
    k.dtypes = tuple(DTYPE[c] for codes in parsed for c in codes)
    if len(parsed) >= 2:
        # the math input type: tf32 for f32f32_tf32f32; a complex GEMM's math type is its real
        # part's
        k.precision = DTYPE[parsed[0][0] if parsed[0][0].startswith("c") else parsed[1][0]]
        k.details["accumulator"] = DTYPE[parsed[1][-1]]
    elif parsed:
        k.precision = DTYPE[parsed[0][0]]
    return i, parsed


def _xmma_token(k: Draft, toks: list[str], i: int) -> tuple[int, bool]:
    """Decode the token at ``i``; returns (index of the last token consumed, whether it said
    FFMA)."""
    t = toks[i]
    if re.fullmatch(r"[ntc]{2}", t) and k.layout is None:
        add_layout(k, t, "AB")
    elif re.fullmatch(r"[ntc]", t):
        k.details["c_layout"] = t
        k.add(t, "layout C", layout_meaning(t, "C"))
    elif re.fullmatch(r"n[hcdw]+k[rsct]+|nchw|nhwc|ndhwc", t):
        k.layout = (k.layout + "/" + t) if k.layout else t
        k.add(t, "layout", f"tensor layout {t.upper()}")
    elif t.startswith("tilesize"):
        add_tile(k, t[8:], t)
    elif t.startswith("stage") and t[5:].isdigit():
        k.stages = int(t[5:])
        k.add(t, "stages", f"{t[5:]}-stage pipeline")
    elif t.startswith("warpsize"):
        k.warps = t[8:]
        k.add(t, "warps", f"warps per block {dims(k.warps)}")
    elif t.startswith("warpgroupsize"):
        k.warpgroups = t[13:]
        k.add(t, "warpgroups", f"warpgroups per block {dims(k.warpgroups)} (Hopper wgmma)")
    elif t == "ffma":
        k.add(t, "math", "FFMA: fp32 fused multiply-add on CUDA cores, not tensor cores")
        return i, True
    elif re.fullmatch(r"tensor\d+x\d+x\d+", t):
        k.details["mma_shape"] = dims(t[6:])
        k.add(t, "math", f"tensor-core MMA {dims(t[6:])}")
    elif t.startswith("align"):
        k.alignment = (k.alignment + "," if k.alignment else "") + t[5:]
        operand = t[5:-1].upper() or "?"
        k.add(
            t, "alignment", f"operand {operand} aligned to {re.sub(r'^[a-z]+', '', t[5:])} elements"
        )
    elif t in ("execute", "kernel"):
        k.add(t, "raw", "kernel entry")
    elif t in ("segment", "split", "stream") and i + 1 < len(toks) and toks[i + 1] == "k":
        mode = t + "_k"
        if i + 2 < len(toks) and toks[i + 2] in ("on", "off"):
            mode += "_" + toks[i + 2]
            i += 1
        i += 1
        k.details["k_split"] = mode
        k.add(mode, "k split", _KSPLIT.get(mode, mode.replace("_", " ")))
    elif re.fullmatch(r"g\d+", t):
        k.details["groups"] = int(t[1:])
        k.add(t, "groups", f"{t[1:]} convolution group(s)")
    else:
        k.add(t, "raw", "not decoded")
    return i, False


_NVJET = re.compile(r"^nvjet_(?:(?P<arch>sm\d+a?)_)?(?P<body>.*)$")
# nvjet letters for A/B, C, compute, D (cuBLASLt): h=fp16, t=bf16, s=fp32, d=fp64, q=fp8 e4m3, o=fp8
# e5m2, i=int8.
_NVJET_LETTERS = {
    "h": "fp16",
    "t": "bf16",
    "s": "fp32",
    "d": "fp64",
    "q": "fp8e4m3",
    "o": "fp8e5m2",
    "i": "int8",
    "e": "fp8e5m2",
    # 'b' leads the int8 kernels cuBLAS's FP64 emulation (Ozaki scheme II) runs on SM 12.x
    # (nvjet_sm120_biu_mma_...): int8 operands, int32 ('i') accumulation
    "b": "int8",
}


def decode_nvjet(k: Draft, sym: str, full: str) -> bool:
    """``nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopA_NNT``: cuBLASLt's nvjet GEMMs, always on tensor
    cores; the dtype letters first, then the n-th M×N token is the tile, the K-tile × stages, the
    cluster, and the rest are schedule, epilogue, scaling and layout tokens."""
    m = _NVJET.match(sym)
    if not m:
        return False
    k.identify("nvjet", "cuBLAS (nvjet)", "gemm", tensor_cores=True)
    k.add("nvjet", "library", "cuBLASLt's nvjet GEMM kernels (tensor cores)")
    if m.group("arch"):
        k.set_arch(m.group("arch"))
    # current cuBLAS leaves the SM token out (nvjet_tst_192x8_64x8_2x1_v_bz_TNT): the same grammar
    # follows
    else:
        k.add("nvjet_", "arch", "architecture not in the name (cuBLAS 12.9+ spelling)")
    k.math = tensor_core_math(k.arch)
    toks = m.group("body").split("_")
    if toks and re.fullmatch(r"[a-z]{3,6}", toks[0]):
        _nvjet_dtypes(k, toks.pop(0))
    n_geo = 0  # the n-th MxN token is the tile, then K-tile x stages, then the cluster
    scales: list[tuple[str, int, str]] = []
    for t in toks:
        if MN_TOKEN.fullmatch(t):
            _nvjet_geometry(k, t, n_geo)
            n_geo += 1
        elif t == "mma":
            k.math = "tensor cores (mma.sync)"
            k.add(t, "math", "mma.sync tensor cores (SM12x has no wgmma or tcgen05)")
        elif MNK_TOKEN.fullmatch(t) and n_geo == 0:
            add_tile(k, t)  # the mma form spells the whole tile, M×N×K, then the stages
            n_geo = 2
        elif t.isdigit() and n_geo == 2 and k.tile and k.stages is None:
            k.stages = int(t)
            k.add(t, "stages", f"{t} pipeline stages")
        elif MNK_TOKEN.fullmatch(t) and k.math == "tensor cores (mma.sync)":
            k.details["warp_tile"] = t
            k.add(t, "warp tile", f"tile of each warp M×N×K = {dims(t)}")
        elif t.startswith("tma") or t.startswith("alignCD"):
            k.add(t, "raw", "operands loaded by TMA" if t.startswith("tma") else "C/D alignment")
        elif (vec := _VEC.fullmatch(t)) is not None:
            scales.append((vec["op"], int(vec["n"]), vec["scale"]))
            k.add(t, "scales", f"{vec['op']}: one {vec['scale']} scale per {vec['n']} elements")
        elif t in ("h", "v"):
            k.add(t, "raw", "raster order (h or v; meaning not published)")
        elif t in ("bz", "badd"):
            k.add(
                t,
                "raw",
                "not published" if t == "bz" else "not published (seen with a beta·C epilogue)",
            )
        elif t.startswith(("coop", "ping")):
            sched = "cooperative" if t.startswith("coop") else "ping-pong"
            k.details["schedule"] = sched
            k.add(t, "schedule", f"{sched} warp-specialized schedule")
        elif t == "bias":
            k.epilogue = "bias"
            k.add(t, "epilogue", "bias added in the epilogue")
        elif re.fullmatch(r"[NT]{3,4}", t):
            # three letters: A, B, D; the SM 12.x mma form gives four: A, B, C, D
            add_layout(k, t, "ABD" if len(t) == 3 else "ABCD")
        elif t.startswith("algo"):
            k.add(t, "raw", "algorithm variant")
        elif re.fullmatch(r"\dcta", t):
            k.details["cta_group"] = int(t[0])
            k.add(t, "cta group", f"{t[0]} CTAs share each MMA (Blackwell CTA pair)")
        elif t.lower() == "splitk":
            k.details["k_split"] = "split_k"
            k.add(t, "k split", "split-K: partial sums reduced after")
        else:
            k.add(t, "raw", "not decoded")
    if scales:
        _block_scaled(k, scales)
    k.short = f"cuBLAS nvjet {upper(k.precision)} GEMM" + geometry(k)
    return True


_VEC = re.compile(r"(?P<op>[AB])vec(?P<n>\d+)(?P<scale>UE4M3|UE8M0)")


def _block_scaled(k: Draft, scales: list[tuple[str, int, str]]) -> None:
    """Block-scaled operands (Blackwell): UE4M3 scales per 16 elements are NVFP4 (E2M1 data);
    UE8M0 scales per 32 are an MX format, whose element type the letters give only for FP8 (an
    FP4/FP6 element is not told apart there: no precision rather than a wrong one)."""
    kinds = {(n, scale) for _, n, scale in scales}
    k.details["block_scaled"] = ", ".join(f"{op}: {scale} per {n}" for op, n, scale in scales)
    if (16, "UE4M3") in kinds:
        k.precision = "nvfp4"
        k.details["element"] = "fp4 e2m1"
    elif (32, "UE8M0") in kinds:
        # 'o' is FP4 in NVFP4 names: with UE8M0 scales it may be MXFP4 as well as an FP8 E5M2
        letters = k.dtypes[0] if k.dtypes else ""
        trusted = (k.precision or "").startswith("fp8") and letters != "fp8e5m2"
        k.precision = "mx" + str(k.precision) if trusted else None


def _nvjet_dtypes(k: Draft, letters: str) -> None:
    """3 letters: A/B, compute, D (hsh = fp16 in, fp32 accumulate, fp16 out); 5 letters: A, B, C,
    compute, D."""
    if letters[0] not in _NVJET_LETTERS:
        # an input letter whose type is not published: no precision rather than a guessed one
        k.add(letters, "dtypes", "input type letter not known: precision not read")
        return
    # a later letter not published (the 'u' of 'biu') is said so; the inputs still decide
    names = [_NVJET_LETTERS.get(c, f"'{c}' (not published)") for c in letters]
    k.dtypes = tuple(n for n in names if "'" not in n)
    if len(names) >= 5:
        ab, c = names[:2], [names[2]]
    elif len(names) == 4:
        ab, c = names[:2], []
    else:
        ab, c = names[:1], []
    k.precision = ab[0]
    if letters[-2] == "i":  # an integer GEMM accumulates in int32
        names[-2] = "int32"
    k.details["accumulator"] = names[-2]
    k.add(
        letters,
        "dtypes",
        f"inputs {', '.join(ab)}; "
        + (f"C {c[0]}; " if c else "")
        + f"accumulate in {names[-2]}; output {names[-1]}",
    )


def _nvjet_geometry(k: Draft, t: str, idx: int) -> None:
    """The n-th MxN token: block tile, then K-tile × stages, then cluster."""
    if idx == 0:
        add_tile(k, t)
    elif idx == 1:
        add_ktile_stages(k, t)
    elif idx == 2:
        k.cluster = t + "x1"
        k.add(t, "cluster", f"thread-block cluster {dims(t)}")
