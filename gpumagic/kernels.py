"""Kernel names that explain themselves: ``decode(name) -> KernelName``. No torch import.

A profile's answer is a kernel name, and the names are dense codes: ``cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4``
is CUTLASS, SM 8.0, tensor cores, fp32 accumulate with the 16×8×8 (TF32) MMA, a 128×128 block tile, K-tile 32,
3 pipeline stages, both operands column-major, 16-byte (4-element) alignment. The decoder reads the naming grammars
of the libraries that make them (CUTLASS's generator, cuBLAS/cuBLASLt's xmma and nvjet, cuDNN, flash-attention,
ATen, Triton/Inductor, NCCL, profiler memory operations) rather than matching a list, so names it has never seen
decode too. Whatever it cannot place is kept as a named raw token; unknown names decode to family ``other``.

Names arrive in two spellings: torch.profiler's (``<4, ...>``, ``(anonymous namespace)``, ``3ul``) and nsys'
(``<(int)4, ...>``, ``<unnamed>``); Itanium-mangled names (``_Z...``) are demangled first.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache, lru_cache

__all__ = ["FAMILIES", "KernelName", "decode", "demangle", "normalize"]

FAMILIES = (
    "cutlass2",
    "cutlass3",
    "cublas_xmma",
    "cublas_legacy",
    "nvjet",
    "cudnn",
    "flash_attention",
    "aten",
    "triton",
    "nccl",
    "memop",
    "other",
)

# Short dtype codes used across CUTLASS, cuBLAS, cuDNN names -> canonical names.
_DTYPE = {
    "f64": "fp64",
    "f32": "fp32",
    "tf32": "tf32",
    "f16": "fp16",
    "bf16": "bf16",
    "e4m3": "fp8e4m3",
    "e5m2": "fp8e5m2",
    "f8": "fp8",
    "s8": "int8",
    "u8": "uint8",
    "i8": "int8",
    "s32": "int32",
    "i32": "int32",
    "s4": "int4",
    "u4": "uint4",
    "void": "void",
    "e2m1": "fp4e2m1",
    "ue8m0": "ue8m0",
    "fp16": "fp16",
    "fp32": "fp32",
    "half": "fp16",
    "float": "fp32",
    "double": "fp64",
    "bfloat16": "bf16",
}
# CUTLASS 2.x and legacy cuBLAS one-letter precision prefixes (s1688gemm, h16816gemm, sgemm, dgemm, ...).
_PREFIX = {"s": "fp32", "h": "fp16", "d": "fp64", "i": "int32", "c": "complex64", "z": "complex128"}
# nvjet letters for A/B, C, compute, D (cuBLASLt): h=fp16, t=bf16, s=fp32, d=fp64, q=fp8 e4m3, o=fp8 e5m2, i=int8.
_NVJET_LETTERS = {
    "h": "fp16",
    "t": "bf16",
    "s": "fp32",
    "d": "fp64",
    "q": "fp8e4m3",
    "o": "fp8e5m2",
    "i": "int8",
    "e": "fp8e5m2",
}
# MMA instruction shapes and the input precision they imply (Volta 884, Turing/Ampere 1688/16816/8816/16832).
_MMA_SHAPE = {"1688": "tf32", "16816": "fp16/bf16", "884": "fp16", "8816": "int8", "16832": "int8", "1684": "tf32"}
_ARCH_NAMES = {
    "maxwell": "sm50",
    "pascal": "sm60",
    "volta": "sm70",
    "turing": "sm75",
    "ampere": "sm80",
    "ada": "sm89",
    "hopper": "sm90",
    "blackwell": "sm100",
}
_LAYOUT_MEANING = {"n": "column-major (not transposed)", "t": "row-major (transposed)"}


@dataclass
class KernelName:
    """What a kernel name says. Fields the name does not carry are None."""

    name: str
    demangled: str = ""
    family: str = "other"
    library: str = ""
    op: str = ""
    short: str = ""
    arch: str | None = None
    tensor_cores: bool | None = None
    math: str | None = None
    precision: str | None = None
    dtypes: tuple[str, ...] = ()
    tile: str | None = None
    stages: int | None = None
    warps: str | None = None
    warpgroups: str | None = None
    cluster: str | None = None
    layout: str | None = None
    alignment: str | None = None
    epilogue: str | None = None
    details: dict[str, object] = field(default_factory=dict)
    tokens: list[tuple[str, str, str]] = field(default_factory=list)

    def explain(self) -> list[tuple[str, str, str]]:
        """Token-by-token rows of (token, field, meaning), for display."""
        return list(self.tokens) or [(self.short or self.name, "name", f"{self.family} kernel")]

    def explain_text(self) -> str:
        rows = self.explain()
        w0 = max((len(t) for t, _, _ in rows), default=5)
        w1 = max((len(f) for _, f, _ in rows), default=5)
        head = f"{self.short}  [{self.family}{', ' + self.library if self.library else ''}]"
        return "\n".join([head] + [f"  {t:<{w0}}  {f:<{w1}}  {m}" for t, f, m in rows])

    def _add(self, token: str, fieldname: str, meaning: str) -> None:
        self.tokens.append((token, fieldname, meaning))

    def _set_arch(self, token: str, sm: str) -> None:
        self.arch = sm
        self._add(token, "arch", f"compiled for SM {sm[2:-1]}.{sm[-1]} ({sm})")


# ---------------------------------------------------------------------------------------------------------------
# Spelling: demangling and normalisation
# ---------------------------------------------------------------------------------------------------------------


@cache
def _cxa_demangle() -> object | None:
    for libname in ("stdc++", "c++"):
        path = ctypes.util.find_library(libname) or (f"lib{libname}.so.6" if sys.platform.startswith("linux") else None)
        if not path:
            continue
        try:
            lib = ctypes.CDLL(path)
            fn = lib.__cxa_demangle
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_void_p
        fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int)]
        return fn
    return None


def demangle(name: str) -> str:
    """Demangle an Itanium C++ name (``_Z...``); other names come back unchanged."""
    if not name.startswith("_Z"):
        return name
    fn = _cxa_demangle()
    if fn is not None:
        status = ctypes.c_int(0)
        ptr = fn(name.encode(), None, None, ctypes.byref(status))  # type: ignore[operator]
        if ptr and status.value == 0:
            text = ctypes.string_at(ptr).decode(errors="replace")
            libc = ctypes.CDLL(None)
            libc.free(ctypes.c_void_p(ptr))
            return text
    if shutil.which("c++filt"):
        try:
            out = subprocess.run(["c++filt", name], capture_output=True, text=True, timeout=5).stdout.strip()
            if out:
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    return name


_CAST = re.compile(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool|unsigned)\)(-?\d+)")


def normalize(name: str) -> str:
    """One spelling for torch.profiler's and nsys' forms of the same demangled name."""
    s = _CAST.sub(r"\1", name)
    s = s.replace("<unnamed>", "(anonymous namespace)").replace("{unnamed}", "(anonymous namespace)")
    s = re.sub(r"(\d+)(?:ul|ull|u|l|ll)\b", r"\1", s)
    s = s.replace(" *", "*").replace(" &", "&")
    return s


# ---------------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------------


def _kernel_symbol(s: str) -> str:
    """The bare kernel symbol of a possibly templated, namespaced C++ signature:
    'void cutlass::Kernel2<cutlass_80_simt_sgemm_..>(..)' -> 'cutlass_80_simt_sgemm_..' (the interesting part)."""
    m = re.search(
        r"\b(cutlass3x_\w+|cutlass_(?:\d{2,3}a?_)?(?:tensorop|simt|wmma\w*|gemv)_\w+|sm\d+a?_xmma_\w+|nvjet_\w+"
        r"|ncclDevKernel_\w+|ncclKernel_\w+)",
        s,
    )
    if m:
        return m.group(1)
    return s


def _function_path(s: str) -> str:
    """'void at::native::foo<...>(...)' -> 'at::native::foo' (template arguments and parameters removed)."""
    s = re.sub(r"^(?:void|static|__global__|\s)+", "", s)
    depth = 0
    out = []
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            # '(anonymous namespace)' is part of the path
            rest = s[len("".join(out)) :]
            if rest.startswith("(anonymous namespace)"):
                out.append("(anonymous namespace)")
                s = "".join(out) + rest[len("(anonymous namespace)") :]
                continue
            break
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip()


def _template_args(s: str) -> str:
    """Everything between the first '<' and its matching '>' ('' when there is none)."""
    start = s.find("<")
    if start < 0:
        return ""
    depth = 0
    for i in range(start, len(s)):
        if s[i] == "<":
            depth += 1
        elif s[i] == ">":
            depth -= 1
            if depth == 0:
                return s[start + 1 : i]
    return s[start + 1 :]


def _split_top(args: str) -> list[str]:
    """Split template arguments at top-level commas."""
    out, depth, cur = [], 0, []
    for ch in args:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur).strip())
    return out


_CPP_TYPE = {
    "float": "fp32",
    "double": "fp64",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "cutlass::half_t": "fp16",
    "cutlass::bfloat16_t": "bf16",
    "__half": "fp16",
    "__nv_bfloat16": "bf16",
    "long": "int64",
    "int": "int32",
    "bool": "bool",
    "unsigned char": "uint8",
    "signed char": "int8",
    "short": "int16",
    "c10::Float8_e4m3fn": "fp8e4m3",
    "c10::Float8_e5m2": "fp8e5m2",
    "unsigned int": "uint32",
    "unsigned long": "uint64",
    "c10::complex<float>": "complex64",
}


def _cpp_dtypes(text: str) -> tuple[str, ...]:
    """Canonical dtypes of the C++ types named in ``text``, in order of first appearance."""
    first: dict[str, int] = {}
    for cpp, canon in _CPP_TYPE.items():
        m = re.search(r"(?<![\w:])" + re.escape(cpp) + r"(?![\w])", text)
        if m and (canon not in first or m.start() < first[canon]):
            first[canon] = m.start()
    return tuple(sorted(first, key=first.__getitem__))


def _dims(text: str) -> str:
    return "\u00d7".join(text.split("x"))


def _geometry(k: KernelName, *, mn_only: bool = False, cluster: bool = False, schedule: bool = False) -> str:
    """The tile / cluster / layout / schedule tail of a GEMM's short label: ' 128×128, cluster 2×1×1, nn'."""
    out = ""
    if k.tile:
        out += f" {_dims('x'.join(k.tile.split('x')[:2]) if mn_only else k.tile)}"
    if cluster and k.cluster:
        out += f", cluster {_dims(k.cluster)}"
    if k.layout:
        out += f", {k.layout}"
    if schedule and "schedule" in k.details:
        out += f", {str(k.details['schedule']).replace('warpspecialized_', '')}"
    return out


