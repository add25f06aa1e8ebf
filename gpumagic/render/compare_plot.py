"""The Bokeh bar chart of a comparison: one horizontal bar per statement (its median per call), the
baseline marked.

Compact on purpose (about 30 px a statement): the table above it carries the figures; the chart
makes the ratios visible at a glance. Each bar ends in its speed-up; the hover gives the exact
figures. No torch import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BAR_COLOR", "BASELINE_COLOR", "compare_figure", "time_unit"]

BAR_COLOR = "#1f77b4"
BASELINE_COLOR = "#7f7f7f"
_TOOLTIP = """
<div style='max-width:min(420px,80vw);white-space:normal;font-size:12px'>
<b>@label</b>@mark<br>@text per call<br>@rate<br>speed-up @speedup</div>
"""


def time_unit(seconds: float) -> tuple[float, str]:
    """(factor, unit) that puts ``seconds`` between 1 and 1000: time_unit(3e-3) -> (1e3, 'ms')."""
    for factor, unit in ((1.0, "s"), (1e3, "ms"), (1e6, "\xb5s")):
        if seconds * factor >= 1:
            return factor, unit
    return 1e9, "ns"


def compare_figure(bars: Sequence[Mapping[str, Any]], title: str = "Median per call") -> Any:
    """A Bokeh figure: one bar per entry of ``bars`` (keys: label, median in seconds, text, speedup,
    rate, baseline), top to bottom in their order; the baseline grey, with a dashed line at its
    median."""
    from bokeh.models import ColumnDataSource, HoverTool, LabelSet, Span
    from bokeh.plotting import figure

    factor, unit = time_unit(max((b["median"] for b in bars), default=1e-3))
    labels = [str(b["label"]) for b in bars]
    data = {
        "label": labels,
        "value": [b["median"] * factor for b in bars],
        "text": [b["text"] for b in bars],
        "speedup": [b["speedup"] for b in bars],
        "rate": [b.get("rate", "") for b in bars],
        "mark": [" (baseline)" if b.get("baseline") else "" for b in bars],
        "color": [BASELINE_COLOR if b.get("baseline") else BAR_COLOR for b in bars],
        "end": [b["speedup"].replace(" (baseline)", "") for b in bars],
    }
    top = max(data["value"], default=1.0)
    p = figure(
        title=title,
        y_range=list(reversed(labels)),
        x_range=(0, top * 1.25),
        x_axis_label=f"median per call [{unit}]",
        height=60 + 30 * len(bars),
        sizing_mode="stretch_width",
        tools="save",
        toolbar_location=None,
    )
    source = ColumnDataSource(data)
    glyphs = p.hbar(y="label", right="value", height=0.7, source=source, color="color", name="bars")
    p.add_layout(
        LabelSet(
            x="value",
            y="label",
            text="end",
            source=source,
            x_offset=4,
            y_offset=-7,
            text_font_size="11px",
        )
    )
    for b, value in zip(bars, data["value"]):
        if b.get("baseline"):
            p.add_layout(
                Span(
                    location=value,
                    dimension="height",
                    line_color=BASELINE_COLOR,
                    line_dash="dashed",
                )
            )
    p.add_tools(HoverTool(renderers=[glyphs], tooltips=_TOOLTIP))
    p.ygrid.grid_line_color = None
    p.title.text_font_size = "12px"
    return p
