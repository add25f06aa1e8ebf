"""From the work of a call and its time to achieved TFLOP/s and GB/s, each as a share of the peak
that applies.

The peak that applies is the one for the precision the FLOPs ran in (fp32 on the FFMA units,
TF32/bf16/fp16/fp8 on the tensor cores) and the memory's bandwidth. It is the datasheet's by
default, or what ``measure_peak()`` measured on this device (``basis="measured"``), or the
datasheet's with the measured as the fallback for a device the table does not know
(``basis="auto"``, the default).

The roofline words (:meth:`Achieved.limiter`): a call whose arithmetic intensity (FLOPs per byte)
lies below the ridge point (peak FLOP/s over bandwidth) can at best reach intensity x bandwidth: it
is memory-bound; above the ridge, compute-bound. Far below its roof (under ``FAR_BELOW_ROOF``)
neither ceiling is what holds it: latency, launch overhead or a size too small to fill the GPU.

No torch import: it works on the numbers alone, so that the timing layer and the render layer can
both use it.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from ..units import format_si
from .table import DevicePeaks, lookup

if TYPE_CHECKING:
    from .measure import MeasuredPeaks

__all__ = [
    "FAR_BELOW_ROOF",
    "OVER_PEAK",
    "Achieved",
    "WorkLike",
    "achieved",
    "format_rate",
    "format_share",
]

#: A call below this share of its roofline ceiling is limited by neither compute nor memory.
FAR_BELOW_ROOF = 0.3
#: A rate above its peak is never a measurement: the counted work is not the work that ran
#: (attention counted dense where the kernel skipped masked tiles, a decomposition counted where one
#: fused kernel ran) or, for bytes, data that stayed in L2 between calls. Such a rate and its share
#: are not shown; :meth:`Achieved.over_peak` says why.
OVER_PEAK = 1.0

_TENSOR_CORE = {
    "tf32": "TF32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "fp4": "fp4",
    "int8": "int8",
}
#: Precisions whose work is integer ops: their rate reads OP/s, not FLOP/s.
_INTEGER = ("int8",)


class WorkLike(Protocol):
    """What :func:`achieved` reads of a :class:`gpumagic.timing.work.Work` (read only: a Work is
    frozen)."""

    @property
    def flops(self) -> int | None: ...

    @property
    def bytes(self) -> int | None: ...

    @property
    def precision_class(self) -> str | None: ...


def format_rate(value: float | None, unit: str) -> str:
    """3 significant digits with an SI prefix: format_rate(5.19e13, 'FLOP/s') -> '51.9 TFLOP/s'; '—'
    for None."""
    return format_si(value, unit, missing="\u2014")


def format_share(share: float) -> str:
    """'77%', '4%', '0.35%': whole percent from 1% up, two significant digits below."""
    return f"{share:.0%}" if share >= 0.01 else f"{share * 100:.2g}%"


def flop_peak_label(precision: str | None, basis: str) -> str:
    """'FFMA peak', 'bf16 tensor-core peak', 'measured bf16 GEMM peak'."""
    if precision is None:
        return "peak"
    if basis == "measured":
        return f"measured {precision} GEMM peak"
    if precision == "fp32":
        return "FFMA peak"
    if precision in _TENSOR_CORE:
        return f"{_TENSOR_CORE[precision]} tensor-core peak"
    return f"{precision} peak"


@dataclass(frozen=True)
class Achieved:
    """Achieved rates of one call and their shares of the applicable peaks (None where not
    known)."""

    device: str
    seconds: float
    flops: int | None
    bytes: int | None
    precision: str | None
    flop_peak: float | None = None
    bandwidth: float | None = None
    basis: str | None = None  # "datasheet" or "measured": where the peaks came from
    bandwidth_label: str = "memory bandwidth"

    @property
    def flop_rate(self) -> float | None:
        return self.flops / self.seconds if self.flops and self.seconds > 0 else None

    @property
    def byte_rate(self) -> float | None:
        return self.bytes / self.seconds if self.bytes and self.seconds > 0 else None

    @property
    def raw_flop_share(self) -> float | None:
        """The FLOP rate over its peak as counted, above 1 included (see :data:`OVER_PEAK`)."""
        rate = self.flop_rate
        return rate / self.flop_peak if rate is not None and self.flop_peak else None

    @property
    def raw_byte_share(self) -> float | None:
        rate = self.byte_rate
        return rate / self.bandwidth if rate is not None and self.bandwidth else None

    @property
    def flop_over_peak(self) -> bool:
        return (self.raw_flop_share or 0.0) > OVER_PEAK

    @property
    def byte_over_peak(self) -> bool:
        return (self.raw_byte_share or 0.0) > OVER_PEAK

    @property
    def flop_share(self) -> float | None:
        """The FLOP rate's share of its peak; None without a peak, or above it (not a
        measurement)."""
        return None if self.flop_over_peak else self.raw_flop_share

    @property
    def byte_share(self) -> float | None:
        return None if self.byte_over_peak else self.raw_byte_share

    def over_peak(self) -> list[str]:
        """Why a rate is not shown: one sentence per rate that the counted work would put above its
        peak."""
        out = []
        if self.flop_over_peak:
            out.append(
                f"FLOP/s not shown: the counted FLOPs would run at "
                f"{format_rate(self.flop_rate, 'FLOP/s')}, "
                f"{self.raw_flop_share:.0%} of the {self.flop_label}, so they are not the "
                f"work that ran (attention "
                "counted dense where the kernel skips masked tiles, or a sparse kernel)"
            )
        if self.byte_over_peak:
            out.append(
                f"GB/s not shown: the counted bytes would move "
                f"{format_rate(self.byte_rate, 'B/s')}, "
                f"{self.raw_byte_share:.0%} of {self.byte_label}, so they are not the traffic "
                f"that reached memory "
                "(the data stays in L2 between calls, or the ops counted are not the kernels "
                "that ran); "
                "--ncu measures the real traffic"
            )
        return out

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte moved (the counted bytes: a lower bound on traffic, so an upper bound on
        intensity)."""
        return self.flops / self.bytes if self.flops and self.bytes else None

    @property
    def ridge(self) -> float | None:
        """The intensity where the bandwidth roof meets the compute roof, FLOP/byte."""
        return self.flop_peak / self.bandwidth if self.flop_peak and self.bandwidth else None

    @property
    def flop_label(self) -> str:
        return flop_peak_label(self.precision, self.basis or "datasheet")

    @property
    def byte_label(self) -> str:
        return "measured copy bandwidth" if self.basis == "measured" else self.bandwidth_label

    def flop_segment(self) -> str | None:
        """'51.9 TFLOP/s fp32 = 77% of FFMA peak' (without the share where no peak is known; None
        above the peak)."""
        rate = self.flop_rate
        if rate is None or self.flop_over_peak:
            return None
        unit = "OP/s" if self.precision in _INTEGER else "FLOP/s"
        text = format_rate(rate, unit) + (f" {self.precision}" if self.precision else "")
        share = self.flop_share
        return text + (
            f" = {format_share(share)} of {self.flop_label}" if share is not None else ""
        )

    def byte_segment(self) -> str | None:
        """'2.61 TB/s = 78% of HBM bandwidth' (without the share where no bandwidth is known; None
        above it)."""
        rate = self.byte_rate
        if rate is None or self.byte_over_peak:
            return None
        share = self.byte_share
        return format_rate(rate, "B/s") + (
            f" = {format_share(share)} of {self.byte_label}" if share is not None else ""
        )

    def segments(self) -> list[str]:
        return [s for s in (self.flop_segment(), self.byte_segment()) if s]

    def segment(self) -> str | None:
        """The one figure for a one-line summary: the rate nearer its ceiling (FLOP/s when no share
        is known)."""
        flop, byte = self.flop_segment(), self.byte_segment()
        if flop is None or byte is None:
            return flop or byte
        fs, bs = self.flop_share, self.byte_share
        if fs is not None and bs is not None:
            return flop if fs >= bs else byte
        return flop

    def limiter(self) -> str | None:
        """'compute-bound', 'memory-bound' or 'latency-bound' on the roofline; None without the
        peaks to say, or where a counted rate is above its peak (the counts are not what ran)."""
        if self.flop_over_peak or self.byte_over_peak:
            return None
        if self.flop_rate is None:
            if self.byte_share is None:
                return None
            return "memory-bound" if self.byte_share >= FAR_BELOW_ROOF else "latency-bound"
        peak, bandwidth, intensity = self.flop_peak, self.bandwidth, self.intensity
        if not peak or not bandwidth or intensity is None or self.flop_share is None:
            return None  # no ridge (it needs both roofs), or no share of the compute roof
        memory_side = intensity < peak / bandwidth
        roof = intensity * bandwidth if memory_side else peak
        if self.flop_rate / roof < FAR_BELOW_ROOF:
            return "latency-bound"
        return "memory-bound" if memory_side else "compute-bound"

    def explain(self) -> str:
        """The limiter in a sentence with the numbers behind it."""
        lim = self.limiter()
        if lim is None:
            where = self.device or "this device"
            return (
                f"no peaks known for {where}: the shares and the limiter need the "
                f"datasheet table or measure_peak()"
            )
        ai = f"{self.intensity:.3g} FLOP/B" if self.intensity is not None else "no FLOPs counted"
        ridge = f", ridge at {self.ridge:.3g} FLOP/B" if self.ridge is not None else ""
        why = {
            "compute-bound": "above the ridge: the compute ceiling holds it",
            "memory-bound": "below the ridge: the bandwidth ceiling holds it",
            "latency-bound": f"under {FAR_BELOW_ROOF:.0%} of its roof: neither ceiling holds "
            f"it (latency, launch "
            "overhead or too little work to fill the GPU)",
        }[lim]
        return f"{lim}: intensity {ai}{ridge}; {why}"

    def summary(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "seconds": self.seconds,
            "flops": self.flops,
            "bytes": self.bytes,
            "precision": self.precision,
            "flop_rate": self.flop_rate,
            "byte_rate": self.byte_rate,
            "flop_peak": self.flop_peak,
            "bandwidth": self.bandwidth,
            "flop_share": self.flop_share,
            "byte_share": self.byte_share,
            "over_peak": self.over_peak(),
            "intensity": self.intensity,
            "limiter": self.limiter(),
            "basis": self.basis,
        }

    def __str__(self) -> str:
        return "; ".join(self.segments()) or "no FLOPs or bytes counted"

    def __repr__(self) -> str:
        return f"Achieved({self} on {self.device})"

    def _repr_html_(self) -> str:
        return f"<code>{html.escape(str(self))}</code>"


