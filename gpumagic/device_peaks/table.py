"""Datasheet peaks by device and precision, and matching of ``torch.cuda.get_device_name()`` strings
to them.

Every figure is **dense** (no 2:4 structured sparsity): NVIDIA's datasheets print tensor-core
figures "with sparsity", twice what a dense GEMM can reach, so those are halved here and the comment
says so. fp32 is the non-tensor FFMA rate (what an fp32 GEMM reaches with TF32 off). GeForce parts
run fp16/bf16 (and fp8) tensor-core math with an fp32 accumulator at half the fp16-accumulate rate;
PyTorch's GEMMs accumulate in fp32, so those are the figures given. int8 is integer ops per second
(a GEMM's 2*M*N*K counted as ops), given where the datasheet prints it: on Hopper the same dense
rate as fp8 (H100 SXM: INT8 3,958 TOPS with sparsity), on the A100 624 TOPS dense. A figure NVIDIA
does not publish is left out (None), or, where one figure is all a device's datasheet gives,
derived from it by the architecture's published ratios and said so in the entry's ``source``
(GB10); ``gpumagic.measure_peak()`` measures what the chip reaches instead. Figures are FLOP/s
and bytes/s.

No torch import: the render layer (the ``--ncu`` roofline) reads these ceilings too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["DEVICES", "PRECISIONS", "DevicePeaks", "lookup", "lookup_reason"]

#: The precision classes a peak can be given for, in the order tables show them.
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8")

T = 1e12  # TFLOP/s, TB/s
G = 1e9


@dataclass(frozen=True)
class DevicePeaks:
    """One device's datasheet peaks. ``flops``: precision class -> dense FLOP/s; ``bandwidth``:
    bytes/s."""

    name: str
    memory: str  # the memory's kind, for wording: "HBM3", "GDDR6X", "LPDDR5X"
    bandwidth: float
    flops: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    source: str = ""
    #: the GPU shares the system's memory with the CPU (GB10): no separate device memory to fill
    unified_memory: bool = False
    #: what a reader of this device's shares should know (how its figures were had, its memory)
    note: str = ""

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with a plain dict where the read-only view is (a mappingproxy does not
        pickle)."""
        return {**self.__dict__, "flops": dict(self.flops)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, flops=MappingProxyType(dict(state["flops"])))

    def peak(self, precision: str | None) -> float | None:
        return self.flops.get(precision) if precision else None

    @property
    def bandwidth_label(self) -> str:
        """'HBM bandwidth', 'GDDR bandwidth', 'LPDDR5X bandwidth': how a share of it is worded."""
        kind = self.memory.upper()
        for family in ("HBM", "GDDR"):
            if kind.startswith(family):
                return f"{family} bandwidth"
        return f"{self.memory} bandwidth"


def _entry(
    name: str,
    memory: str,
    bandwidth: float,
    source: str,
    *,
    compute: Mapping[str, float] | None = None,
    unified_memory: bool = False,
    note: str = "",
    **flops: float | None,
) -> DevicePeaks:
    """One table entry: ``compute`` is a set of peaks the part shares with others, ``flops`` its
    own (None: not published, left out)."""
    own = {k: v for k, v in flops.items() if v is not None}
    return DevicePeaks(
        name=name,
        memory=memory,
        bandwidth=bandwidth,
        flops=MappingProxyType({**(compute or {}), **own}),
        source=source,
        unified_memory=unified_memory,
        note=note,
    )


_H100 = "NVIDIA H100 Tensor Core GPU datasheet"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet"
_A100 = "NVIDIA A100 Tensor Core GPU datasheet"
_GB200 = "NVIDIA GB200 NVL72 datasheet (individual Blackwell GPU specifications)"

