"""What a trace's GPU can do, as far as advice needs it: its vendor and NVIDIA compute capability,
and from them whether it has TF32 or tensor cores at all.

Advice must fit the hardware: "allow TF32" means nothing on a V100 (compute capability 7.0), an RTX
2080 Ti (7.5) or a GP100 (6.0), none of which has TF32, and an AMD GPU's ``computeMajor`` 9 (gfx90a)
is not NVIDIA's 9.0 (Hopper). The capability comes from the trace (Kineto's ``deviceProperties``,
nsys' ``TARGET_INFO_CUDA_DEVICE``); where a trace does not carry it, from the device's name for the
common parts. Unknown stays unknown (None): the caller words its advice conditionally then, never as
a fact about a GPU it cannot see.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "amd_device_from_names",
    "compute_capability",
    "has_tensor_cores",
    "has_tf32",
    "is_amd",
    "vendor",
]

#: The AMD GPU an ISA target names (what ROCm kernels carry in their names: ``..._gfx942``).
_GFX = {
    "gfx950": "AMD Instinct MI350 series (gfx950)",
    "gfx942": "AMD Instinct MI300 series (gfx942)",
    "gfx941": "AMD Instinct MI300X (gfx941)",
    "gfx940": "AMD Instinct MI300A (gfx940)",
    "gfx90a": "AMD Instinct MI200 series (gfx90a)",
    "gfx908": "AMD Instinct MI100 (gfx908)",
    "gfx1100": "AMD Radeon RX 7900 series (gfx1100)",
}
_GFX_TOKEN = re.compile(r"gfx(9\d\d|9[0-4]a|1[01]\d\d)", re.IGNORECASE)


def amd_device_from_names(names: Iterable[Any]) -> str:
    """The AMD GPU a trace's kernel names point to (their ISA target, ``gfx942``), where the trace
    names no device (a ROCm trace without Kineto's ``deviceProperties``): "AMD GPU" where no name
    carries a target gpumagic knows."""
    seen: dict[str, int] = {}
    for name in names:
        for m in _GFX_TOKEN.finditer(str(name)):
            token = "gfx" + m.group(1).lower()
            seen[token] = seen.get(token, 0) + 1
    known = [t for t in sorted(seen, key=lambda t: -seen[t]) if t in _GFX]
    if known:
        return _GFX[known[0]]
    return f"AMD GPU ({next(iter(sorted(seen, key=lambda t: -seen[t])))})" if seen else "AMD GPU"


#: Device-name patterns -> compute capability, for traces that name the GPU and do not say its
#: capability. First match wins: longer, more specific patterns first.
_BY_NAME: tuple[tuple[re.Pattern[str], tuple[int, int]], ...] = tuple(
    (re.compile(p, re.IGNORECASE), cc)
    for p, cc in (
        (r"\bGB10\b", (12, 1)),
        (r"\bRTX (PRO )?50\d0\b|RTX PRO \d000 Blackwell", (12, 0)),
        (r"\bB[12]00\b|\bGB[23]00\b", (10, 0)),
        (r"\bH[12]00\b|\bGH200\b", (9, 0)),
        (r"\bL40S?\b|\bL4\b|\bRTX 40\d0\b|\bRTX [0-9]000 Ada\b", (8, 9)),
        (r"\bA10G?\b|\bA[1-4]0\b|\bRTX 30\d0\b|\bRTX A\d000\b|\bA2\b", (8, 6)),
        (r"\bA100\b|\bA30\b|\bA800\b", (8, 0)),
        (r"\bT4\b|\bRTX 20\d0\b|\bTITAN RTX\b|\bQuadro RTX\b|\bGTX 16\d0\b", (7, 5)),
        (r"\bV100\b|\bTITAN V\b|\bQuadro GV100\b", (7, 0)),
        (r"\bP100\b|\bGP100\b", (6, 0)),
        (r"\bP40\b|\bP4\b|\bGTX 10\d0\b|\bTITAN Xp?\b", (6, 1)),
    )
)
_AMD = re.compile(r"\bAMD\b|\bRadeon\b|\bInstinct\b|\bMI\d{3}[A-Z]?\b", re.IGNORECASE)


def vendor(meta: Mapping[str, Any]) -> str | None:
    """ "AMD" or "NVIDIA" where the trace says (its loader's ``meta["vendor"]``, else the device's
    name); else None."""
    said = meta.get("vendor")
    if said:
        return str(said)
    name = str(meta.get("device") or "")
    if _AMD.search(name):
        return "AMD"
    if "NVIDIA" in name.upper() or compute_capability(meta) is not None:
        return "NVIDIA"
    return None


def is_amd(meta: Mapping[str, Any]) -> bool:
    """Whether the trace's GPU is an AMD one (ROCm): NVIDIA's capability, TF32 advice and SM names
    do not apply."""
    return vendor(meta) == "AMD"


def compute_capability(meta: Mapping[str, Any]) -> tuple[int, int] | None:
    """The NVIDIA compute capability, (major, minor): the trace's own ``meta["compute_capability"]``
    ("8.0"), else from the device's name; None for an AMD GPU or where neither says."""
    if meta.get("vendor") == "AMD" or _AMD.search(str(meta.get("device") or "")):
        return None
    said = meta.get("compute_capability")
    if said:
        found = re.match(r"^\s*(\d+)\.(\d+)", str(said))
        if found:
            return int(found.group(1)), int(found.group(2))
    name = str(meta.get("device") or "")
    for pattern, cc in _BY_NAME:
        if pattern.search(name):
            return cc
    return None


def has_tf32(meta: Mapping[str, Any]) -> bool | None:
    """Whether the GPU has TF32 tensor cores (NVIDIA compute capability 8.0 and newer); False on an
    AMD GPU (PyTorch's TF32 switches are NVIDIA's) and on older NVIDIA parts; None where the
    capability is not known."""
    if is_amd(meta):
        return False
    cc = compute_capability(meta)
    return None if cc is None else cc >= (8, 0)


def has_tensor_cores(meta: Mapping[str, Any]) -> bool | None:
    """Whether the NVIDIA GPU has tensor cores at all (compute capability 7.0 and newer: fp16 on a
    V100); None where not known or not NVIDIA."""
    cc = compute_capability(meta)
    return None if cc is None else cc >= (7, 0)