def achieved(
    work: WorkLike,
    seconds: float,
    device: str | None,
    *,
    basis: str = "auto",
    measured: MeasuredPeaks | None = None,
    peaks: DevicePeaks | None = None,
) -> Achieved:
    """Achieved FLOP/s and bytes/s of one call of ``work`` taking ``seconds``, with shares of
    ``device``'s peaks.

    ``device`` is ``torch.cuda.get_device_name()`` (or any name: the CPU, an unknown GPU give rates
    without shares). ``basis``: "datasheet", "measured" (the cached ``measure_peak()`` result, or
    ``measured``), or "auto" (the datasheet, else the measured). ``peaks`` overrides the table
    lookup.
    """
    if basis not in ("auto", "datasheet", "measured"):
        raise ValueError(f"basis must be 'auto', 'datasheet' or 'measured', got {basis!r}")
    # read leniently: a caller's own work object may leave the precision out
    precision: str | None = getattr(work, "precision_class", None)
    call = Achieved(
        device=device or "",
        seconds=seconds,
        flops=work.flops,
        bytes=work.bytes,
        precision=precision,
    )
    sheet = peaks if peaks is not None else lookup(device)
    if basis != "measured" and sheet is not None:
        return replace(
            call,
            flop_peak=sheet.peak(precision),
            bandwidth=sheet.bandwidth,
            basis="datasheet",
            bandwidth_label=sheet.bandwidth_label,
        )
    if basis != "datasheet":
        if measured is None and device:
            from .measure import cached_peak

            measured = cached_peak(device)
        if measured is not None:
            flop_peak = measured.flops.get(precision) if precision else None
            return replace(
                call, flop_peak=flop_peak, bandwidth=measured.bandwidth, basis="measured"
            )
    return call
