"""Human-readable times, in the style of IPython's ``%timeit`` (three significant digits, one unit
per number), and rates with an SI prefix (51.9 TFLOP/s, 3.05 TB/s): one spelling for the timing
line, the tables and the plots."""

from __future__ import annotations

import math
import sys

__all__ = ["format_rate", "format_si", "format_time", "micro_sign"]

_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def micro_sign() -> str:
    """'µ' where stdout can encode it, else 'u' (as IPython does for terminals with a narrow
    encoding)."""
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "\xb5".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return "u"
    return "\xb5"


def format_time(seconds: float, precision: int = 3) -> str:
    """Format a duration with ``precision`` significant digits: 0.00369 -> '3.69 ms'."""
    if seconds is None or math.isnan(seconds):
        return "nan"
    if seconds < 0:
        return "-" + format_time(-seconds, precision)
    if seconds >= 60.0:
        minutes, rest = divmod(seconds, 60.0)
        if minutes >= 60:
            hours, minutes = divmod(minutes, 60)
            return f"{int(hours)}h {int(minutes)}min {rest:.0f}s"
        return f"{int(minutes)}min {rest:.{max(precision - 2, 0)}f}s"
    units = ["s", "ms", micro_sign() + "s", "ns"]
    scales = [1.0, 1e3, 1e6, 1e9]
    order = min(-int(math.floor(math.log10(seconds)) // 3), 3) if seconds > 0 else 3
    order = max(order, 0)
    value = seconds * scales[order]
    # Rounding can carry into the next unit (999.96 µs -> "1.00e+03 µs"): move up a unit then.
    if order > 0 and float(f"{value:.{precision}g}") >= 1000:
        order -= 1
        value = seconds * scales[order]
    return f"{value:.{precision}g} {units[order]}"


def format_si(value: float | None, unit: str, missing: str = "n/a") -> str:
    """3 significant digits with an SI prefix: format_si(5.19e13, 'FLOP/s') -> '51.9 TFLOP/s';
    ``missing`` for None, NaN or infinity."""
    if value is None or not math.isfinite(value):
        return missing
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def format_rate(bytes_per_s: float | None, missing: str = "n/a") -> str:
    """A transfer rate in bytes per second with its unit chosen, as a copy's rate is read: 4.4e9 ->
    '4.4 GB/s', 3e6 -> '3 MB/s', 512 -> '512 B/s'; never a '0.0 GB/s' for a slow copy."""
    return format_si(bytes_per_s, "B/s", missing)


def format_ns(ns: object) -> str:
    """A duration in nanoseconds (a Trace's clock; a numpy or pandas number too) as people read it
    (``format_time``); "" where there is none (None, NaN), as a table shows a missing figure."""
    try:
        value = float(ns)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return "" if math.isnan(value) else format_time(value * 1e-9)


def plural(count: int, noun: str) -> str:
    """``1 kernel``, ``3 kernels``: a count with its noun, an ``s`` added unless it is one."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
