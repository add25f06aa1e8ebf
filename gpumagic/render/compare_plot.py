"""The Bokeh bar chart of a comparison: one horizontal bar per statement (its median per call), the
baseline marked.

Compact on purpose (about 30 px a statement): the table above it carries the figures; the chart
makes the ratios visible at a glance. Each bar ends in its speed-up; the hover gives the exact
figures. No torch import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..edges import BokehModel

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


def compare_figure(bars: Sequence[Mapping[str, Any]], title: str = "Median per call") -> BokehModel:
    """A Bokeh figure: one bar per entry of ``bars`` (keys: label, median in seconds, text, speedup,
    rate, baseline), top to bottom in their order; the baseline grey, with a dashed line at its
    median."""
    from bokeh.models.annotations import Span

    from .bar_chart import bar_chart

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
    p, _ = bar_chart(
        data,
        title=title,
        x_label=f"median per call [{unit}]",
        tooltip=_TOOLTIP,
        sizes=(60, 30),
        label_room=1.25,
        right="value",
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
    return p
