"""What a decoded kernel name is (``KernelName``), how a decoder builds one (``Draft``), and the
vocabulary every decoder shares: the family list, dtype codes, architecture names and layout
letters.

``decode()`` is cached, so one ``KernelName`` object is handed to every caller that asks about the
same name. It is therefore frozen, and so is everything inside it (``details`` is a read-only
mapping, rows and lists are tuples): one caller's edit can never change what the next caller is
told. Decoders still find it easiest to fill fields in as they read tokens left to right, so they
write into a mutable ``Draft`` and freeze it once at the end.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType

from .precision import precision_table
from .spelling import value_type_spellings

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
    "cufft",
    "cusolver",
    "cusparse",
    "magma",
    # the LLM stack's libraries (gpumagic/kernels/stack.py and one module each)
    "vllm",
    "sglang",
    "flashinfer",
    "trtllm",
    "flashmla",
    "deepgemm",
    "deepep",
    "transformer_engine",
    "liger",
    "mamba",
    "xformers",
    "bitsandbytes",
    "apex",
    # AMD's ROCm libraries: Tensile (hipBLASLt, rocBLAS), MIOpen, Composable Kernel
    "rocm",
    "torchao",
    # engines and code generators: llama.cpp's CUDA backend, nvFuser
    "ggml",
    "nvfuser",
    "other",
)

# Short dtype codes used across CUTLASS, cuBLAS, cuDNN names -> canonical names. ``f8`` is an FP8
# whose format the name does not give; ``void`` an operand that is not there (CUTLASS's void C).
DTYPE = precision_table(
    "f64",
    "f32",
    "tf32",
    "f16",
    "bf16",
    "e4m3",
    "e5m2",
    "s8",
    "u8",
    "i8",
    "s32",
    "i32",
    "s4",
    "u4",
    "e2m1",
    "ue8m0",
    "fp16",
    "fp32",
    "half",
    "float",
    "double",
    "bfloat16",
    "cf32",
    "cf64",
    "nf4",
    aliases={"f8": "fp8", "void": "void"},
)
# CUTLASS 2.x and legacy cuBLAS one-letter precision prefixes (s1688gemm, h16816gemm, sgemm, dgemm,
# ...).
PREFIX = {"s": "fp32", "h": "fp16", "d": "fp64", "i": "int32", "c": "complex64", "z": "complex128"}
# MMA instruction shapes and the input precision they imply (Volta 884, Turing/Ampere
# 1688/16816/8816/16832).
MMA_SHAPE = {
    "1688": "tf32",
    "16816": "fp16/bf16",
    "884": "fp16",
    "8816": "int8",
    "16832": "int8",
    "1684": "tf32",
    # WMMA's fragment shapes (m16n16k16, m32n8k16, m8n32k16): fp16 or bf16 inputs
    "161616": "fp16/bf16",
    "32816": "fp16/bf16",
    "83216": "fp16/bf16",
}
_MMA_DIMS = {
    "1688": ("16", "8", "8"),
    "16816": ("16", "8", "16"),
    "884": ("8", "8", "4"),
    "8816": ("8", "8", "16"),
    "16832": ("16", "8", "32"),
    "1684": ("16", "8", "4"),
    "16864": ("16", "8", "64"),
    "884884": ("8", "8", "4"),
    "161616": ("16", "16", "16"),
    "32816": ("32", "8", "16"),
    "83216": ("8", "32", "16"),
}
ARCH_NAMES = {
    "maxwell": "sm50",
    "pascal": "sm60",
    "volta": "sm70",
    "turing": "sm75",
    "ampere": "sm80",
    "ada": "sm89",
    "hopper": "sm90",
    "blackwell": "sm100",
}
# One letter per operand in a GEMM's layout code. Complex GEMMs add a conjugation letter, which the
# generators spell differently: CUTLASS's 'c' / 'h' are column- / row-major conjugated (its
# ShortComplexLayoutNames); cuBLAS's 'c' is the BLAS operation C, conjugate transpose.
LAYOUT_MEANING = {"n": "column-major (not transposed)", "t": "row-major (transposed)"}
_CONJUGATED = {
    "cutlass": {
        "c": "column-major, conjugated",
        "h": "row-major, conjugated (conjugate transpose)",
    },
    "cublas": {"c": "conjugate transpose (BLAS op C)"},
}
OP_LABEL = {
    "gemm": "GEMM",
    "conv_fprop": "conv fprop",
    "conv_dgrad": "conv dgrad",
    "conv_wgrad": "conv wgrad",
}

_ARCH = re.compile(r"(?:sm_?)?(\d{2,3})[af]?")  # 'a': arch-specific; 'f': family-portable


class FrozenList(tuple[object, ...]):
    """An immutable sequence that still equals a list with the same items.

    Decoded lists (Inductor's fused ops, cuDNN variants) must not be editable through a cached
    result, yet callers compare them with lists, e.g. expectations read from JSON; a plain tuple
    would make those comparisons false.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return tuple.__eq__(self, tuple(other) if isinstance(other, list) else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__


def thaw(value: object) -> object:
    """The picklable form of a frozen value (:func:`freeze` undoes it): read-only mappings become
    dicts."""
    if isinstance(value, MappingProxyType):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, FrozenList):
        return [thaw(v) for v in value]
    return value


def freeze(value: object) -> object:
    """The read-only form of a decoded value: dicts become read-only mappings, lists and sets
    tuples, recursively."""
    if isinstance(value, (dict, MappingProxyType)):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)) and not isinstance(value, FrozenList):
        return FrozenList(freeze(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    return value


@dataclass(frozen=True)
class KernelName:
    """What a kernel name says. Fields the name does not carry are None. Read-only: results are
    cached and shared."""

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
    details: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    tokens: tuple[tuple[str, str, str], ...] = ()

    def __post_init__(self) -> None:
        # Whoever builds one (a decoder, a test, a caller), the containers end up read-only.
        object.__setattr__(self, "dtypes", tuple(self.dtypes))
        object.__setattr__(self, "details", freeze(self.details))
        object.__setattr__(self, "tokens", tuple(tuple(row) for row in self.tokens))

    def __getstate__(self) -> dict[str, object]:
        """Pickled with plain containers where the read-only views are (a mappingproxy does not
        pickle): a report that holds decoded names saves like any other value."""
        return {**self.__dict__, "details": thaw(self.details)}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state, details=freeze(state["details"]))

    def __hash__(self) -> int:
        # details is a mapping, so the generated hash would fail; equal results share name, family
        # and label.
        return hash((self.name, self.family, self.short))

    def explain(self) -> list[tuple[str, str, str]]:
        """Token-by-token rows of (token, field, meaning), for display. A new list each call."""
        return list(self.tokens) or [(self.short or self.name, "name", f"{self.family} kernel")]

    def explain_text(self) -> str:
        rows = self.explain()
        w0 = max((len(t) for t, _, _ in rows), default=5)
        w1 = max((len(f) for _, f, _ in rows), default=5)
        head = f"{self.short}  [{self.family}{', ' + self.library if self.library else ''}]"
        return "\n".join([head] + [f"  {t:<{w0}}  {f:<{w1}}  {m}" for t, f, m in rows])


_FIELDS = tuple(f.name for f in fields(KernelName))


class Draft:
    """The mutable working copy one decoder fills in while it reads a name; ``freeze()`` makes the
    ``KernelName``."""

    __slots__ = _FIELDS
    # The slots' types, for type checkers (annotations alone make no class attribute to clash).
    name: str
    demangled: str
    family: str
    library: str
    op: str
    short: str
    arch: str | None
    tensor_cores: bool | None
    math: str | None
    precision: str | None
    dtypes: tuple[str, ...]
    tile: str | None
    stages: int | None
    warps: str | None
    warpgroups: str | None
    cluster: str | None
    layout: str | None
    alignment: str | None
    epilogue: str | None
    details: dict[str, object]
    tokens: list[tuple[str, str, str]]

    def __init__(self, name: str, demangled: str) -> None:
        for fieldname in _FIELDS:
            setattr(self, fieldname, None)
        self.name, self.demangled = name, demangled
        self.family, self.library, self.op, self.short = "other", "", "", ""
        self.dtypes = ()
        self.details = {}
        self.tokens = []

    def identify(
        self, family: str, library: str, op: str | None = None, *, tensor_cores: bool | None = None
    ) -> None:
        """Record whose kernel the name is, what every decoder does first once the name is its own:
        the family (one timeline colour), the library and, where the name alone settles them, the
        op and whether the math runs on tensor cores (each left as it is when not given)."""
        self.family, self.library = family, library
        if op is not None:
            self.op = op
        if tensor_cores is not None:
            self.tensor_cores = tensor_cores

    def add(self, token: str, fieldname: str, meaning: str) -> None:
        """One explanation row: what ``token`` of the name is (``fieldname``) and what it means."""
        self.tokens.append((token, fieldname, meaning))

    def set_arch(self, token: str) -> None:
        """Record the compute capability a name was compiled for, however it spells it ('80',
        'sm90a', 'ampere')."""
        sm = parse_arch(token)
        if sm is None:
            self.add(token, "raw", "not decoded")
            return
        self.arch = sm
        if token.lower() in ARCH_NAMES:
            self.add(token, "arch", f"{token.capitalize()} kernel ({sm}); runs on newer GPUs too")
        else:
            self.add(token, "arch", f"compiled for SM {sm[2:-1]}.{sm[-1]} ({sm})")

    def freeze(self) -> KernelName:
        return KernelName(**{name: getattr(self, name) for name in _FIELDS})


# --------------------------------------------------------------------------------------------------
# Token helpers shared by the decoders
# --------------------------------------------------------------------------------------------------


#: Geometry tokens as generated names spell them: ``128x64`` (an M×N tile, a K-tile × stages, a
#: cluster) and ``128x128x32`` (M×N×K), each read with ``fullmatch``.
MN_TOKEN = re.compile(r"\d+x\d+")
MNK_TOKEN = re.compile(r"\d+x\d+x\d+")


def parse_arch(token: str) -> str | None:
    """'sm80', 'sm_80', '80', '90a', 'sm90a', 'sm100f', 'ampere' -> 'sm80' / 'sm90' / 'sm100' (the
    arch-specific 'a' and family 'f' dropped)."""
    low = token.lower()
    if low in ARCH_NAMES:
        return ARCH_NAMES[low]
    m = _ARCH.fullmatch(low)
    return f"sm{m.group(1)}" if m else None


def dims(text: str) -> str:
    """'128x64x32' -> '128×64×32', for display."""
    return "\u00d7".join(text.split("x"))


def mma_dims(shape: str) -> str:
    """'1688' -> '16×8×8', '16816' -> '16×8×16', '884' -> '8×8×4' (an MMA instruction shape as names
    spell it)."""
    return "\u00d7".join(_MMA_DIMS.get(shape, (shape,)))


def mma_precision(prefix: str, shape: str) -> str | None:
    """The input precision an MMA shape implies. fp64 ('d') and complex fp64 ('z') GEMMs run the
    fp64 MMA (DMMA), whose 8×8×4 shape is also Volta's fp16 HMMA, so for them the accumulator letter
    decides."""
    if prefix in ("d", "z"):
        return PREFIX[prefix]
    return MMA_SHAPE.get(shape)


def layout_meaning(code: str, operands: Iterable[str] = "ABC", style: str = "cublas") -> str:
    """'nt' -> 'A column-major (not transposed), B row-major (transposed)'; one letter per operand,
    any case. ``style`` says whose spelling of conjugated operands the code uses ('cutlass' or
    'cublas')."""
    meaning = {**LAYOUT_MEANING, **_CONJUGATED[style]}
    return ", ".join(f"{op} {meaning.get(c, c)}" for op, c in zip(operands, code.lower()))


def add_layout(
    k: Draft, token: str, operands: Iterable[str] = "ABC", style: str = "cublas"
) -> None:
    k.layout = token
    k.add(token, "layout", layout_meaning(token, operands, style))


def add_tile(k: Draft, tile: str, spelled: str | None = None) -> None:
    """A block tile ('128x64' or '128x128x32'), as the name spells it ('tilesize128x128x32')."""
    k.tile = tile
    k.add(
        spelled or tile,
        "tile",
        f"block tile {'M×N×K' if tile.count('x') == 2 else 'M×N'} = {dims(tile)}",
    )


def add_ktile_stages(
    k: Draft, token: str, spelled: str | None = None, *, extend_tile: bool = True
) -> None:
    """'32x3' after an M×N tile: K-tile 32, 3-stage pipeline (CUTLASS 2.x, legacy cuBLAS, nvjet).
    CUTLASS and nvjet tiles then read M×N×K; legacy cuBLAS keeps its M×N tile
    (``extend_tile=False``), as its names are read today."""
    kt, st = token.split("x")
    k.stages = int(st)
    if extend_tile and k.tile and k.tile.count("x") == 1:
        k.tile = f"{k.tile}x{kt}"
    k.add(spelled or token, "k-tile \u00d7 stages", f"K-tile {kt}, {st}-stage pipeline")


def add_alignment(k: Draft, token: str, what: str = "operands") -> None:
    k.alignment = token[5:]
    k.add(token, "alignment", f"{what} aligned to {token[5:]} elements")


def tensor_core_math(arch: str | None) -> str:
    """What a tensor-core GEMM's ``math`` says when its name gives no instruction: Hopper's
    (sm90) tensor-core GEMMs are all wgmma; on other architectures the instruction is not known."""
    return "tensor cores (wgmma)" if arch == "sm90" else "tensor cores"


def upper(precision: str | None) -> str:
    return (precision or "").upper()


def squash(text: str) -> str:
    """Collapse the double spaces an empty label part leaves."""
    return re.sub(r"\s+", " ", text).strip()


def geometry(
    k: Draft, *, mn_only: bool = False, cluster: bool = False, schedule: bool = False
) -> str:
    """The tile / cluster / layout / schedule tail of a GEMM's short label: ' 128×128, cluster
    2×1×1, nn'."""
    out = ""
    if k.tile:
        out += f" {dims('x'.join(k.tile.split('x')[:2]) if mn_only else k.tile)}"
    if cluster and k.cluster:
        out += f", cluster {dims(k.cluster)}"
    if k.layout:
        out += f", {k.layout}"
    if schedule and "schedule" in k.details:
        out += f", {str(k.details['schedule']).replace('warpspecialized_', '')}"
    return out


#: A math library's routines: (op, pattern on the kernel's name, what the routine is).
Routines = tuple[tuple[str, "re.Pattern[str]", str], ...]


def routine_table(rows: Iterable[tuple[str, str, str]]) -> Routines:
    """A math library's routines with their patterns compiled, read by :func:`routine_of`."""
    return tuple((op, re.compile(pattern), meaning) for op, pattern, meaning in rows)


def routine_of(routines: Routines, name: str) -> tuple[str, str] | None:
    """(op, meaning) of the first routine whose pattern matches all of ``name``, or None. cuSOLVER
    and cuSPARSE name their kernels after the routine they implement; a table lists a narrower
    routine before a broader one that would also match."""
    return next(((op, what) for op, pattern, what in routines if pattern.fullmatch(name)), None)


def set_element_type(k: Draft, args: str, *, what: str = "data", real_only: bool = False) -> None:
    """Precision and dtypes of a math-library kernel from the element types its template arguments
    name (``float``, ``double2``, ``cusparse::Complex<float>``, ...), with one explanation row.
    ``real_only`` picks the real type where a kernel's arguments also name a complex one it does not
    compute in (cuSOLVER's tridiagonal stage)."""
    spelled = value_type_spellings(args)
    types = tuple(spelled)
    if real_only:
        types = tuple(t for t in types if not t.startswith("complex")) or types
    if not types:
        return
    k.precision = types[0]
    k.dtypes = types
    k.add(spelled[types[0]], "dtype", f"{types[0]} {what}")
