"""The memory timeline: allocated bytes stacked by category, reserved bytes as a line above them,
the peak marked (and the out-of-memory failure, where there was one); below it, on the same time
axis, what the cell was doing (the analysis' ``ranges``: phase, module, annotation lanes).

Drawn from the analysis' samples (at most a few thousand, each an exact level at an entry of the
history), as steps: the level holds from one entry to the next, so a short spike reads as the spike
it was and the peak's sample sits exactly at the peak's height. Bytes are drawn in GiB or MiB,
whichever suits the peak.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import numpy as np
import pandas as pd

from ..analysis.memory import CATEGORIES, MemoryAnalysis, format_bytes
from ..edges import BokehModel

__all__ = ["CATEGORY_COLORS", "memory_figure"]

#: One colour per category, the same in the figure and the tables.
CATEGORY_COLORS = {
    "parameters": "#4e79a7",
    "optimizer state": "#b07aa1",
    "inputs": "#76b7b2",
    "activations": "#f28e2b",
    "gradients": "#59a14f",
    "temporaries": "#edc948",
    "unknown": "#bab0ac",
}


def _scale(peak: float) -> tuple[str, float]:
    return ("GiB", 2.0**30) if peak >= 2**30 else ("MiB", 2.0**20)


def _steps(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step points: each level held until the next sample's time."""
    if len(x) < 2:
        return x, y
    xs = np.repeat(x, 2)[1:]
    ys = np.repeat(y, 2)[:-1]
    return xs, ys


#: Range colours by lane, and a darker one for the range holding the peak.
LANE_COLORS = {"phase": "#9fb7d1", "module": "#c9b6d6", "annotation": "#d9c89e"}
AT_PEAK = "#e39a8f"
#: A label of 12 characters is written on a bar this share of the time axis wide (longer ones
#: need proportionally more).
LABEL_SHARE = 0.06


def _short(label: str, lane: str) -> str:
    """A module's name without its root (``blocks.3`` for ``model.blocks.3``) on the bar."""
    if lane != "module" or "." not in label.split(" ", 1)[0]:
        return label
    return label.split(".", 1)[1]


def ranges_figure(m: MemoryAnalysis, x_range: BokehModel) -> BokehModel | None:
    """The lanes of ``m.ranges`` (one row each) on ``x_range``; None when there are none."""
    from bokeh.models import ColumnDataSource, FactorRange, HoverTool
    from bokeh.plotting import figure

    r = m.ranges
    if r is None or r.empty:
        return None
    lanes = [lane for lane in ("phase", "module", "annotation") if (r["lane"] == lane).any()]
    at_peak = (r["start_ms"] <= m.peak_time_ms) & (m.peak_time_ms <= r["end_ms"])
    width = (r["end_ms"] - r["start_ms"]).to_numpy(float)
    span = max(float(r["end_ms"].max() - r["start_ms"].min()), 1e-9)
    src = ColumnDataSource(
        {
            "lane": r["lane"].tolist(),
            "label": r["label"].tolist(),
            # written on the bar where it fits at the first zoom; the hover names every range
            "text": [
                _short(lab, lane) if w >= LABEL_SHARE * len(_short(lab, lane)) / 12 * span else ""
                for lab, lane, w in zip(r["label"], r["lane"], width, strict=True)
            ],
            "start": r["start_ms"].to_numpy(float),
            "end": r["end_ms"].to_numpy(float),
            "mid": ((r["start_ms"] + r["end_ms"]) / 2).to_numpy(float),
            "color": [
                AT_PEAK if hit else LANE_COLORS.get(lane, "#cccccc")
                for lane, hit in zip(r["lane"], at_peak, strict=True)
            ],
        }
    )
    p = figure(
        height=40 + 26 * len(lanes),
        sizing_mode="stretch_width",
        x_range=x_range,
        y_range=FactorRange(factors=list(reversed(lanes))),
        tools="xpan,xwheel_zoom,reset",
        active_scroll="xwheel_zoom",
    )
    p.toolbar.logo = None
    bars = p.hbar(
        y="lane",
        left="start",
        right="end",
        height=0.8,
        color="color",
        line_color="white",
        source=src,
    )
    p.text(
        x="mid",
        y="lane",
        text="text",
        source=src,
        text_align="center",
        text_baseline="middle",
        text_font_size="10px",
        text_color="#222222",
    )
    p.add_tools(
        HoverTool(
            renderers=[bars],
            tooltips=[("", "@label"), ("from", "@start{0,0.000} ms"), ("to", "@end{0,0.000} ms")],
        )
    )
    p.xgrid.grid_line_color = None
    p.ygrid.grid_line_color = None
    p.xaxis.visible = False
    return p


def memory_figure(m: MemoryAnalysis, title: str | None = None) -> BokehModel:
    """The Bokeh figure of one :class:`~gpumagic.analysis.memory.MemoryAnalysis`: the memory
    over time, with the ranges' lanes below it on the same axis where the analysis has any."""
    p = _memory_plot(m, title)
    lanes = ranges_figure(m, p.x_range)
    if lanes is None:
        return p
    from bokeh.layouts import column

    # the page sizes its frame from the layout's height
    return column(p, lanes, sizing_mode="stretch_width", height=p.height + lanes.height)