# ---------------------------------------------------------------------------------------------------------------
# Family decoders. Each takes (k, symbol, full) and returns True when it recognised the name.
# ---------------------------------------------------------------------------------------------------------------

_C2 = re.compile(
    r"^cutlass(?:__5x_cudnn)?_(?:(?P<arch>\d{2,3}a?)_)?(?P<opclass>tensorop|simt|wmma_tensorop|wmmatensorop|gemv)_"
    r"(?P<core>[a-z]\d*[a-z0-9]*?(?:gemm|fprop|dgrad|wgrad|conv\w*?|gemv)(?:_grouped|_planar_complex|_sparse)?)"
    r"(?P<rest>_.*)?$"
)


def _decode_cutlass2(k: KernelName, sym: str, full: str) -> bool:
    m = _C2.match(sym)
    if not m:
        return False
    k.family = "cutlass2"
    k.library = "CUTLASS 2.x" + (" (in cuDNN)" if "cudnn" in full else " (in cuBLAS)" if "cublas" in full else "")
    k._add("cutlass", "library", "CUTLASS 2.x procedural name")
    if m.group("arch"):
        a = m.group("arch").rstrip("a")
        k._set_arch(m.group("arch"), f"sm{a}")
    opclass = m.group("opclass")
    k.tensor_cores = "tensorop" in opclass
    k.math = "tensor cores (mma)" if k.tensor_cores else "SIMT (CUDA cores, FFMA)"
    k._add(opclass, "math", "tensor cores" if k.tensor_cores else "SIMT: CUDA cores, no tensor cores")
    core = m.group("core")
    cm = re.match(r"^([a-z])(\d*)([a-z0-9]*?)(gemm|fprop|dgrad|wgrad|gemv|conv\w*?)(.*)$", core)
    if cm:
        prefix, shape, mid, op, tail = cm.groups()
        accum = _PREFIX.get(prefix)
        if shape:
            mma = "\u00d7".join(_split_shape(shape))
            mma_prec = _MMA_SHAPE.get(shape)
            k._add(
                prefix + shape,
                "mma",
                f"accumulate in {accum or prefix}; {mma} MMA instruction"
                + (f" ({mma_prec} inputs)" if mma_prec else ""),
            )
            k.details["mma_shape"] = mma
            k.details["accumulator"] = accum
            k.precision = mma_prec if mma_prec and "/" not in mma_prec else None
        else:
            k._add(prefix, "precision", f"{accum} throughout (SIMT {prefix}{op})")
            k.precision = accum
            k.details["accumulator"] = accum
        if mid:
            k._add(mid, "mma input", f"{_DTYPE.get(mid, mid)} inputs to the MMA")
            k.precision = _DTYPE.get(mid, mid)
        k.op = {
            "gemm": "gemm",
            "fprop": "conv_fprop",
            "dgrad": "conv_dgrad",
            "wgrad": "conv_wgrad",
            "gemv": "gemv",
        }.get(op, op)
        k._add(
            op + tail,
            "op",
            {
                "gemm": "matrix multiply (GEMM)",
                "fprop": "convolution forward",
                "dgrad": "convolution data gradient",
                "wgrad": "convolution weight gradient",
            }.get(op, op),
        )
    rest = (m.group("rest") or "").lstrip("_")
    toks = rest.split("_") if rest else []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t in _DTYPE and k.tile is None:
            k.dtypes += (_DTYPE[t],)
            k._add(t, "dtype", f"{_DTYPE[t]} operands")
            if k.precision is None or k.precision == "fp16/bf16":
                k.precision = _DTYPE[t] if _DTYPE[t] != "fp32" or not k.tensor_cores else "tf32"
        elif t in ("optimized", "analytic", "fixed", "few", "unity"):
            k._add(t, "iterator", f"{t} iterator / channels")
        elif re.fullmatch(r"\d+x\d+", t) and k.tile is None:
            nxt = toks[i + 1] if i + 1 < len(toks) else ""
            km = re.fullmatch(r"(\d+)x(\d+)", nxt)
            if km:
                k.tile = f"{t}x{km.group(1)}"
                k.stages = int(km.group(2))
                k._add(t, "tile", f"block tile M\u00d7N = {_dims(t)}")
                k._add(nxt, "k-tile \u00d7 stages", f"K-tile {km.group(1)}, {km.group(2)}-stage pipeline")
                i += 1
            else:
                k.tile = t
                k._add(t, "tile", f"block tile M\u00d7N = {_dims(t)}")
        elif re.fullmatch(r"[nt]{2,3}", t):
            k.layout = t
            k._add(t, "layout", ", ".join(f"{op} {_LAYOUT_MEANING[c]}" for op, c in zip("ABC", t)))
        elif t in ("nhwc", "nchw", "ndhwc", "ncxhwx"):
            k.layout = t
            k._add(t, "layout", f"tensor layout {t.upper()}")
        elif t.startswith("align") and t[5:].isdigit():
            k.alignment = t[5:]
            k._add(t, "alignment", f"operands aligned to {t[5:]} elements")
        elif t in ("stride", "unity"):
            k._add(t, "stride", "unit-stride specialisation")
        else:
            k._add(t, "raw", "not decoded")
        i += 1
    op_label = {"gemm": "GEMM", "conv_fprop": "conv fprop", "conv_dgrad": "conv dgrad", "conv_wgrad": "conv wgrad"}
    kind = "SIMT" if not k.tensor_cores else "tensor-core"
    prec = (k.precision or "").upper()
    k.short = f"CUTLASS {kind} {prec} {op_label.get(k.op, k.op)}".replace("  ", " ") + _geometry(k, mn_only=True)
    return True


