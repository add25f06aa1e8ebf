"""AMD's Tensile GEMMs (inside hipBLASLt and rocBLAS): layout, precision, macro tile,
matrix-instruction shape, epilogue and target from the kernel's name.

Where the naming comes from: ROCm/Tensile ``Tensile/SolutionStructs.py`` and ROCm/hipBLASLt
``tensilelite/Tensile/SolutionStructs`` (see :mod:`.rocm` for the scheme, spelled out). AMD's
matrix units are "matrix cores" (MFMA on CDNA, WMMA on RDNA 3/4); there is no TF32 on them.
"""

from __future__ import annotations

import re

from .name import Draft, dims, squash, upper

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
#: hipBLASLt's hand-written ``Custom_Cijk_..._gfx950`` kernels end in the target, not an ISA token
_GFX_SUFFIX = re.compile(r"gfx(\d{2,4}[a-f]?)")
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
    k.identify(FAMILY, "hipBLASLt/rocBLAS (Tensile)", "gemm")
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
    isa, epilogue = _tensile_parameters(k, toks[4:])
    _tensile_math(k, isa)
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


def _tensile_parameters(k: Draft, rest: list[str]) -> tuple[str | None, list[str]]:
    """The solution parameters after the types: macro tile, matrix instruction and target, then
    epilogue and other flags. Returns the ISA token (None where the name has none) and the epilogue
    steps named."""
    isa = None
    epilogue: list[str] = []
    for i, t in enumerate(rest):
        m = _MT.fullmatch(t)
        if m:
            k.tile = "x".join(str(int(g)) for g in m.groups())  # older names pad: MT032x016x08
            k.add(t, "tile", f"macro tile M×N×K = {dims(k.tile)} (one workgroup)")
            continue
        m = _MI.fullmatch(t)
        if m:
            shape = "x".join(g for g in m.groups() if g)
            k.details["matrix_instruction"] = shape
            k.add(t, "math", f"matrix instruction {dims(shape)}")
            continue
        m = _ISA.fullmatch(t) or _GFX_SUFFIX.fullmatch(t) if isa is None else None
        if m:
            isa = m.group(1)
            k.arch = gfx_arch(isa)
            k.add(t, "arch", f"compiled for {k.arch}")
            continue
        _tensile_flag(k, t, epilogue)
        if i > 80:  # the parameters that matter come first; the rest are tuning knobs
            break
    return isa, epilogue


def _tensile_flag(k: Draft, t: str, epilogue: list[str]) -> None:
    """One epilogue or flag parameter; an epilogue step is appended to ``epilogue``."""
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


def _tensile_math(k: Draft, isa: str | None) -> None:
    """Matrix cores where the name gives a matrix instruction; ``MI0``, or a tile with no
    matrix-instruction parameter at all, is Tensile's MAC kernel on the vector ALUs."""
    mi = k.details.get("matrix_instruction")
    if mi and not str(mi).startswith("0"):
        unit = _matrix_unit(isa)
        k.tensor_cores = True
        k.math = f"matrix cores ({unit})"
        k.details["matrix_unit"] = unit
    elif mi is not None or k.tile:
        k.tensor_cores = False
        k.math = "vector ALUs (no matrix cores)"


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