def _memory_plot(m: MemoryAnalysis, title: str | None) -> BokehModel:
    """The memory over time: the levels (:func:`_draw_levels`), the peak and the failure marked, the
    legend above, and the y axis from 0 with room over the highest line for the peak's label."""
    from bokeh.models import DataRange1d
    from bokeh.models.annotations import Legend
    from bokeh.plotting import figure

    s = m.samples
    unit, per = _scale(float(max(m.peak_bytes, m.samples["reserved"].max() if len(s) else 0, 1)))
    p = figure(
        height=330,
        sizing_mode="stretch_width",
        x_axis_label="ms since the recording began" if m.has_times else "history entry",
        y_axis_label=unit,
        tools="xpan,xwheel_zoom,box_zoom,reset,save",
        active_scroll="xwheel_zoom",
        title=title,
    )
    p.toolbar.logo = None
    items = _draw_levels(p, s, unit, per) if len(s) else []
    peak_y = m.peak_bytes / per
    top = max(peak_y, float(s["reserved"].max()) / per if len(s) else 0.0, 1e-9)
    _mark_peak(p, m, peak_y)
    if m.oom:
        _mark_oom(p, m.oom, top)
    if items:
        legend = Legend(
            items=items,
            orientation="horizontal",
            margin=4,
            label_text_font_size="12px",
            click_policy="hide",
        )
        p.add_layout(legend, "above")
    y_range = cast(DataRange1d, p.y_range)
    y_range.start = 0
    y_range.end = top * 1.12  # room above the highest line for the peak's label
    p.xgrid.grid_line_color = None
    return p


def _draw_levels(p: BokehModel, s: pd.DataFrame, unit: str, per: float) -> list[Any]:
    """The categories stacked (those that hold anything), reserved dashed above them, allocated as
    a line, all as steps, with a hover that reads every level at a time; returns the legend's
    items."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.models.annotations import LegendItem

    shown = [c for c in CATEGORIES if s[c].max() > 0]
    times = s["time_ms"].to_numpy(float)
    data: dict[str, Any] = {"x": _steps(times, s["allocated"].to_numpy(float))[0]}
    for c in [*shown, "allocated", "reserved"]:
        data[c] = _steps(times, s[c].to_numpy(float) / per)[1]
    src = ColumnDataSource(data)
    items = []
    if shown:
        colors = [CATEGORY_COLORS[c] for c in shown]
        areas = p.varea_stack(shown, x="x", color=colors, source=src, alpha=0.85)
        items += [LegendItem(label=c, renderers=[r]) for c, r in zip(shown, areas, strict=True)]
    res = p.line("x", "reserved", source=src, color="#555555", line_width=1.5, line_dash="dashed")
    alloc = p.line("x", "allocated", source=src, color="#222222", line_width=1, alpha=0.6)
    items += [
        LegendItem(label="reserved", renderers=[res]),
        LegendItem(label="allocated", renderers=[alloc]),
    ]
    tips = [("time", "@x{0,0.000}"), ("allocated", f"@allocated{{0,0.00}} {unit}")]
    tips += [("reserved", f"@reserved{{0,0.00}} {unit}")]
    tips += [(c, f"@{{{c}}}{{0,0.00}} {unit}") for c in shown]
    p.add_tools(HoverTool(renderers=[alloc], tooltips=tips, mode="vline"))
    return items


#: How a mark's label looks (the peak's, the failure's): small, on a light backing over the curves.
_MARK_LABEL: dict[str, Any] = {
    "text_font_size": "11px",
    "background_fill_color": "white",
    "background_fill_alpha": 0.7,
}


def _mark_peak(p: BokehModel, m: MemoryAnalysis, peak_y: float) -> None:
    """The peak: a dotted line at its time, a triangle at its height, its bytes beside it."""
    from bokeh.models.annotations import Label, Span

    p.add_layout(
        Span(location=m.peak_time_ms, dimension="height", line_color="#c0392b", line_dash="dotted")
    )
    p.scatter([m.peak_time_ms], [peak_y], size=9, color="#c0392b", marker="triangle")
    text = f"peak {format_bytes(m.peak_bytes)}"
    p.add_layout(
        Label(
            x=m.peak_time_ms,
            y=peak_y,
            text=text,
            x_offset=6,
            y_offset=4,
            text_color="#c0392b",
            **_MARK_LABEL,
        )
    )


def _mark_oom(p: BokehModel, oom: Mapping[str, Any], top: float) -> None:
    """The out-of-memory failure: a line at its time and the request's bytes near the top."""
    from bokeh.models.annotations import Label, Span

    p.add_layout(
        Span(location=oom["time_ms"], dimension="height", line_color="#8e0000", line_width=2)
    )
    p.add_layout(
        Label(
            x=oom["time_ms"],
            y=top * 0.98,
            text=f"out of memory: {format_bytes(oom['bytes'])} requested",
            x_offset=-6,
            y_offset=-16,
            text_align="right",
            text_color="#8e0000",
            **_MARK_LABEL,
        )
    )