def _split_shape(shape: str) -> list[str]:
    """'1688' -> ['16','8','8'], '16816' -> ['16','8','16'], '884' -> ['8','8','4'], '16832' -> ['16','8','32']."""
    known = {
        "1688": ["16", "8", "8"],
        "16816": ["16", "8", "16"],
        "884": ["8", "8", "4"],
        "8816": ["8", "8", "16"],
        "16832": ["16", "8", "32"],
        "1684": ["16", "8", "4"],
        "16864": ["16", "8", "64"],
        "884884": ["8", "8", "4"],
    }
    return known.get(shape, [shape])


_C3 = re.compile(r"^cutlass3x_(?P<arch>sm\d+a?)_(?P<opclass>tensorop|simt|bstensorop|sptensorop)_(?P<body>.*)$")


def _decode_cutlass3(k: KernelName, sym: str, full: str) -> bool:
    m = _C3.match(sym)
    if not m:
        return False
    k.family = "cutlass3"
    k.library = "CUTLASS 3.x"
    k._add("cutlass3x", "library", "CUTLASS 3.x (CuTe) generated kernel")
    k._set_arch(m.group("arch"), m.group("arch").rstrip("a"))
    k.tensor_cores = m.group("opclass") != "simt"
    k.math = (
        "tensor cores (wgmma)"
        if k.tensor_cores and k.arch == "sm90"
        else ("tensor cores" if k.tensor_cores else "SIMT")
    )
    k._add(m.group("opclass"), "math", "tensor cores" if k.tensor_cores else "SIMT: CUDA cores")
    toks = m.group("body").split("_")
    i = 0
    # instruction: [s|h|...][MxNxK][tf32]gemm, or plain 'gemm'
    t = toks[0]
    im = re.fullmatch(
        r"(?:([shdi])(?=\d|gemm))?(\d+x\d+x\d+)?([a-z0-9]*?)(gemm|conv\dd\w*|fprop|dgrad|wgrad|sparse_gemm)", t
    )
    if im:
        acc, shape, mmain, op = im.groups()
        k.op = "gemm" if "gemm" in op else op
        meaning = "matrix multiply (GEMM)"
        if acc:
            k.details["accumulator"] = _PREFIX.get(acc, acc)
            meaning += f"; MMA accumulates in {_PREFIX.get(acc, acc)}"
        if shape:
            k.details["mma_shape"] = _dims(shape)
            meaning += f"; MMA instruction {_dims(shape)}"
        if mmain:
            k.precision = _DTYPE.get(mmain, mmain)
            meaning += f"; MMA consumes {k.precision}"
        k._add(t, "op", meaning)
        i = 1
    dts = []
    while i < len(toks) and toks[i] in _DTYPE:
        dts.append(toks[i])
        i += 1
    if dts:
        roles = ["A", "B", "accumulator", "C", "D"]
        k.dtypes = tuple(_DTYPE[d] for d in dts)
        for r, d in zip(roles, dts):
            k._add(d, f"dtype {r}", f"{r}: {_DTYPE[d]}")
        if k.precision is None:
            a = _DTYPE[dts[0]]
            k.precision = "tf32" if a == "fp32" and k.tensor_cores else a
        if len(dts) >= 3:
            k.details["accumulator"] = _DTYPE[dts[2]]
    while i < len(toks):
        t = toks[i]
        if re.fullmatch(r"\d+x\d+x\d+", t) and k.tile is None:
            k.tile = t
            k._add(t, "tile", f"block tile M\u00d7N\u00d7K = {_dims(t)}")
        elif re.fullmatch(r"\d+x\d+x\d+", t) and k.cluster is None:
            k.cluster = t
            k._add(t, "cluster", f"thread-block cluster {_dims(t)}")
        elif t.isdigit() and k.stages is None and k.cluster is not None:
            k.stages = int(t) or None
            k._add(t, "stages", "pipeline stages chosen automatically" if t == "0" else f"{t} pipeline stages")
        elif re.fullmatch(r"[nt]{3}", t):
            k.layout = t
            k._add(t, "layout", ", ".join(f"{op} {_LAYOUT_MEANING[c]}" for op, c in zip("ABC", t)))
        elif t.startswith("align") and t[5:].isdigit():
            k.alignment = t[5:]
            k._add(t, "alignment", f"A and B aligned to {t[5:]} elements")
        elif t in ("cvt", "scl", "sclzr", "shfl"):
            k._add(
                t,
                "mixed dtype",
                {
                    "cvt": "convert only",
                    "scl": "scale",
                    "sclzr": "scale with zero point",
                    "shfl": "shuffled narrow-type layout",
                }[t],
            )
        elif t == "warpspecialized" or t == "tma":
            sched = [t]
            while i + 1 < len(toks) and toks[i + 1] in (
                "cooperative",
                "pingpong",
                "persistent",
                "warpspecialized",
                "2sm",
                "1sm",
                "fp8",
                "fastaccum",
            ):
                i += 1
                sched.append(toks[i])
            k.details["schedule"] = "_".join(sched)
            k._add("_".join(sched), "schedule", "warp-specialized " + (" ".join(sched[1:]) or "mainloop"))
        elif t in _DTYPE and k.epilogue and k.tokens and k.tokens[-1][0] == "bias":
            k._add(t, "epilogue", f"bias in {_DTYPE[t]}")
        elif t in ("bias", "relu", "gelu", "silu", "sigmoid", "clamp", "swish", "tanh"):
            k.epilogue = (k.epilogue + "+" if k.epilogue else "") + t
            k._add(t, "epilogue", f"{t} fused into the epilogue")
        elif t == "epi":
            ep = [toks[i + 1]] if i + 1 < len(toks) else []
            i += len(ep)
            k.epilogue = "_".join(["epi"] + ep)
            k._add(
                k.epilogue,
                "epilogue",
                {"tma": "epilogue stores through TMA", "nosmem": "epilogue without shared memory"}.get(
                    ep[0] if ep else "", "epilogue " + " ".join(ep)
                ),
            )
        else:
            k._add(t, "raw", "not decoded")
        i += 1
    prec = (k.precision or "").upper()
    k.short = f"CUTLASS 3 {prec} {k.op.upper() if k.op == 'gemm' else k.op}" + _geometry(k, cluster=True, schedule=True)
    return True


_XMMA = re.compile(r"^(?P<arch>sm\d+a?)_xmma_(?P<body>.*?)(?:__(?P<ver>\d+x)_(?P<lib>cublas|cudnn|cublasLt))?$")


