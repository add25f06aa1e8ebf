"""What this GPU actually reaches: a large GEMM per precision and a large copy, measured once and
cached.

A datasheet peak is a boost-clock product of units and rates; the chip in front of you, at its power
limit and clocks, reaches less (an H100 SXM's fp32 GEMM tops out near 51 of the 67 TFLOP/s).
``measure_peak()`` times the best case once, so a share can be read against what is reachable as
well as against the datasheet.

- GEMMs: ``size`` x ``size`` x ``size`` (8192 by default: large enough that every precision is at
  its plateau) in fp32 with TF32 off, TF32, bf16, fp16, and fp8 (``torch._scaled_mm``, e4m3) where
  the GPU has it. Each is timed with CUDA events over several repetitions of back-to-back calls; the
  fastest repetition counts (a peak is the best the chip does, not the typical).
- Bandwidth: ``dst.copy_(src)`` of a buffer far larger than the L2 (1 GiB, less on a small GPU),
  counting the bytes read and written.

Cached per device name, in memory and on disk (``peaks.json`` under ``$GPUMAGIC_CACHE_DIR``, else
``$XDG_CACHE_HOME/gpumagic``, else ``~/.cache/gpumagic``); ``force=True`` measures again.
"""

from __future__ import annotations

import datetime
import html
import json
import math
import os
import pathlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..edges import TorchValue
from ..errors import GpuMagicError
from .table import PRECISIONS

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MeasuredPeaks", "NoGpuError", "cache_path", "cached_peak", "measure_peak"]

#: Seconds of back-to-back calls per timed repetition, and repetitions; the fastest repetition
#: counts.
REPETITION_TIME = 0.05
REPETITIONS = 5
#: Bytes copied at most by the bandwidth measurement, and the share of free memory it may use.
COPY_BYTES = 1 << 30
COPY_SHARE_OF_FREE = 0.2

_MEMORY: dict[str, MeasuredPeaks] = {}


class NoGpuError(GpuMagicError, RuntimeError):
    """A measurement that needs a CUDA GPU was asked for where there is none: ``what`` and
    ``why``."""

    template = (
        "{what} needs a CUDA GPU, and {why}. Run it on a machine with an NVIDIA GPU "
        "and a CUDA build of PyTorch."
    )


@dataclass(frozen=True)
class MeasuredPeaks:
    """What one device reached: ``flops`` (precision class -> FLOP/s) and ``bandwidth`` (bytes/s of
    a copy)."""

    device: str
    flops: dict[str, float]
    bandwidth: float | None
    size: int
    measured_at: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    path: str | None = None  # the cache file it lives in
    cached: bool = False  # read from the cache rather than measured by this call

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "flops": self.flops,
            "bandwidth": self.bandwidth,
            "size": self.size,
            "measured_at": self.measured_at,
            "versions": self.versions,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], path: str | None = None) -> MeasuredPeaks:
        return cls(
            device=data["device"],
            flops={k: float(v) for k, v in data.get("flops", {}).items()},
            bandwidth=data.get("bandwidth"),
            size=int(data.get("size", 0)),
            measured_at=data.get("measured_at", ""),
            versions=dict(data.get("versions", {})),
            notes=tuple(data.get("notes", ())),
            path=path,
            cached=True,
        )

    def rows(self) -> list[tuple[str, str]]:
        out = [
            (f"{p} GEMM", f"{self.flops[p] / 1e12:.1f} TFLOP/s")
            for p in PRECISIONS
            if p in self.flops
        ]
        if self.bandwidth:
            out.append(("copy bandwidth", f"{self.bandwidth / 1e12:.2f} TB/s"))
        return out

    def __str__(self) -> str:
        head = (
            f"Measured peaks on {self.device} ({self.size}^3 GEMMs; "
            f"{self.measured_at or 'time unknown'})"
        )
        body = [f"  {k:<16} {v}" for k, v in self.rows()]
        tail = [f"  note: {n}" for n in self.notes]
        where = [f"  cached in {self.path}"] if self.path else []
        return "\n".join([head, *body, *tail, *where])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        cell = "style='text-align:left'"
        body = "".join(
            f"<tr><th {cell}>{html.escape(k)}</th><td {cell}>{html.escape(v)}</td></tr>"
            for k, v in self.rows()
        )
        notes = "".join(f"<div>{html.escape(n)}</div>" for n in self.notes)
        where = f"<div>cached in <code>{html.escape(self.path)}</code></div>" if self.path else ""
        return (
            f"<div class='gpumagic-peaks'><div><b>Measured peaks on {html.escape(self.device)}</b> "
            f"({self.size}<sup>3</sup> GEMMs)</div><table>{body}</table>{notes}{where}</div>"
        )

    def to_dataframe(self) -> pd.DataFrame:
        import pandas as pd

        rows = [{"what": f"{p} GEMM", "value": v, "unit": "FLOP/s"} for p, v in self.flops.items()]
        if self.bandwidth:
            rows.append({"what": "copy bandwidth", "value": self.bandwidth, "unit": "B/s"})
        df = pd.DataFrame(rows, columns=["what", "value", "unit"])
        df.attrs.update({"device": self.device, "size": self.size, "measured_at": self.measured_at})
        return df


