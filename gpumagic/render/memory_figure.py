"""The memory timeline: allocated bytes stacked by category, reserved bytes as a line above them,
the peak marked (and the out-of-memory failure, where there was one).

Drawn from the analysis' samples (at most a few thousand, each an exact level at an entry of the
history), as steps: the level holds from one entry to the next, so a short spike reads as the spike
it was and the peak's sample sits exactly at the peak's height. Bytes are drawn in GiB or MiB,
whichever suits the peak.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.memory import CATEGORIES, MemoryAnalysis, format_bytes

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


def memory_figure(m: MemoryAnalysis, title: str | None = None) -> Any:
    """The Bokeh figure of one :class:`~gpumagic.analysis.memory.MemoryAnalysis`."""
    from bokeh.models import ColumnDataSource, HoverTool, Label, Legend, LegendItem, Span
    from bokeh.plotting import figure

    s = m.samples
    unit, per = _scale(float(max(m.peak_bytes, m.samples["reserved"].max() if len(s) else 0, 1)))
    x_label = "ms since the recording began" if m.has_times else "history entry"
    shown = [c for c in CATEGORIES if len(s) and s[c].max() > 0]
    p = figure(
        height=330,
        sizing_mode="stretch_width",
        x_axis_label=x_label,
        y_axis_label=unit,
        tools="xpan,xwheel_zoom,box_zoom,reset,save",
        active_scroll="xwheel_zoom",
        title=title,
    )
    p.toolbar.logo = None
    items = []
    if len(s):
        xs, _ = _steps(s["time_ms"].to_numpy(float), s["allocated"].to_numpy(float))
        data: dict[str, Any] = {"x": xs}
        for c in shown:
            data[c] = _steps(s["time_ms"].to_numpy(float), s[c].to_numpy(float) / per)[1]
        data["allocated"] = _steps(
            s["time_ms"].to_numpy(float), s["allocated"].to_numpy(float) / per
        )[1]
        data["reserved"] = _steps(
            s["time_ms"].to_numpy(float), s["reserved"].to_numpy(float) / per
        )[1]
        src = ColumnDataSource(data)
        if shown:
            areas = p.varea_stack(
                shown, x="x", color=[CATEGORY_COLORS[c] for c in shown], source=src, alpha=0.85
            )
            items += [LegendItem(label=c, renderers=[r]) for c, r in zip(shown, areas, strict=True)]
        res = p.line(
            "x", "reserved", source=src, color="#555555", line_width=1.5, line_dash="dashed"
        )
        alloc = p.line("x", "allocated", source=src, color="#222222", line_width=1, alpha=0.6)
        items += [
            LegendItem(label="reserved", renderers=[res]),
            LegendItem(label="allocated", renderers=[alloc]),
        ]
        tips = [("time", "@x{0,0.000}"), ("allocated", f"@allocated{{0,0.00}} {unit}")]
        tips += [("reserved", f"@reserved{{0,0.00}} {unit}")] + [
            (c, f"@{{{c}}}{{0,0.00}} {unit}") for c in shown
        ]
        p.add_tools(HoverTool(renderers=[alloc], tooltips=tips, mode="vline"))
    peak_y = m.peak_bytes / per
    top = max(peak_y, float(s["reserved"].max()) / per if len(s) else 0.0, 1e-9)
    p.add_layout(
        Span(location=m.peak_time_ms, dimension="height", line_color="#c0392b", line_dash="dotted")
    )
    p.scatter([m.peak_time_ms], [peak_y], size=9, color="#c0392b", marker="triangle")
    p.add_layout(
        Label(
            x=m.peak_time_ms,
            y=peak_y,
            text=f"peak {format_bytes(m.peak_bytes)}",
            x_offset=6,
            y_offset=4,
            text_font_size="11px",
            text_color="#c0392b",
            background_fill_color="white",
            background_fill_alpha=0.7,
        )
    )
    if m.oom:
        p.add_layout(
            Span(location=m.oom["time_ms"], dimension="height", line_color="#8e0000", line_width=2)
        )
        p.add_layout(
            Label(
                x=m.oom["time_ms"],
                y=top * 0.98,
                text=f"out of memory: {format_bytes(m.oom['bytes'])} requested",
                x_offset=-6,
                y_offset=-16,
                text_align="right",
                text_font_size="11px",
                text_color="#8e0000",
                background_fill_color="white",
                background_fill_alpha=0.7,
            )
        )
    if items:
        p.add_layout(
            Legend(
                items=items,
                orientation="horizontal",
                margin=4,
                label_text_font_size="12px",
                click_policy="hide",
            ),
            "above",
        )
    p.y_range.start = 0
    p.y_range.end = top * 1.12  # room above the highest line for the peak's label
    p.xgrid.grid_line_color = None
    return p