def _decode_xmma(k: KernelName, sym: str, full: str) -> bool:
    m = _XMMA.match(sym)
    if not m:
        return False
    lib = m.group("lib") or ("cudnn" if "cudnn" in full else "cublas")
    k.family = "cudnn" if lib == "cudnn" else "cublas_xmma"
    k.library = "cuDNN" if lib == "cudnn" else "cuBLAS"
    k._set_arch(m.group("arch"), m.group("arch").rstrip("a"))
    k._add("xmma", "library", f"{k.library}'s xmma kernel generator")
    body = m.group("body")
    toks = body.split("_")
    # op: gemm | fprop_implicit_gemm | dgrad_implicit_gemm | wgrad_indexed_implicit_gemm | ...
    ops = []
    i = 0
    while i < len(toks) and re.fullmatch(
        r"gemm|fprop|dgrad|wgrad|implicit|indexed|gemv|grouped|batched|conv\w*", toks[i]
    ):
        ops.append(toks[i])
        i += 1
    opname = "_".join(ops)
    k.op = ("conv_" + ops[0]) if ops and ops[0] in ("fprop", "dgrad", "wgrad") else "gemm" if "gemm" in ops else opname
    k._add(opname, "op", {"gemm": "matrix multiply (GEMM)"}.get(opname, opname.replace("_", " ")))
    # dtypes: up to three tokens of concatenated codes: AB, compute/accumulator, output
    dt_roles = []
    while i < len(toks) and re.fullmatch(r"(?:bf16|tf32|f16|f32|f64|e4m3|e5m2|s8|s32|i8|i32|u8|f8)+", toks[i]):
        dt_roles.append(toks[i])
        i += 1
    parsed = [re.findall(r"bf16|tf32|f16|f32|f64|e4m3|e5m2|s8|s32|i8|i32|u8|f8", d) for d in dt_roles]
    labels = ["inputs (A, B)", "math and accumulator", "output"]
    for tok, codes, label in zip(dt_roles, parsed, labels):
        k._add(tok, "dtype", f"{label}: {', '.join(_DTYPE[c] for c in codes)}")
    k.dtypes = tuple(_DTYPE[c] for codes in parsed for c in codes)
    if len(parsed) >= 2:
        k.precision = _DTYPE[parsed[1][0]]  # the math input type: tf32 for f32f32_tf32f32
        k.details["accumulator"] = _DTYPE[parsed[1][-1]]
    elif parsed:
        k.precision = _DTYPE[parsed[0][0]]
    ffma = False
    while i < len(toks):
        t = toks[i]
        if re.fullmatch(r"[nt]{2}", t) and k.layout is None:
            k.layout = t
            k._add(t, "layout", ", ".join(f"{op} {_LAYOUT_MEANING[c]}" for op, c in zip("AB", t)))
        elif re.fullmatch(r"[nt]", t):
            k.details["c_layout"] = t
            k._add(t, "layout C", f"C {_LAYOUT_MEANING[t]}")
        elif re.fullmatch(r"n[hcdw]+k[rsct]+|nchw|nhwc|ndhwc", t):
            k.layout = (k.layout + "/" + t) if k.layout else t
            k._add(t, "layout", f"tensor layout {t.upper()}")
        elif t.startswith("tilesize"):
            k.tile = t[8:]
            k._add(t, "tile", f"block tile M\u00d7N\u00d7K = {_dims(k.tile)}")
        elif t.startswith("stage") and t[5:].isdigit():
            k.stages = int(t[5:])
            k._add(t, "stages", f"{t[5:]}-stage pipeline")
        elif t.startswith("warpsize"):
            k.warps = t[8:]
            k._add(t, "warps", f"warps per block {_dims(k.warps)}")
        elif t.startswith("warpgroupsize"):
            k.warpgroups = t[13:]
            k._add(t, "warpgroups", f"warpgroups per block {_dims(k.warpgroups)} (Hopper wgmma)")
        elif t == "ffma":
            ffma = True
            k._add(t, "math", "FFMA: fp32 fused multiply-add on CUDA cores, not tensor cores")
        elif t.startswith("tensor") and re.fullmatch(r"tensor\d+x\d+x\d+", t):
            k.details["mma_shape"] = _dims(t[6:])
            k._add(t, "math", f"tensor-core MMA {_dims(t[6:])}")
        elif t.startswith("align"):
            k.alignment = (k.alignment + "," if k.alignment else "") + t[5:]
            k._add(
                t, "alignment", f"operand {t[5:-1].upper() or '?'} aligned to {re.sub(r'^[a-z]+', '', t[5:])} elements"
            )
        elif t in ("execute", "kernel"):
            k._add(t, "raw", "kernel entry")
        elif t in ("segment", "split", "stream") and i + 1 < len(toks) and toks[i + 1] == "k":
            mode = t + "_k"
            if i + 2 < len(toks) and toks[i + 2] in ("on", "off"):
                mode += "_" + toks[i + 2]
                i += 1
            i += 1
            k.details["k_split"] = mode
            k._add(
                mode,
                "k split",
                {
                    "segment_k_off": "segment-K off",
                    "segment_k_on": "segment-K: K split across CTAs",
                    "split_k": "split-K: partial sums reduced after",
                }.get(mode, mode.replace("_", " ")),
            )
        elif re.fullmatch(r"g\d+", t):
            k.details["groups"] = int(t[1:])
            k._add(t, "groups", f"{t[1:]} convolution group(s)")
        else:
            k._add(t, "raw", "not decoded")
        i += 1
    # FFMA in the name, or fp32 math on fp32 inputs (f32f32_f32f32, not tf32f32), is the CUDA-core path
    ffma = ffma or (len(parsed) >= 2 and parsed[0][:1] == ["f32"] and parsed[1][:1] == ["f32"])
    k.tensor_cores = not ffma
    if ffma:
        k.math = "SIMT (CUDA cores, FFMA)"
    else:
        k.math = "tensor cores (wgmma)" if k.warpgroups else "tensor cores (mma)"
    prec = (k.precision or "").upper()
    path = "FFMA" if ffma else "tensor-core"
    label = {"gemm": "GEMM", "conv_fprop": "conv fprop", "conv_dgrad": "conv dgrad", "conv_wgrad": "conv wgrad"}
    k.short = f"{k.library} {prec} {label.get(k.op, k.op)} ({path})" + _geometry(k)
    return True


_LEGACY = re.compile(r"^(?P<arch>maxwell|pascal|volta|turing|ampere|ada|hopper)_(?P<body>.*)$")