#: Compute peaks that several parts share: the H100 SXM5 and the H200 SXM (FP32 67 TF; TF32 989,
#: BF16/FP16 1979, FP8 3958 TF with sparsity, halved), the H100 NVL and the H200 NVL (FP32 60 TF;
#: TF32 835, BF16/FP16 1671, FP8 3341 TF with sparsity, halved), and every A100 (FP32 19.5 TF; TF32
#: 156, BF16/FP16 312 TF dense, the datasheet's unstarred figures; INT8 624 TOPS dense; no FP8).
#: They differ in memory only, so each set is written once.
_HOPPER_SXM_COMPUTE = {
    "fp32": 67 * T,
    "tf32": 494.5 * T,
    "bf16": 989.5 * T,
    "fp16": 989.5 * T,
    "fp8": 1979 * T,
    "int8": 1979 * T,
}
_HOPPER_NVL_COMPUTE = {
    "fp32": 60 * T,
    "tf32": 417.5 * T,
    "bf16": 835.5 * T,
    "fp16": 835.5 * T,
    "fp8": 1670.5 * T,
    "int8": 1670.5 * T,
}
_A100_COMPUTE = {
    "fp32": 19.5 * T,
    "tf32": 156 * T,
    "bf16": 312 * T,
    "fp16": 312 * T,
    "int8": 624 * T,
}

