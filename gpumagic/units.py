"""Human-readable times, in the style of IPython's ``%timeit`` (three significant digits, one unit per number)."""

from __future__ import annotations

import math
import sys

__all__ = ["format_time", "micro_sign"]


def micro_sign() -> str:
    """'µ' where stdout can encode it, else 'u' (as IPython does for terminals with a narrow encoding)."""
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