def _decode_legacy(k: KernelName, sym: str, full: str) -> bool:
    m = _LEGACY.match(sym)
    if not m or not re.search(r"gemm|conv|scudnn|gemv", sym):
        return False
    k.family = "cublas_legacy" if "gemm" in m.group("body") and "scudnn" not in sym else "cudnn"
    k.library = "cuBLAS" if k.family == "cublas_legacy" else "cuDNN"
    arch = m.group("arch")
    k._set_arch(arch, _ARCH_NAMES[arch])
    k.tokens[-1] = (arch, "arch", f"{arch.capitalize()} kernel ({_ARCH_NAMES[arch]}); runs on newer GPUs too")
    toks = m.group("body").split("_")
    for i, t in enumerate(toks):
        gm = re.fullmatch(r"([a-z]?)(\d*)(gemm|gemv|conv\w*)", t)
        if gm and not k.op:
            prefix, shape, op = gm.groups()
            k.op = "gemm" if op == "gemm" else op
            if shape:
                k.tensor_cores = True
                k.math = "tensor cores (mma)"
                k.details["mma_shape"] = "\u00d7".join(_split_shape(shape))
                k.details["accumulator"] = _PREFIX.get(prefix, prefix)
                k._add(
                    t,
                    "op",
                    f"GEMM on tensor cores, {k.details['mma_shape']} MMA, accumulate in {_PREFIX.get(prefix, prefix)}",
                )
                mp = _MMA_SHAPE.get(shape)
                if mp and "/" not in mp:
                    k.precision = mp
            else:
                k.tensor_cores = False
                k.math = "SIMT (CUDA cores)"
                k.precision = _PREFIX.get(prefix, prefix)
                k._add(t, "op", f"{k.precision} GEMM on CUDA cores (SIMT), no tensor cores")
        elif t in ("fp16", "bf16", "tf32", "int8", "fp32", "i8816", "s8"):
            d = {"int8": "int8", "i8816": "int8", "s8": "int8"}.get(t, t)
            k.dtypes += (d,)
            # an explicit operand type wins over what the MMA shape suggests (Turing's 1688 is fp16, not tf32)
            if not k.dtypes[:-1]:
                k.precision = d if not (d == "fp32" and k.tensor_cores) else "tf32"
            k._add(t, "dtype", f"{d} operands")
        elif re.fullmatch(r"\d+x\d+", t) and k.tile is None:
            k.tile = t
            k._add(t, "tile", f"block tile M\u00d7N = {_dims(t)}")
        elif re.fullmatch(r"sliced\d+x\d+", t):
            k.details["sliced"] = t[6:]
            k._add(t, "sliced-K", f"K split {_dims(t[6:])} inside each block")
        elif t.startswith("ldg") and t[3:].isdigit():
            k.alignment = t[3:]
            k._add(t, "alignment", f"{t[3:]}-element global loads")
        elif t == "f2f":
            k._add(t, "raw", "float-to-float conversion variant")
        elif t == "stages" and i + 1 < len(toks):
            continue
        elif re.fullmatch(r"\d+x\d+", t) and k.tile is not None and i > 0 and toks[i - 1] == "stages":
            kt, st = t.split("x")
            k.stages = int(st)
            k._add("stages_" + t, "k-tile \u00d7 stages", f"K-tile {kt}, {st}-stage pipeline")
        elif re.fullmatch(r"[nt]{2}", t):
            k.layout = t
            k._add(t, "layout", ", ".join(f"{op} {_LAYOUT_MEANING[c]}" for op, c in zip("AB", t)))
        else:
            k._add(t, "raw", "not decoded")
    if k.tensor_cores is None:
        k.tensor_cores = False
    if k.dtypes:  # an explicit operand type wins over what the MMA shape suggests (Turing's 1688 is fp16)
        d = k.dtypes[0]
        k.precision = "tf32" if d == "fp32" and k.tensor_cores else d
    label = "tensor-core" if k.tensor_cores else "SIMT"
    k.short = f"{k.library} {label} {(k.precision or '').upper()} {k.op.upper() if k.op == 'gemm' else k.op}"
    k.short = k.short.replace("  ", " ") + _geometry(k)
    return True


_NVJET = re.compile(r"^nvjet_(?P<arch>sm\d+a?)_(?P<body>.*)$")


def _decode_nvjet(k: KernelName, sym: str, full: str) -> bool:
    m = _NVJET.match(sym)
    if not m:
        return False
    k.family = "nvjet"
    k.library = "cuBLAS (nvjet)"
    k.op = "gemm"
    k.tensor_cores = True
    k._add("nvjet", "library", "cuBLASLt's nvjet GEMM kernels (tensor cores)")
    k._set_arch(m.group("arch"), m.group("arch").rstrip("a"))
    k.math = "tensor cores (wgmma)" if k.arch == "sm90" else "tensor cores"
    toks = m.group("body").split("_")
    if toks and re.fullmatch(r"[a-z]{3,6}", toks[0]):
        letters = toks.pop(0)
        names = [_NVJET_LETTERS.get(c, c) for c in letters]
        k.dtypes = tuple(names)
        # 3 letters: A/B, compute, D (hsh = fp16 in, fp32 accumulate, fp16 out); 5 letters: A, B, C, compute, D
        if len(names) >= 5:
            ab, c = names[:2], [names[2]]
        elif len(names) == 4:
            ab, c = names[:2], []
        else:
            ab, c = names[:1], []
        k.precision = ab[0]
        k.details["accumulator"] = names[-2]
        k._add(
            letters,
            "dtypes",
            f"inputs {', '.join(ab)}; "
            + (f"C {c[0]}; " if c else "")
            + f"accumulate in {names[-2]}; output {names[-1]}",
        )
    geo = [t for t in toks if re.fullmatch(r"\d+x\d+", t)]
    for t in toks:
        if re.fullmatch(r"\d+x\d+", t):
            idx = geo.index(t)
            if idx == 0:
                k.tile = t
                k._add(t, "tile", f"block tile M\u00d7N = {_dims(t)}")
            elif idx == 1:
                kt, st = t.split("x")
                k.stages = int(st)
                k.tile = f"{k.tile}x{kt}" if k.tile else None
                k._add(t, "k-tile \u00d7 stages", f"K-tile {kt}, {st}-stage pipeline")
            elif idx == 2:
                k.cluster = t + "x1"
                k._add(t, "cluster", f"thread-block cluster {_dims(t)}")
        elif t in ("h", "v"):
            k._add(t, "raw", "raster order (h or v; meaning not published)")
        elif t == "bz":
            k._add(t, "raw", "not published")
        elif t.startswith("coop") or t.startswith("ping"):
            sched = "cooperative" if t.startswith("coop") else "ping-pong"
            k.details["schedule"] = sched
            k._add(t, "schedule", f"{sched} warp-specialized schedule")
        elif t == "bias":
            k.epilogue = "bias"
            k._add(t, "epilogue", "bias added in the epilogue")
        elif re.fullmatch(r"[NT]{3}", t):
            k.layout = t
            k._add(t, "layout", ", ".join(f"{op} {_LAYOUT_MEANING[c.lower()]}" for op, c in zip(("A", "B", "D"), t)))
        elif t.startswith("algo"):
            k._add(t, "raw", "algorithm variant")
        elif re.fullmatch(r"\dcta", t):
            k.details["cta_group"] = int(t[0])
            k._add(t, "cta group", f"{t[0]} CTAs share each MMA (Blackwell CTA pair)")
        elif t.lower() == "splitk":
            k.details["k_split"] = "split_k"
            k._add(t, "k split", "split-K: partial sums reduced after")
        else:
            k._add(t, "raw", "not decoded")
    k.short = f"cuBLAS nvjet {(k.precision or '').upper()} GEMM" + _geometry(k)
    return True


