"""The memory timeline: allocated bytes stacked by category, reserved bytes as a line above them,
the peak marked (and the out-of-memory failure, where there was one); below it, on the same time
axis, what the cell was doing (the analysis' ``ranges``: phase, module, annotation lanes).

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


def ranges_figure(m: MemoryAnalysis, x_range: Any) -> Any:
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
        y_range=FactorRange(*reversed(lanes)),
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


def memory_figure(m: MemoryAnalysis, title: str | None = None) -> Any:
    """The Bokeh figure of one :class:`~gpumagic.analysis.memory.MemoryAnalysis`: the memory
    over time, with the ranges' lanes below it on the same axis where the analysis has any."""
    p = _memory_plot(m, title)
    lanes = ranges_figure(m, p.x_range)
    if lanes is None:
        return p
    from bokeh.layouts import column

    # the page sizes its frame from the layout's height
    return column(p, lanes, sizing_mode="stretch_width", height=p.height + lanes.height)


def _memory_plot(m: MemoryAnalysis, title: str | None) -> Any:
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