DEVICES: dict[str, DevicePeaks] = {
    # H100 SXM5 80GB: the Hopper SXM compute; HBM3 3.35 TB/s.
    "H100 SXM": _entry(
        "H100 SXM",
        "HBM3",
        3.35 * T,
        _H100 + ", SXM column",
        compute=_HOPPER_SXM_COMPUTE,
    ),
    # H100 PCIe 80GB: FP32 51 TF; TF32 756, BF16/FP16 1513, FP8 3026 TF with sparsity (halved);
    # HBM2e 2.0 TB/s.
    "H100 PCIe": _entry(
        "H100 PCIe",
        "HBM2e",
        2.0 * T,
        _H100 + ", PCIe column",
        fp32=51 * T,
        tf32=378 * T,
        bf16=756.5 * T,
        fp16=756.5 * T,
        fp8=1513 * T,
        int8=1513 * T,
    ),
    # H100 NVL 94GB: the Hopper NVL compute; HBM3 3.9 TB/s.
    "H100 NVL": _entry(
        "H100 NVL",
        "HBM3",
        3.9 * T,
        _H100 + ", H100 NVL column",
        compute=_HOPPER_NVL_COMPUTE,
    ),
    # H200 SXM 141GB: the Hopper SXM compute; HBM3e 4.8 TB/s.
    "H200": _entry(
        "H200",
        "HBM3e",
        4.8 * T,
        _H200 + ", H200 SXM column",
        compute=_HOPPER_SXM_COMPUTE,
    ),
    # H200 NVL 141GB: the Hopper NVL compute; HBM3e 4.8 TB/s.
    "H200 NVL": _entry(
        "H200 NVL",
        "HBM3e",
        4.8 * T,
        _H200 + ", H200 NVL column",
        compute=_HOPPER_NVL_COMPUTE,
    ),
    # HGX B200 (1000 W): FP32 75 TF; TF32 2.2, BF16/FP16 4.5, FP8 9, FP4 18 PF with sparsity
    # (halved); 7.7 TB/s.
    "B200": _entry(
        "B200",
        "HBM3e",
        7.7 * T,
        _GB200 + ", HGX B200 column",
        fp32=75 * T,
        tf32=1100 * T,
        bf16=2250 * T,
        fp16=2250 * T,
        fp8=4500 * T,
        fp4=9000 * T,
    ),
    # GB200 (the B200 of GB200 NVL72, up to 1200 W): FP32 80 TF; TF32 2.5, BF16/FP16 5, FP8 10, FP4
    # 20 PF with sparsity (halved); HBM3e 8 TB/s.
    "GB200": _entry(
        "GB200",
        "HBM3e",
        8.0 * T,
        _GB200 + ", GB200 NVL72 column",
        fp32=80 * T,
        tf32=1250 * T,
        bf16=2500 * T,
        fp16=2500 * T,
        fp8=5000 * T,
        fp4=10000 * T,
    ),
    # GB10 (DGX Spark, sm_121): 1 PFLOP FP4 with sparsity (halved: 500 TF dense) and LPDDR5X
    # 273 GB/s from the NVIDIA DGX Spark datasheet; FP32 31 TF as NVIDIA gave it at Hot Chips 2025.
    # NVIDIA publishes no other tensor-core rate. GB10's SM is the SM 12.x one of the RTX Blackwell
    # parts (mma.sync with block-scaled FP4/FP8; no tcgen05, no tensor memory, no 2-SM MMA: the
    # datacenter-Blackwell B200 rules do not apply), whose tensor cores halve the rate per doubling
    # of operand width (RTX Blackwell whitepaper): FP8 and INT8 250, FP16/BF16 125, TF32 62.5 TF,
    # derived from the FP4 figure with FP32 accumulation at full rate. The GeForce half-rate FP32
    # accumulation would cap FP16 at 62.5, and public GB10 cuBLAS runs exceed that (an fp16 8192^3
    # nvjet_sm121_hsh_mma GEMM at 96.5 TFLOP/s), so the full rate is the ceiling given here.
    "GB10": _entry(
        "GB10",
        "LPDDR5X",
        273 * G,
        "NVIDIA DGX Spark datasheet (FP4, LPDDR5X 273 GB/s); NVIDIA GB10 presentation, Hot Chips "
        "2025 (FP32); FP8/INT8/FP16/BF16/TF32 derived from the FP4 figure by the RTX Blackwell "
        "whitepaper's per-precision ratios (not published for GB10)",
        unified_memory=True,
        note=(
            "unified memory: the GPU shares the system's 128 GB LPDDR5X with the CPU, so a share "
            "of bandwidth is of LPDDR5X (273 GB/s), not HBM; the CPU's traffic competes for it, "
            "and a page the CPU touched moves nothing over PCIe. FP8/BF16/FP16/TF32 peaks are "
            "derived, not published: gpumagic.measure_peak() measures this device's own"
        ),
        fp32=31 * T,
        tf32=62.5 * T,
        bf16=125 * T,
        fp16=125 * T,
        fp8=250 * T,
        fp4=500 * T,
        int8=250 * T,
    ),
    # A100 SXM4 80GB: the A100 compute; HBM2e 2,039 GB/s.
    "A100 SXM 80GB": _entry(
        "A100 SXM 80GB",
        "HBM2e",
        2039 * G,
        _A100 + ", A100 80GB SXM column",
        compute=_A100_COMPUTE,
    ),
    # A100 80GB PCIe: the A100 compute; HBM2e 1,935 GB/s.
    "A100 PCIe 80GB": _entry(
        "A100 PCIe 80GB",
        "HBM2e",
        1935 * G,
        _A100 + ", A100 80GB PCIe column",
        compute=_A100_COMPUTE,
    ),
    # A100 40GB (SXM4 and PCIe): the A100 compute; HBM2 1,555 GB/s.
    "A100 40GB": _entry(
        "A100 40GB",
        "HBM2",
        1555 * G,
        _A100 + ", A100 40GB columns",
        compute=_A100_COMPUTE,
    ),
    # L4: FP32 30.3 TF; TF32 120, BF16/FP16 242, FP8 485 TF with sparsity (halved); GDDR6 300 GB/s.
    "L4": _entry(
        "L4",
        "GDDR6",
        300 * G,
        "NVIDIA L4 Tensor Core GPU datasheet",
        fp32=30.3 * T,
        tf32=60 * T,
        bf16=121 * T,
        fp16=121 * T,
        fp8=242.5 * T,
    ),
    # L40S: FP32 91.6 TF; TF32 183, BF16/FP16 362.05, FP8 733 TF dense (the datasheet gives both);
    # GDDR6 864 GB/s.
    "L40S": _entry(
        "L40S",
        "GDDR6",
        864 * G,
        "NVIDIA L40S GPU datasheet",
        fp32=91.6 * T,
        tf32=183 * T,
        bf16=362.05 * T,
        fp16=362.05 * T,
        fp8=733 * T,
    ),
    # GeForce RTX 4090: FP32 82.6 TF; TF32 82.6, FP16/BF16 165.2, FP8 330.3 TF dense with FP32
    # accumulate; GDDR6X 1,008 GB/s.
    "RTX 4090": _entry(
        "RTX 4090",
        "GDDR6X",
        1008 * G,
        "NVIDIA Ada Lovelace GPU Architecture whitepaper, appendix (GeForce RTX 4090)",
        fp32=82.6 * T,
        tf32=82.6 * T,
        bf16=165.2 * T,
        fp16=165.2 * T,
        fp8=330.3 * T,
    ),
    # GeForce RTX 5090: FP32 104.8 TF; TF32 104.8, FP16/BF16 209.5, FP8 419 TF dense with FP32
    # accumulate; FP4 1,676 TF dense (3,352 AI TOPS with sparsity); GDDR7 1,792 GB/s.
    "RTX 5090": _entry(
        "RTX 5090",
        "GDDR7",
        1792 * G,
        "NVIDIA RTX Blackwell GPU Architecture whitepaper, appendix (GeForce RTX 5090)",
        fp32=104.8 * T,
        tf32=104.8 * T,
        bf16=209.5 * T,
        fp16=209.5 * T,
        fp8=419 * T,
        fp4=1676 * T,
    ),
}