def cache_path() -> pathlib.Path:
    """Where measured peaks are kept: ``$GPUMAGIC_CACHE_DIR``, ``$XDG_CACHE_HOME/gpumagic`` or
    ``~/.cache/gpumagic``."""
    root = os.environ.get("GPUMAGIC_CACHE_DIR")
    if root:
        return pathlib.Path(root) / "peaks.json"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = pathlib.Path(xdg) if xdg else pathlib.Path.home() / ".cache"
    return base / "gpumagic" / "peaks.json"


def _read_cache(path: pathlib.Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def cached_peak(device: str) -> MeasuredPeaks | None:
    """The measured peaks of ``device`` from this process or the disk cache, without measuring; None
    if none."""
    if device in _MEMORY:
        return _MEMORY[device]
    path = cache_path()
    entry = _read_cache(path).get(device)
    if not isinstance(entry, dict):
        return None
    try:
        found = MeasuredPeaks.from_json(entry, str(path))
    except (KeyError, TypeError, ValueError):
        return None
    _MEMORY[device] = found
    return found


def _store(found: MeasuredPeaks) -> MeasuredPeaks:
    path = cache_path()
    data = _read_cache(path)
    data[found.device] = found.to_json()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        tmp.replace(path)
        where: str | None = str(path)
        notes = found.notes
    except OSError as exc:
        where, notes = None, (*found.notes, f"not cached on disk ({path}: {exc.strerror or exc})")
    kept = MeasuredPeaks(**{**found.__dict__, "path": where, "notes": notes})
    _MEMORY[found.device] = kept
    return kept


def _best_seconds(torch: ModuleType, fn: Callable[[], TorchValue]) -> float:
    """Seconds per call of ``fn``: the fastest of ``REPETITIONS`` repetitions of back-to-back
    calls."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    one = max(start.elapsed_time(end) / 1e3, 1e-6)
    calls = max(1, min(1000, math.ceil(REPETITION_TIME / one)))
    best = math.inf
    for _ in range(REPETITIONS):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / calls)
    return best


def _gemm(torch: ModuleType, precision: str, n: int) -> Callable[[], TorchValue]:
    """A zero-argument GEMM of ``precision`` on n x n operands (fp8 through
    ``torch._scaled_mm``)."""
    if precision == "fp8":
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = (
            torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
        )  # column-major, as _scaled_mm wants
        one = torch.ones((), device="cuda")
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dtype = {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
    }[precision]
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    return lambda: torch.mm(a, b)


def _with_tf32(torch: ModuleType, on: bool, fn: Callable[[], TorchValue]) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        matmul = torch.backends.cuda.matmul
        old, old_precision = matmul.allow_tf32, getattr(matmul, "fp32_precision", None)
        matmul.allow_tf32 = on
        try:
            return _best_seconds(torch, fn)
        finally:
            matmul.allow_tf32 = old
            if (
                old_precision is not None
            ):  # newer PyTorch: the per-backend setting is the user's, put it back
                matmul.fp32_precision = old_precision


def free_bytes(torch: ModuleType) -> int | None:
    """The device's free memory, or None where the driver does not report it: a unified-memory
    device (GB10, whose GPU shares the system's LPDDR5X) answers NVML's memory query with "Not
    Supported", and some drivers raise or return 0 for ``cudaMemGetInfo`` there too."""
    try:
        free, _total = torch.cuda.mem_get_info()
    except (RuntimeError, AttributeError):
        return None
    return int(free) or None


def copy_bytes(free: int | None) -> int:
    """How many bytes the bandwidth copy moves: at most :data:`COPY_BYTES` and a share of the
    free memory, or :data:`COPY_BYTES` / 4 (256 MiB, still far past any L2) where free memory is
    not reported."""
    if free is None:
        return (COPY_BYTES // 4) // 16 * 16
    return int(min(COPY_BYTES, free * COPY_SHARE_OF_FREE)) // 16 * 16


def _copy_bandwidth(torch: ModuleType) -> float:
    """Bytes/s of a device-to-device copy far larger than the L2 (read + written)."""
    nbytes = copy_bytes(free_bytes(torch))
    src = torch.empty(nbytes // 4, device="cuda", dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    return 2 * nbytes / _best_seconds(torch, lambda: dst.copy_(src))


def _measure(torch: ModuleType, device: str, size: int) -> MeasuredPeaks:
    flops: dict[str, float] = {}
    notes: list[str] = []
    override = os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE") == "1"
    fn: Callable[[], TorchValue] | None  # dropped after each GEMM: its operands are freed
    for precision in ("fp32", "tf32", "bf16", "fp16", "fp8"):
        if precision == "fp32" and override:
            notes.append(
                "fp32 not measured: TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 makes every fp32 GEMM TF32"
            )
            continue
        try:
            fn = _gemm(torch, precision, size)
            seconds = _with_tf32(torch, precision == "tf32", fn)
        except (RuntimeError, AttributeError, TypeError) as exc:
            notes.append(
                f"{precision} GEMM not measured: {str(exc).splitlines()[0] if str(exc) else exc!r}"
            )
            continue
        finally:
            fn = None
            torch.cuda.empty_cache()
        flops[precision] = 2 * size**3 / seconds
    bandwidth = None
    try:
        bandwidth = _copy_bandwidth(torch)
    except RuntimeError as exc:
        notes.append(f"bandwidth not measured: {str(exc).splitlines()[0]}")
    finally:
        torch.cuda.empty_cache()
    return MeasuredPeaks(
        device=device,
        flops=flops,
        bandwidth=bandwidth,
        size=size,
        measured_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        versions={"torch": str(torch.__version__), "cuda": str(torch.version.cuda)},
        notes=tuple(notes),
    )


def measure_peak(*, force: bool = False, size: int = 8192) -> MeasuredPeaks:
    """Measure (or read from the cache) the peaks this GPU reaches: GEMM FLOP/s per precision, copy
    bandwidth.

    Takes a few seconds once per device; later calls, in this process or another, read the cache
    (its path is in the result and in its text). ``force=True`` measures again. Raises
    :class:`NoGpuError` without CUDA.
    """
    try:
        import torch
    except ImportError as exc:
        raise NoGpuError(what="measure_peak()", why="PyTorch is not installed") from exc
    if not torch.cuda.is_available():
        raise NoGpuError(what="measure_peak()", why="torch.cuda.is_available() is False here")
    device = torch.cuda.get_device_name()
    if not force:
        found = cached_peak(device)
        if found is not None:
            return found
    return _store(_measure(torch, device, size))
