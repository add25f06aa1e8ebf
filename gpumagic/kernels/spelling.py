"""Reading a C++ kernel signature: demangling, one spelling for every profiler, and taking a
signature apart.

The same kernel reaches us spelled several ways: Itanium-mangled (``_Z...``), as torch.profiler
prints it (``<4, ...>``, ``(anonymous namespace)``, ``3ul``), as nsys prints it (``<(int)4, ...>``,
``<unnamed>``) and as the older nvprof printed it (``<int=4, unsigned int=128>``). ``normalize``
makes them one string so that a decoder is written once; the other helpers pull out what decoders
read: the bare symbol, the function path, the template arguments, and the C++ types named in them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import shutil
import subprocess
import sys
from functools import cache, lru_cache
from typing import NamedTuple

from .precision import alternation, precision_table


@cache
def _cxa_demangle() -> object | None:
    for libname in ("stdc++", "c++"):
        path = ctypes.util.find_library(libname) or (
            f"lib{libname}.so.6" if sys.platform.startswith("linux") else None
        )
        if not path:
            continue
        try:
            lib = ctypes.CDLL(path)
            fn = lib.__cxa_demangle
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_void_p
        fn.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.POINTER(ctypes.c_int),
        ]
        return fn
    return None


# nvcc's name for a kernel with internal linkage: '__nv_static_<n>__<file hash>_' + the
# Itanium-mangled name.
_NV_STATIC = "__nv_static_"
_WORD = re.compile(r"\w+")


def _nv_static_mangled(name: str) -> str | None:
    """The Itanium name behind nvcc's ``__nv_static_..._`` prefix: from the first ``_Z`` that
    follows a ``_``, in a name of word characters only; None where there is none.

    Found with ``str.find`` rather than ``__nv_static_\\w*?_(_Z\\w+)``: that pattern retried
    ``\\w+`` to the end of the name at every ``__Z``, quadratic in the name's length when the name
    ends in a non-word character.
    """
    if not _WORD.fullmatch(name):
        return None
    at = name.find("__Z", len(_NV_STATIC))
    return name[at + 1 :] if 0 <= at < len(name) - 3 else None


def demangle(name: str) -> str:
    """Demangle an Itanium C++ name (``_Z...``, also behind nvcc's ``__nv_static_..._`` prefix);
    other names come back unchanged."""
    if name.startswith(_NV_STATIC):
        mangled = _nv_static_mangled(name)
        if mangled:
            out = demangle(mangled)
            return name if out == mangled else out
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
            out = subprocess.run(
                ["c++filt", name], capture_output=True, text=True, timeout=5
            ).stdout.strip()
            if out:
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    return name


_INT_TYPE = r"(?:unsigned |signed )?(?:int|long long|long|short|char|bool|unsigned)"
_CAST = re.compile(r"\(" + _INT_TYPE + r"\)(-?\d+)")
# nvprof's spelling of a non-type template argument: 'unsigned int=128', 'bool=1',
# 'fftDirection_t=-1'.
_NVPROF_ARG = re.compile(
    r"(?<=[<,] )(?:" + _INT_TYPE + r"|[A-Za-z_]\w*_t)=(-?\d+)|(?<=<)" + _INT_TYPE + r"=(-?\d+)"
)
# Starts only at the first digit of a run: without the lookbehind a run of n digits with no suffix
# was retried from each of its digits, quadratic in n (a 40,000-digit name took 10 s).
_SUFFIX = re.compile(r"(?<!\d)(\d+)(?:ul|ull|u|l|ll)\b")


def normalize(name: str) -> str:
    """One spelling for torch.profiler's, nsys' and nvprof's forms of the same demangled name."""
    s = _CAST.sub(r"\1", name)
    if "=" in s:
        s = _NVPROF_ARG.sub(lambda m: m.group(1) or m.group(2), s)
    s = s.replace("<unnamed>", "(anonymous namespace)").replace(
        "{unnamed}", "(anonymous namespace)"
    )
    s = _SUFFIX.sub(r"\1", s)
    return s.replace(" *", "*").replace(" &", "&")


_SYMBOL = re.compile(
    r"\b(cutlass3x_\w+|cutlass_(?:\d{2,3}a?_)?(?:tensorop|simt|wmma\w*|gemv)_\w+|sm\d+a?_xmma_\w+|nvjet_\w+"
    r"|ncclDevKernel_\w+|ncclKernel_\w+)"
)


def kernel_symbol(s: str) -> str:
    """The generated kernel's own name inside a wrapper signature: 'void
    cutlass::Kernel2<cutlass_80_simt_sgemm_..>(..)' -> 'cutlass_80_simt_sgemm_..' (the interesting
    part)."""
    m = _SYMBOL.search(s)
    return m.group(1) if m else s


def function_path(s: str) -> str:
    """'void at::native::foo<...>(...)' -> 'at::native::foo' (return type, template arguments,
    parameters removed)."""
    s = re.sub(r"^(?:void|static|__global__|\s)+", "", s)
    if s.startswith(
        "std::enable_if<"
    ):  # cuBLAS' SFINAE-guarded kernels: 'std::enable_if<!(false), void>::type f<..>'
        s = re.sub(r"^std::enable_if<.*?>::type\s+", "", s, count=1)
    depth = 0
    out: list[str] = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            if s.startswith("(anonymous namespace)", i):  # part of the path, not the parameter list
                out.append("(anonymous namespace)")
                i += len("(anonymous namespace)")
                continue
            break
        elif depth == 0:
            out.append(ch)
        i += 1
    return "".join(out).strip()


class Signature(NamedTuple):
    """The parts of a kernel signature decoders read: 'void cusparse::csrmm_alg2_kernel<false,
    long>(long, ...)' has path 'cusparse::csrmm_alg2_kernel', name 'csrmm_alg2_kernel', args 'false,
    long' (its own template arguments, not those of a return type such as
    ``std::enable_if<...>::type``)."""

    path: str
    name: str
    args: str


@lru_cache(maxsize=512)
def signature(full: str) -> Signature:
    path = function_path(full)
    at = full.find(path) if path else -1
    return Signature(
        path, path.split("::")[-1].strip(), template_args(full[at:] if at >= 0 else full)
    )


def template_args(s: str) -> str:
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


def split_top(args: str) -> list[str]:
    """Split template arguments at top-level commas."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
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


#: C++ types as kernel templates name them (integer ones included: index and size types).
CPP_TYPE = precision_table(
    "float",
    "double",
    "c10::Half",
    "c10::BFloat16",
    "cutlass::half_t",
    "cutlass::bfloat16_t",
    "__half",
    "__nv_bfloat16",
    "long",
    "int",
    "bool",
    "unsigned char",
    "signed char",
    "short",
    "c10::Float8_e4m3fn",
    "c10::Float8_e5m2",
    "unsigned int",
    "unsigned long",
    "c10::complex<float>",
)
_CPP_PATTERNS = tuple(
    (re.compile(r"(?<![\w:])" + re.escape(cpp) + r"(?![\w])"), canon)
    for cpp, canon in CPP_TYPE.items()
)


def cpp_dtypes(text: str) -> tuple[str, ...]:
    """Canonical dtypes of the C++ types named in ``text``, in order of first appearance."""
    first: dict[str, int] = {}
    for pattern, canon in _CPP_PATTERNS:
        m = pattern.search(text)
        if m and (canon not in first or m.start() < first[canon]):
            first[canon] = m.start()
    return tuple(sorted(first, key=first.__getitem__))


# The element types math libraries (cuBLAS, cuSOLVER, cuSPARSE, cuFFT) are instantiated for. CUDA's
# vector types stand for complex numbers there: float2 is cuComplex, double2 cuDoubleComplex.
VALUE_TYPE = precision_table(
    "float",
    "double",
    "__half",
    "half",
    "__nv_bfloat16",
    aliases={
        "float2": "complex64",
        "double2": "complex128",
        "cuComplex": "complex64",
        "cuDoubleComplex": "complex128",
        "cusparse::Complex<float>": "complex64",
        "cusparse::Complex<double>": "complex128",
    },
)
_VALUE_TYPE = re.compile(r"(?<![\w:])(" + alternation(VALUE_TYPE) + r")(?![\w])")


def value_types(text: str) -> tuple[str, ...]:
    """Floating (real or complex) element types named in ``text``, in order, each once: what a
    math-library kernel was instantiated for. Integer arguments (sizes, index types) are skipped."""
    return tuple(value_type_spellings(text))


def value_type_spellings(text: str) -> dict[str, str]:
    """canonical dtype -> how ``text`` first spells it ({'complex64': 'float2'}), for explanation
    rows."""
    out: dict[str, str] = {}
    for m in _VALUE_TYPE.finditer(text):
        out.setdefault(VALUE_TYPE[m.group(1)], m.group(1))
    return out


def index_type(args: list[str], depth: int = 1) -> str | None:
    """The first integer type among template arguments ('int' -> int32, 'long' -> int64): a sparse
    index width. Looks ``depth`` levels (one) into a traits argument (``sddmm_traits<long, long,
    float, ...>``) when the top level has none, and no deeper: each level re-reads the text below
    it, so a deep nest would cost its depth squared."""
    for a in args:
        if a in ("int", "long", "long long", "unsigned int", "unsigned long"):
            return CPP_TYPE.get(a, "int64")
    inner = next((a for a in args if "<" in a), None) if depth > 0 else None
    return index_type(split_top(template_args(inner)), depth - 1) if inner else None


def mangled_outline(name: str, limit: int = 4) -> str | None:
    """The readable pieces of an Itanium-mangled name that cannot be demangled, most often because
    a profiler cut it off (torch.profiler's tables end a long name with ``...``):
    ``_ZN17cutlass__5x_cudnn6KernelI66cutlass_tensorop_s16...`` ->
    ``cutlass__5x_cudnn::Kernel<cutlass_tensorop_s16…>``. Reads the leading nested name's
    length-prefixed identifiers, and the first ``limit`` identifiers of its template arguments;
    None when there is nothing to read. One pass, left to right."""
    if not name.startswith("_Z"):
        return None
    i = 3 if name.startswith("_ZN") else 2
    outer: list[str] = []
    inner: list[str] = []
    depth = 0
    n = len(name)
    while i < n and len(inner) < limit:
        ch = name[i]
        if ch.isdigit():
            j = i
            while j < n and name[j].isdigit():
                j += 1
            if j - i > 5:  # no identifier is 100,000 characters long: not a name
                break
            length = int(name[i:j])
            ident = name[j : j + length]
            cut = len(ident) < length or ident.endswith("...")
            ident = ident.rstrip(".")
            if not ident:
                break
            (inner if depth else outer).append(ident + ("\u2026" if cut else ""))
            if cut:
                break
            i = j + length
        elif ch == "I":
            depth += 1
            i += 1
        elif ch in "NEK" or (ch == "L" and depth):
            i += 1
        else:
            break
    if not outer:
        return None
    text = "::".join(outer)
    if inner:
        text += "<" + ", ".join(inner) + ">"
    return text