def _decode_cudnn(k: KernelName, sym: str, full: str) -> bool:
    if not ("cudnn" in full.lower() or full.startswith("cudnn")):
        return False
    k.family = "cudnn"
    k.library = "cuDNN"
    m = re.search(r"cudnn_generated_\w+", full)
    if m:
        name = m.group(0)
        toks = name.split("_")
        k._add("cudnn_generated", "library", "cuDNN runtime-compiled (generated) kernel")
        if "sdpa" in toks:
            k.op = "attention"
        elif "conv" in name or "fprop" in toks:
            k.op = "conv_fprop"
        else:
            k.op = "fused"
        for t in toks[2:]:
            if re.fullmatch(r"sm\d+a?", t):
                k._set_arch(t, t.rstrip("a"))
            elif t in ("wgmma", "hmma", "mma", "tcgen05"):
                k.tensor_cores = True
                k.math = f"tensor cores ({t})"
                k._add(t, "math", "tensor cores")
            elif t in _DTYPE and t not in ("void",):
                k.precision = _DTYPE[t]
                k.dtypes += (_DTYPE[t],)
                k._add(t, "dtype", f"{_DTYPE[t]} data")
            elif re.fullmatch(r"\d+x\d+x\d+", t) and k.tile is None:
                k.tile = t
                k._add(t, "tile", f"tile {_dims(t)}")
            elif t.startswith("cga") and re.fullmatch(r"cga\d+x\d+x\d+", t):
                k.cluster = t[3:]
                k._add(t, "cluster", f"cooperative grid array (cluster) {_dims(t[3:])}")
            elif t == "sdpa":
                k._add(t, "op", "scaled dot-product attention")
            elif t in ("flash", "fprop", "bprop", "dgrad", "wgrad"):
                k.details.setdefault("variant", []).append(t)  # type: ignore[union-attr]
                k._add(t, "variant", {"fprop": "forward", "bprop": "backward"}.get(t, t))
            else:
                k._add(t, "raw", "not decoded")
        k.short = f"cuDNN {'SDPA (flash)' if k.op == 'attention' else k.op} {(k.precision or '').upper()}".strip()
        return True
    path = _function_path(full)
    leaf = path.split("::")[-1]
    lower = leaf.lower()
    if "nchwtonhwc" in lower or "nhwctonchw" in lower:
        k.op = "layout_transform"
        k.short = f"cuDNN layout transform {'NCHW→NHWC' if lower.startswith('nchw') else 'NHWC→NCHW'}"
    elif "workspace" in lower:
        k.op = "workspace_init"
        k.short = "cuDNN workspace init"
    elif re.search(r"conv|fprop|dgrad|wgrad|implicit", lower):
        k.op = "conv"
        k.short = f"cuDNN {leaf}"
    else:
        k.op = lower or "other"
        k.short = f"cuDNN {leaf}"
    k._add(leaf, "op", k.short)
    return True


def _decode_flash(k: KernelName, sym: str, full: str) -> bool:
    s = full
    if (
        re.search(r"\bflash(?:::|_)\w*(?:fwd|bwd)|pytorch_flash::|flash_attn|fmha_cutlass[FB]|FlashAttn|fmha_", s)
        is None
    ):
        return False
    k.family = "flash_attention"
    k.op = "attention"
    k.tensor_cores = True
    path = _function_path(s)
    leaf = path.split("::")[-1] if path else s.split("(")[0]
    if leaf.startswith("fmha_cutlass") or "MemEffAttention" in s:
        k.library = "PyTorch memory-efficient attention (CUTLASS)"
        fm = re.match(r"fmha_cutlass([FB])_([a-z0-9]+?)_(aligned|notaligned)_(\d+x\d+)((?:_[a-z0-9]+?)*)_(sm\d+)", leaf)
        if fm:
            direction, dt, al, tile, acc, sm = fm.groups()
            acc = acc.strip("_")
            k.details["direction"] = "forward" if direction == "F" else "backward"
            k.precision = _DTYPE.get(dt, dt)
            k.dtypes = (k.precision,)
            k.tile = tile
            k._set_arch(sm, sm)
            k._add("fmha_cutlass" + direction, "op", f"fused multi-head attention, {k.details['direction']}")
            k._add(dt, "dtype", f"{k.precision} Q/K/V")
            k._add(al, "alignment", al)
            k.alignment = al
            k._add(tile, "tile", f"queries × keys per block {_dims(tile)}")
            for extra in filter(None, acc.split("_")):
                meaning = {"rf": "accumulator in registers", "gmem": "accumulator in global memory"}.get(
                    extra, f"head dimension up to {extra[1:]}" if re.fullmatch(r"k\d+", extra) else "not decoded"
                )
                k._add(extra, "variant", meaning)
    else:
        k.library = "FlashAttention (PyTorch)" if "pytorch_flash" in s else "FlashAttention"
        direction = "backward" if "bwd" in leaf else "forward"
        k.details["direction"] = direction
        k._add(leaf, "op", f"flash attention {direction}" + (" (split-KV)" if "splitkv" in leaf else ""))
        tm = re.search(r"Flash_(?:fwd|bwd)_kernel_traits<(\d+), (\d+), (\d+), (\d+)", s)
        if tm:
            hd, bm, bn, nw = tm.groups()
            k.details["head_dim"] = int(hd)
            k.tile = f"{bm}x{bn}"
            k.warps = nw
            k._add(f"<{hd}, {bm}, {bn}, {nw}>", "traits", f"head dim {hd}, block {bm}×{bn}, {nw} warps")
        dts = _cpp_dtypes(_template_args(s))
        dts = tuple(d for d in dts if d not in ("bool", "int32", "int64"))
        if dts:
            k.dtypes = dts
            k.precision = dts[0]
    k.math = "tensor cores (mma)"
    k.short = f"attention {k.details.get('direction', '')} ({k.library.split(' (')[0]}) {(k.precision or '').upper()}".replace(
        "  ", " "
    )
    return True


_TRITON = re.compile(r"^triton_(?P<kind>poi|red|per|tem|mm|bmm|unk|for)_(?P<rest>.*?)(?:_(?P<n>\d+))?$")
_TRITON_KIND = {
    "poi": "pointwise",
    "red": "reduction",
    "per": "persistent reduction",
    "tem": "template (GEMM/conv)",
    "for": "foreach",
    "mm": "matmul",
    "bmm": "batched matmul",
    "unk": "unknown",
}
# ATen ops whose names contain underscores, for splitting Inductor's fused-op lists (longest match wins).
_MULTI_WORD_OPS = sorted(
    [
        "_softmax",
        "_log_softmax",
        "prepare_softmax_online",
        "native_layer_norm",
        "native_batch_norm",
        "native_group_norm",
        "layer_norm",
        "batch_norm",
        "group_norm",
        "rms_norm",
        "embedding_dense_backward",
        "convolution_backward",
        "threshold_backward",
        "gelu_backward",
        "silu_backward",
        "sigmoid_backward",
        "tanh_backward",
        "_to_copy",
        "index_put",
        "index_select",
        "scatter_add",
        "scatter_reduce",
        "var_mean",
        "log_softmax",
        "constant_pad_nd",
        "avg_pool2d",
        "max_pool2d_with_indices",
        "upsample_nearest2d",
        "upsample_bilinear2d",
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention",
        "native_dropout",
        "clamp_min",
        "clamp_max",
        "bitwise_and",
        "bitwise_or",
        "bitwise_not",
        "logical_and",
        "logical_not",
        "masked_fill",
        "nll_loss",
        "nll_loss_forward",
        "nll_loss_backward",
        "cross_entropy",
        "_unsafe_view",
        "new_zeros",
        "zeros_like",
        "ones_like",
        "full_like",
        "fused_moving_avg_obs_fq_helper",
    ],
    key=lambda s: -s.count("_"),
)


def _split_fused(rest: str) -> list[str]:
    if rest.startswith("fused_"):
        rest = rest[6:]
    elif rest == "fused":
        return []
    parts = rest.split("_")
    ops: list[str] = []
    i = 0
    while i < len(parts):
        matched = None
        for cand in _MULTI_WORD_OPS:
            cparts = cand.split("_")
            if parts[i : i + len(cparts)] == cparts:
                matched = cand
                break
        if matched:
            ops.append(matched)
            i += len(matched.split("_"))
        elif parts[i] == "" and i + 1 < len(parts):
            # a double underscore: the next op's name starts with '_' (e.g. _softmax) but is not in the list
            ops.append("_" + parts[i + 1])
            i += 2
        else:
            if parts[i]:
                ops.append(parts[i])
            i += 1
    return ops


