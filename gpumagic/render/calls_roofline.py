"""``gpumagic.roofline(points)``: timed calls on the roofline under the datasheet ceilings of their
device.

Each point is a call's achieved FLOP/s against its arithmetic intensity (``device_peaks.achieved``),
the ceilings the datasheet's (``device_peaks.table``): the numbers are device_peaks' tables and
arithmetic; the figure is drawn here, with the ``--ncu`` report's roofline (``roofline.py``), so
that the peaks know nothing of Bokeh.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..device_peaks.achieved import Achieved
from ..device_peaks.table import PRECISIONS, lookup
from ..device_peaks.view import current_device
from ..units import format_si
from .figure_page import Figure
from .roofline import calls_figure

__all__ = ["roofline"]

#: A point as the caller gives it: ``(label, Achieved)``, or ``(label, FLOP per byte, FLOP/s)`` with
#: the Achieved it came from, where there is one, last.
Point = tuple[str, Achieved] | tuple[str, float, float] | tuple[str, float, float, Achieved]

_TENSOR = {"tf32", "bf16", "fp16", "fp8", "fp4", "int8"}


def _point(item: Point) -> tuple[str, float | None, float | None, Achieved | None]:
    """(label, FLOP per byte, FLOP/s, the Achieved) of a ``(label, Achieved)`` pair or a ``(label,
    intensity, FLOP/s[, Achieved])`` tuple (for work the counting leaves out, an add's FLOP per
    element, say)."""
    rest: list[Any]  # the shapes are told apart by their length and their last item below
    label, *rest = item
    if len(rest) == 1 and isinstance(rest[0], Achieved):
        return str(label), rest[0].intensity, rest[0].flop_rate, rest[0]
    if len(rest) in (2, 3):
        achieved = rest[2] if len(rest) == 3 and isinstance(rest[2], Achieved) else None
        return str(label), rest[0], rest[1], achieved
    raise TypeError(
        f"roofline: a point is (label, Achieved) or (label, intensity, FLOP/s[, Achieved]), "
        f"not {item!r}"
    )


def roofline(
    points: Iterable[Point] | Mapping[str, Achieved],
    device: str | None = None,
    *,
    title: str | None = None,
) -> Figure:
    """The roofline of timed calls: each point a call (``(label, Achieved)``, or ``(label,
    intensity, FLOP/s[, Achieved])``; a mapping label -> Achieved too) on log-log axes, the
    datasheet ceilings of ``device`` (default: the points' device, else this CUDA device) as lines:
    the bandwidth slope, and a flat roof for fp32 and for each precision a point ran in. Shown as
    gpumagic shows its figures (BokehJS once per notebook); ``.figure`` is the Bokeh figure,
    ``save_html(path)`` a page of its own."""
    items = [_point(p) for p in (points.items() if isinstance(points, Mapping) else points)]
    name = (
        device
        or next((a.device for *_, a in items if a is not None and a.device), None)
        or current_device()
    )
    sheet = lookup(name) if name else None
    used = {"fp32"} | {
        a.precision for *_, a in items if a is not None and a.precision in PRECISIONS
    }
    roofs = {}
    if sheet is not None:
        for p in PRECISIONS:
            if p in used and sheet.peak(p):
                roofs[p + (" tensor" if p in _TENSOR else "")] = float(sheet.peak(p))  # type: ignore[arg-type]
    data: dict[str, list[Any]] = {
        k: [] for k in ("x", "y", "label", "rate_text", "ai_text", "share_text")
    }
    data.update(limiter_text=[], limiter=[])
    for label, ai, rate, a in items:
        if not (ai and rate and ai > 0 and rate > 0):
            continue  # no place on log axes: no FLOPs or no bytes counted
        data["x"].append(float(ai))
        data["y"].append(float(rate))
        data["label"].append(label)
        data["rate_text"].append(format_si(float(rate), "FLOP/s"))
        data["ai_text"].append(f"{ai:.3g} FLOP/byte")
        data["share_text"].append((a.segment() or "") if a is not None else "")
        lim = a.limiter() if a is not None else None
        data["limiter_text"].append(a.explain() if a is not None else "")
        data["limiter"].append(lim.split("-")[0] if lim else None)
    shown = sheet.name if sheet is not None else f"{name or 'this device'} (no datasheet ceilings)"
    fig = calls_figure(
        data, roofs, sheet.bandwidth if sheet is not None else None, title or f"Roofline: {shown}"
    )
    return Figure(fig, title or f"roofline: {shown}")