#: ``torch.cuda.get_device_name()`` (lower-cased) -> table key; the first pattern that matches wins,
#: so the more specific come first. Word boundaries keep "GH200" from reading as H200 and "GB100"
#: from reading as GB10.
_PATTERNS: list[tuple[str, str]] = [
    (r"\bh100\b.*\bpcie\b", "H100 PCIe"),
    (r"\bh100\b.*\bnvl\b", "H100 NVL"),
    (r"\bh100\b", "H100 SXM"),  # "NVIDIA H100 80GB HBM3" is the SXM5 part
    (r"\bh200\b.*\bnvl\b", "H200 NVL"),
    (r"\bh200\b", "H200"),
    (r"\bgb10\b", "GB10"),
    (r"\bdgx spark\b", "GB10"),
    (r"\bgb200\b", "GB200"),
    (r"\bb200\b", "B200"),
    (r"\ba100\b.*\b40gb\b", "A100 40GB"),
    (r"\ba100\b.*\bpcie\b", "A100 PCIe 80GB"),
    (r"\ba100\b", "A100 SXM 80GB"),
    (r"\bl40s\b", "L40S"),
    (r"\bl4\b", "L4"),
    (r"\brtx 4090$", "RTX 4090"),  # not the 4090 D or the laptop part, which differ
    (r"\brtx 5090$", "RTX 5090"),
]


def _normal(name: str) -> str:
    return " ".join(name.lower().replace("_", " ").split())


def lookup(device_name: str | None) -> DevicePeaks | None:
    """The datasheet peaks of a device named as ``torch.cuda.get_device_name()`` names it, or None
    if unknown."""
    return lookup_reason(device_name)[0]


def lookup_reason(device_name: str | None) -> tuple[DevicePeaks | None, str]:
    """(peaks, "") for a known device; (None, a sentence that says why and what to do) for any
    other."""
    if not device_name:
        return None, "no device named: datasheet peaks need a GPU's name"
    normal = _normal(device_name)
    for pattern, key in _PATTERNS:
        if re.search(pattern, normal):
            return DEVICES[key], ""
    known = ", ".join(DEVICES)
    return None, (
        f"no datasheet peaks for {device_name!r} in gpumagic's table (it knows {known}); "
        "gpumagic.measure_peak() measures this device's own"
    )
