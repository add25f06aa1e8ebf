"""How far from the hardware: device peaks (datasheet and measured) and achieved rates as shares of
them.

- :mod:`.table`: dense datasheet peaks by device and precision, and matching
  ``torch.cuda.get_device_name()``;
- :mod:`.measure`: :func:`measure_peak`, what this GPU reaches (a GEMM per precision, a copy),
  cached;
- :mod:`.achieved`: :func:`achieved`, (work, seconds per call, device) -> TFLOP/s, GB/s, shares and
  the limiter;
- :mod:`.view`: :func:`peaks`, the table as an object that shows itself.

The package is named ``device_peaks`` rather than ``peaks`` so that ``gpumagic.peaks`` stays the
function: a submodule of that name would replace it on the package the first time it is imported.
"""

from __future__ import annotations

from .achieved import Achieved, achieved, format_rate
from .measure import MeasuredPeaks, NoGpuError, cache_path, cached_peak, measure_peak
from .table import DEVICES, PRECISIONS, DevicePeaks, lookup, lookup_reason
from .view import PeakTable, peaks

__all__ = [
    "DEVICES",
    "PRECISIONS",
    "Achieved",
    "DevicePeaks",
    "MeasuredPeaks",
    "NoGpuError",
    "PeakTable",
    "achieved",
    "cache_path",
    "cached_peak",
    "format_rate",
    "lookup",
    "lookup_reason",
    "measure_peak",
    "peaks",
]