def _decode_triton(k: KernelName, sym: str, full: str) -> bool:
    m = _TRITON.match(sym)
    if not m:
        return False
    k.family = "triton"
    k.library = "Triton (TorchInductor)"
    kind = m.group("kind")
    k.op = {"poi": "elementwise", "red": "reduce", "per": "reduce", "tem": "gemm", "mm": "gemm", "bmm": "gemm"}.get(
        kind, kind
    )
    k.details["kind"] = _TRITON_KIND[kind]
    fused = _split_fused(m.group("rest"))
    k.details["fused_ops"] = fused
    k._add("triton_" + kind, "kind", f"Inductor-generated Triton kernel: {_TRITON_KIND[kind]}")
    if fused:
        k._add(m.group("rest"), "fused ops", ", ".join(fused))
    if m.group("n"):
        k._add(m.group("n"), "index", "kernel number within the compiled graph")
    k.short = f"Triton {_TRITON_KIND[kind]}" + (f": {' + '.join(fused)}" if fused else "")
    return True


_NCCL_DT = {
    "i8": "int8",
    "u8": "uint8",
    "i32": "int32",
    "u32": "uint32",
    "i64": "int64",
    "u64": "uint64",
    "f16": "fp16",
    "f32": "fp32",
    "f64": "fp64",
    "bf16": "bf16",
    "f8e4m3": "fp8e4m3",
    "f8e5m2": "fp8e5m2",
    "int8_t": "int8",
    "uint8_t": "uint8",
    "bfloat16": "bf16",
    "float16": "fp16",
    "float32": "fp32",
    "int32_t": "int32",
    "uint32_t": "uint32",
    "int64_t": "int64",
    "uint64_t": "uint64",
    "half": "fp16",
    "float": "fp32",
    "double": "fp64",
    "__nv_bfloat16": "bf16",
}
_NCCL_COLL = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "SendRecv", "AllToAll", "Generic")
_NCCL_ALGO = ("RING", "TREE", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT", "COLLNET")
_NCCL_PROTO = ("LL128", "LL", "SIMPLE")


def _decode_nccl(k: KernelName, sym: str, full: str) -> bool:
    m = re.search(r"\bnccl(?:Dev)?Kernel_(\w+)", full)
    if not m:
        return False
    k.family = "nccl"
    k.library = "NCCL"
    toks = m.group(1).split("_")
    coll = toks[0]
    k.details["collective"] = coll
    k.op = "communication"
    k._add(m.group(0).split("_")[0] + "_" + coll, "collective", coll)
    rest = "_".join(toks[1:])
    for algo in sorted(_NCCL_ALGO, key=len, reverse=True):
        if re.search(r"(?:^|_)" + algo + r"(?:_|$)", rest):
            k.details["algorithm"] = algo
            k._add(algo, "algorithm", f"{algo.lower().replace('_', ' ')} algorithm")
            rest = re.sub(r"(?:^|_)" + algo + r"(?=_|$)", "", rest)
            break
    for t in [t for t in rest.split("_") if t]:
        if t in _NCCL_PROTO:
            k.details["protocol"] = t
            k._add(
                t,
                "protocol",
                {
                    "LL": "low-latency protocol",
                    "LL128": "low-latency 128-byte protocol",
                    "SIMPLE": "simple (bandwidth) protocol",
                }[t],
            )
        elif t in ("Sum", "Prod", "Max", "Min", "Avg", "PreMulSum", "SumPostDiv"):
            k.details["reduction"] = t
            k._add(t, "reduction", t.lower())
        elif t in _NCCL_DT:
            k.precision = _NCCL_DT[t]
            k.dtypes = (k.precision,)
            k._add(t, "dtype", k.precision)
        else:
            k._add(t, "raw", "not decoded")
    parts = [
        coll,
        k.details.get("reduction", ""),
        k.precision or "",
        k.details.get("algorithm", ""),
        k.details.get("protocol", ""),
    ]
    k.short = "NCCL " + " ".join(p for p in parts if p)
    return True


def _decode_memop(k: KernelName, sym: str, full: str) -> bool:
    s = full.strip()
    m = re.match(r"^\[?(?:CUDA )?(memcpy|memset|Memcpy|Memset)\b\s*(.*?)\]?$", s, re.IGNORECASE)
    if not m:
        return False
    kind = m.group(1).lower()
    rest = m.group(2)
    k.family = "memop"
    k.library = "CUDA runtime"
    direction = None
    dm = re.search(
        r"\b(HtoD|DtoH|DtoD|HtoH|PtoP|Host-to-Device|Device-to-Host|Device-to-Device|Host-to-Host|Peer-to-Peer)\b", rest
    )
    if dm:
        direction = {
            "Host-to-Device": "HtoD",
            "Device-to-Host": "DtoH",
            "Device-to-Device": "DtoD",
            "Host-to-Host": "HtoH",
            "Peer-to-Peer": "PtoP",
        }.get(dm.group(1), dm.group(1))
    k.op = kind + (f"_{direction.lower()}" if direction else "")
    k.details["kind"] = kind
    if direction:
        k.details["direction"] = direction
    mem = re.search(r"\(([^)]*)\)", rest)
    if mem:
        k.details["memory"] = mem.group(1)
    k.short = kind.capitalize() + (f" {direction}" if direction else "") + (f" ({mem.group(1)})" if mem else "")
    k._add(s, "op", "memory set" if kind == "memset" else f"memory copy {direction or ''}".strip())
    return True


# --- ATen (PyTorch's own CUDA kernels) ---------------------------------------------------------------------------

_WRAPPERS = {
    "gpu_kernel_impl",
    "gpu_kernel_impl_nocast",
    "gpu_kernel_with_scalars",
    "func_wrapper_t",
    "AUnaryFunctor",
    "BUnaryFunctor",
    "BinaryFunctor",
    "UnaryFunctor",
    "TrivialOffsetCalculator",
    "OffsetCalculator",
    "LoadWithoutCast",
    "StoreWithoutCast",
    "LoadWithCast",
    "StoreWithCast",
    "elementwise_kernel_helper",
    "opmath_gpu_kernel_with_scalars",
    "gpu_kernel",
    "ReduceOp",
    "array",
    "TensorIteratorBase",
    "TensorIterator",
    "Array",
    "GenericPackedTensorAccessor",
    "TensorAccessor",
    "ArrayRef",
    "TensorInfo",
    "IntDivider",
    "vectorized_elementwise_kernel",
    "unrolled_elementwise_kernel",
    "elementwise_kernel",
    "reduce_kernel",
    "index_elementwise_kernel",
    "operator",
}
_OP_NAME_PATTERNS = [
    re.compile(r"CUDAFunctor(?:OnSelf)?_(\w+?)<"),
    re.compile(r"\b(\w+?)_functor<"),
    re.compile(r"\b(\w+?)Ops<"),
    re.compile(r"::(\w+?)(?:_kernel_cuda|_kernel_impl|_kernel|KernelImpl|CUDAKernelImpl|_cuda_kernel)\b"),
    re.compile(r"::(?:launch_)(\w+)\("),
    re.compile(r"\b(\w+?)Functor<"),
    re.compile(r"::([a-z]\w+?)\("),
]
_ATEN_SPECIAL = [
    # (regex on the function path or template args, op category, label)
    (r"SoftMaxForward|softmax_warp_forward|SoftMaxForwardEpilogue|cunn_SpatialSoftMaxForward", "softmax", "softmax"),
    (r"SoftMaxBackward|softmax_warp_backward", "softmax", "softmax backward"),
    (r"layer_norm|LayerNorm", "norm", "layer norm"),
    (r"RowwiseMoments|GroupNorm|group_norm", "norm", "group norm"),
    (r"batch_norm|BatchNorm", "norm", "batch norm"),
    (r"rms_norm|RmsNorm|RMSNorm", "norm", "RMS norm"),
    (r"dropout", "random", "dropout"),
    (
        r"distribution_elementwise|distribution_nullary|bernoulli|randperm|multinomial|normal_kernel|uniform_kernel",
        "random",
        "random numbers",
    ),
    (r"CatArray", "copy", "concatenate"),
    (r"DeviceRadixSort|bitonicSort|sort|[Tt]opK|topk", "sort", "sort / top-k"),
    (r"gather|scatter|index|embedding|take_kernel|put_kernel|masked", "index", "indexing"),
    (r"DeviceScan|cumsum|cumprod|scan", "scan", "scan"),
    (r"DeviceReduce|DeviceSelect|DeviceCompact|nonzero|write_indices", "reduce", "reduce / select"),
    (r"conv_depthwise|slow_conv|im2col|col2im", "conv", "convolution (ATen)"),
    (r"upsample|interpolate", "resample", "upsample"),
    (r"pool", "pool", "pooling"),
    (r"nll_loss|cross_entropy", "loss", "loss"),
    (r"triu_tril", "elementwise", "triangular mask"),
    (r"_assert_async", "assert", "device-side assert"),
]


def _aten_functor(args: str) -> str | None:
    """The operation an ATen kernel applies, from its template arguments (the functor or the lambda's function)."""
    for pat in _OP_NAME_PATTERNS:
        for m in pat.finditer(args):
            name = m.group(1).split("::")[-1]
            if name in _WRAPPERS or name + "Functor" in _WRAPPERS or name.startswith("gpu_kernel"):
                continue
            if name.lower() in ("cuda", "impl", "kernel", "operator", "lambda", "func_wrapper"):
                continue
            return _snake(name)
    return None


def _snake(name: str) -> str:
    name = re.sub(r"CUDA$|Cuda$", "", name)
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    name = re.sub(r"_nan$", "", name)
    name = re.sub(r"(?:_cuda_out|_cuda|_out|_kernel|_impl)+$", "", name)
    return name.strip("_")


def _decode_aten(k: KernelName, sym: str, full: str) -> bool:
    s = full
    if not re.search(
        r"\bat::|\bat_cuda_detail::|\bc10::|\(anonymous namespace\)::(?:softmax|elementwise_kernel_with_index|randperm)",
        s,
    ):
        return False
    k.family = "aten"
    k.library = "PyTorch ATen" + (" (CUB)" if "cub::" in s else "")
    path = _function_path(s)
    leaf = path.split("::")[-1]
    args = _template_args(s)
    top = _split_top(args)
    k.dtypes = (
        tuple(d for d in _cpp_dtypes(args) if d not in ("int32", "int64", "uint32", "uint64", "bool"))
        or _cpp_dtypes(args)[:1]
    )
    k.precision = k.dtypes[0] if k.dtypes else None
    functor = _aten_functor(args)
    special = next(((op, label) for pat, op, label in _ATEN_SPECIAL if re.search(pat, args)), None)
    if (
        leaf
        in (
            "vectorized_elementwise_kernel",
            "unrolled_elementwise_kernel",
            "elementwise_kernel",
            "elementwise_kernel_with_index",
        )
        and special
        and special[0] in ("norm", "random", "softmax")
    ):
        # an elementwise launcher running a norm / random-number lambda: say what it computes
        k.op, k.short = special
        k.details["functor"] = functor
        k._add(leaf, "op", f"{special[1]} (elementwise launcher)")
    elif leaf in (
        "vectorized_elementwise_kernel",
        "unrolled_elementwise_kernel",
        "elementwise_kernel",
        "elementwise_kernel_with_index",
    ):
        k.op = "elementwise"
        if functor and re.fullmatch(r"(?:direct_|float16_|bfloat16_|float8_|)copy(?:_device_to_device)?", functor):
            k.op = "copy"
        vec = int(top[0]) if leaf == "vectorized_elementwise_kernel" and top and top[0].isdigit() else None
        k.details["functor"] = functor
        if vec:
            k.details["vector_width"] = vec
        label = (functor or "op").replace("_", " ")
        k.short = f"elementwise {label}" + (
            f" (vectorized \u00d7{vec})" if vec else " (unrolled)" if leaf.startswith("unrolled") else ""
        )
        if k.op == "copy":
            k.short = f"copy ({label})" + (f" (vectorized \u00d7{vec})" if vec else "")
        k._add(
            leaf,
            "op",
            {
                "vectorized_elementwise_kernel": f"elementwise, {vec} elements per thread-load (vectorized)",
                "unrolled_elementwise_kernel": "elementwise, unrolled (non-contiguous or casting)",
                "elementwise_kernel": "elementwise, generic strided loop",
            }.get(leaf, "elementwise with index"),
        )
        if functor:
            k._add(functor, "functor", f"applies {label}")
    elif leaf == "reduce_kernel":
        k.op = "reduce"
        k.details["functor"] = functor
        k.short = f"reduce {(functor or '').replace('_', ' ')}".strip()
        k._add(leaf, "op", "reduction")
        if functor:
            k._add(functor, "functor", f"reduces with {functor}")
    else:
        for pat, op, label in _ATEN_SPECIAL:
            if re.search(pat, path) or (op in ("softmax", "norm", "random", "copy") and re.search(pat, args)):
                k.op = op
                k.short = label
                if op == "softmax" and re.search(r"LogSoftMax|log_softmax", s):
                    k.short = "log-softmax"
                if op == "random" and functor and label == "random numbers":
                    kind = re.search(
                        r"(normal|uniform|exponential|random_from_to|random|bernoulli|cauchy|geometric|log_normal)", s
                    )
                    if kind:
                        k.short = f"random {kind.group(1).replace('_', ' ')}"
                break
        else:
            k.op = _snake(leaf) or "other"
            k.short = _snake(leaf).replace("_", " ") or leaf
        k._add(leaf, "op", k.short)
    if k.precision:
        k._add(k.precision, "dtype", f"{k.precision} data")
    return True


# ---------------------------------------------------------------------------------------------------------------

_DECODERS = (
    _decode_memop,
    _decode_nccl,
    _decode_triton,
    _decode_cutlass3,
    _decode_xmma,
    _decode_nvjet,
    _decode_cutlass2,
    _decode_legacy,
    _decode_flash,
    _decode_cudnn,
    _decode_aten,
)


@lru_cache(maxsize=65536)
def decode(name: str) -> KernelName:
    """Decode a kernel name as a profiler reports it. Never raises; unknown names get family 'other'."""
    raw = name if isinstance(name, str) else str(name)
    try:
        full = normalize(demangle(raw.strip()))
        k = KernelName(name=raw, demangled=full)
        sym = _kernel_symbol(full)
        for dec in _DECODERS:
            if dec(k, sym, full):
                break
        else:
            k.family = "other"
            path = _function_path(full)
            k.short = path.split("::")[-1] if path else full[:80]
            k.op = ""
        k.short = re.sub(r"\s+", " ", k.short).strip() or full[:80]
        return k
    except Exception as exc:  # noqa: BLE001 - a decoder bug must never break a profile
        k = KernelName(name=raw, demangled=raw, family="other", short=raw[:80])
        k.details["decode_error"] = repr(exc)
        return k


def _main(argv: Iterable[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m gpumagic.kernels", description="Explain GPU kernel names.")
    ap.add_argument("names", nargs="*", help="kernel names (read from stdin, one per line, when none)")
    args = ap.parse_args(list(argv) if argv is not None else None)
    names = args.names or [line.strip() for line in sys.stdin if line.strip()]
    for i, n in enumerate(names):
        if i:
            print()
        print(decode(n).explain_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
