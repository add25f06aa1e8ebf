"""The Bokeh plot of a sweep: a rate (or the time per call) against a parameter, one line per
statement, the device's peak as a dashed line. No torch import: it draws the plain values
:meth:`gpumagic.timing.sweep_result.Sweep.plot_data` gives it.

Axes are logarithmic where the parameter grows geometrically (256, 512, 1024, ...: the ratio of
consecutive values roughly constant and above 1.5), since such a sweep spaces its points evenly on a
log axis and crowds them into the left edge of a linear one; the y axis follows when its values then
span more than a decade.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..edges import BokehModel
from .compare_plot import time_unit
from .xy_figure import xy_figure

__all__ = ["PALETTE", "geometric", "rate_scale", "sweep_figure"]

PALETTE = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
]
_PEAK_COLORS = ["#444444", "#8c564b", "#2ca02c"]
#: Consecutive ratios above this, within this factor of each other, make a geometric sequence.
MIN_RATIO = 1.5
RATIO_SPREAD = 1.5
#: A geometric x axis is ticked at its own values where there are at most this many, spanning at
#: most this factor (beyond it, the powers of ten a log axis labels read better than a row of long
#: numbers).
MAX_TICKED = 12
TICKED_SPAN = 10**4.5
_TOOLTIP = """
<div style='max-width:min(420px,80vw);white-space:normal;font-size:12px'>
<b>@series</b><br>@params<br>@median per call<br>@rate</div>
"""


def geometric(values: Sequence[Any]) -> bool:
    """Whether sorted distinct positive numbers grow by a roughly constant ratio above 1.5 (at least
    3 of them)."""
    try:
        xs = sorted({float(v) for v in values})
    except (TypeError, ValueError):
        return False
    if len(xs) < 3 or xs[0] <= 0:
        return False
    ratios = [b / a for a, b in itertools.pairwise(xs)]
    return min(ratios) > MIN_RATIO and max(ratios) / min(ratios) <= RATIO_SPREAD


def rate_scale(top: float, unit: str) -> tuple[float, str]:
    """(divisor, label) that puts a rate up to ``top`` in readable units: 'TFLOP/s' from 1e12,
    'GB/s' for bytes."""
    if unit == "B/s":
        return (1e12, "TB/s") if top >= 1e14 else (1e9, "GB/s") if top >= 1e8 else (1e6, "MB/s")
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if top >= scale:
            return scale, f"{prefix}{unit}"
    return 1.0, unit


def _axis(metric: str, ys: Sequence[float]) -> tuple[float, str]:
    """(what to multiply a value by, the y axis label)."""
    top = max(ys, default=1.0)
    if metric == "flop":
        div, label = rate_scale(top, "FLOP/s")
        return 1 / div, label
    if metric == "byte":
        div, label = rate_scale(top, "B/s")
        return 1 / div, label
    factor, unit = time_unit(min(ys, default=1e-3))
    return factor, f"time per call [{unit}]"


@dataclass
class _Axes:
    """How a sweep's values are placed: the x values (of every series and the failed points),
    whether they are names (categorical), the y scale (``factor``) and label, and which axes are
    logarithmic. ``scaled``: the positive y values as drawn."""

    xs: list[Any]
    categorical: bool
    factor: float
    y_label: str
    log_x: bool
    log_y: bool
    scaled: list[float]

    def x(self, values: Sequence[Any]) -> list[Any]:
        """``values`` as the x axis takes them: names for a categorical axis."""
        return [str(v) for v in values] if self.categorical else list(values)


def sweep_figure(
    series: Mapping[str, Mapping[str, Sequence[Any]]],
    failed: Mapping[str, Sequence[Any]] | None = None,
    peaks: Mapping[float, str] | None = None,
    metric: str = "time",
    x: str = "",
    title: str = "Sweep",
) -> BokehModel:
    """A Bokeh figure: one line per entry of ``series`` (name -> x, y and the hover texts params,
    median, rate), ``peaks`` (value in the metric's own unit per second -> its name) as dashed
    lines, ``failed`` points (x, label, error) as crosses along the bottom. ``metric``: "flop",
    "byte" or "time" (y values in seconds)."""
    from bokeh.models import FactorRange, HoverTool

    failed = failed or {"x": [], "label": [], "error": []}
    axes = _axes(series, failed, metric)
    factors = list(dict.fromkeys(str(v) for v in axes.xs))
    p = xy_figure(
        title=title,
        x_label=x,
        y_label=axes.y_label,
        height=360,
        log_x=axes.log_x,
        log_y=axes.log_y,
        x_range=FactorRange(factors=factors) if axes.categorical else None,
    )
    hovered = _draw_series(p, series, axes)
    x_ends = _ends(axes.xs, axes.categorical)
    if metric != "time" and x_ends:
        _draw_peaks(p, dict(peaks or {}), axes, x_ends)
    if failed["x"]:
        hovered.append(_draw_failed(p, failed, axes))
    if axes.log_x:
        _tick_at_values(p, axes.xs)
    p.add_tools(HoverTool(renderers=hovered, tooltips=_TOOLTIP))
    if p.legend:
        # beside the plot, not in it: rising curves and the peaks dashed across the width leave no
        # corner free
        p.add_layout(p.legend[0], "right")
        p.legend.click_policy = "hide"
        p.legend.label_text_font_size = "11px"
    return p


def _axes(
    series: Mapping[str, Mapping[str, Sequence[Any]]],
    failed: Mapping[str, Sequence[Any]],
    metric: str,
) -> _Axes:
    """The axes of a sweep (the module's docstring says when they are logarithmic)."""
    xs = [v for s in series.values() for v in s["x"]] + list(failed["x"])
    categorical = any(isinstance(v, str) for v in xs)
    ys = [float(v) for s in series.values() for v in s["y"] if v is not None and v > 0]
    factor, y_label = _axis(metric, ys)
    log_x = not categorical and geometric(xs)
    scaled = [v * factor for v in ys]
    log_y = log_x and bool(scaled) and max(scaled) > 10 * min(scaled)
    return _Axes(xs, categorical, factor, y_label, log_x, log_y, scaled)


def _draw_series(
    p: BokehModel, series: Mapping[str, Mapping[str, Sequence[Any]]], axes: _Axes
) -> list[Any]:
    """One line and its points per series, a colour each; returns the points (what the hover
    reads)."""
    from bokeh.models import ColumnDataSource

    hovered = []
    for i, (name, s) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        data = {
            "x": axes.x(s["x"]),
            "y": [v * axes.factor if v is not None else float("nan") for v in s["y"]],
            "series": [name] * len(s["x"]),
            "params": list(s["params"]),
            "median": list(s["median"]),
            "rate": list(s["rate"]),
        }
        source = ColumnDataSource(data)
        p.line(
            "x",
            "y",
            source=source,
            line_color=color,
            line_width=2,
            legend_label=name,
            name="series",
        )
        hovered.append(p.scatter("x", "y", source=source, size=7, color=color, legend_label=name))
    return hovered


def _draw_peaks(
    p: BokehModel, peaks: Mapping[float, str], axes: _Axes, x_ends: tuple[Any, Any]
) -> None:
    """Each peak as a dashed line across the plot, highest first, named with its value."""
    for i, (value, label) in enumerate(sorted(peaks.items(), reverse=True)):
        shown = f"{label} {value * axes.factor:.3g} {axes.y_label}"
        p.line(
            list(x_ends),
            [value * axes.factor] * 2,
            line_dash="dashed",
            line_width=1.5,
            line_color=_PEAK_COLORS[i % len(_PEAK_COLORS)],
            legend_label=shown,
            name="peak",
        )


def _draw_failed(p: BokehModel, failed: Mapping[str, Sequence[Any]], axes: _Axes) -> BokehModel:
    """The points that failed, as crosses along the bottom of the plot, their error in the hover."""
    from bokeh.models import ColumnDataSource

    n = len(failed["x"])
    source = ColumnDataSource(
        {
            "x": axes.x(failed["x"]),
            "y": [min(axes.scaled) if axes.scaled else 1.0] * n,
            "series": list(failed["label"]),
            "params": list(failed["error"]),
            "median": ["\u2014"] * n,
            "rate": ["not measured"] * n,
        }
    )
    crosses = p.scatter(
        "x", "y", source=source, marker="x", size=12, color="#b22222", legend_label="failed"
    )
    crosses.name = "failed"
    return crosses


def _tick_at_values(p: BokehModel, xs: Sequence[Any]) -> None:
    """Ticks at the swept values themselves (256, 512, 1024, ...) where they are few and span under
    :data:`TICKED_SPAN`: a log axis otherwise labels 1000, 2000, ... 9000, none of them a size that
    was run."""
    from bokeh.models import FixedTicker

    values = sorted({float(v) for v in xs})
    if len(values) <= MAX_TICKED and values[-1] / values[0] <= TICKED_SPAN:
        p.xaxis.ticker = FixedTicker(ticks=values, minor_ticks=[])
        p.xaxis.major_label_overrides = {
            v: str(int(v)) if v.is_integer() and v < 1e6 else f"{v:.3g}" for v in values
        }


def _ends(xs: Sequence[Any], categorical: bool) -> tuple[Any, Any] | None:
    """The first and last x of the plot, for a line across it."""
    if not xs:
        return None
    if categorical:
        names = list(dict.fromkeys(str(v) for v in xs))
        return names[0], names[-1]
    return min(xs), max(xs)
