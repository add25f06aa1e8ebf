"""One horizontal bar chart with a label at each bar's end: the figure under ``--compare``'s table
and ``gpumagic.diff``'s waterfall. Each caller gives its bars' data; the frame, the end labels, the
hover and the look are set here once, so the two charts read alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["bar_chart"]


def bar_chart(
    data: Mapping[str, Sequence[Any]],
    *,
    title: str,
    x_label: str,
    tooltip: str,
    sizes: tuple[int, int],
    label_room: float,
    left: str | None = None,
    right: str = "right",
    label_at: str | None = None,
) -> tuple[Any, Any]:
    """A Bokeh figure of one bar per ``data["label"]`` (top to bottom in order), from the column
    ``left`` (0 where None) to the column ``right``, coloured by ``data["color"]``, with
    ``data["end"]`` written after the column ``label_at`` (default: ``right``). The axis runs
    from 0 to ``label_room`` times the furthest label's place, so every end label fits;
    ``sizes``: the frame's pixels and each bar's. Returns (figure, the bars' renderer) for marks a
    caller adds."""
    from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Range1d
    from bokeh.models.annotations import LabelSet, Title
    from bokeh.plotting import figure

    labels = list(data["label"])
    furthest = max(max(data[label_at or right], default=1.0), 1e-9)
    frame_px, bar_px = sizes
    p = figure(
        title=Title(text=title, text_font_size="12px"),
        y_range=FactorRange(factors=list(reversed(labels))),
        x_range=Range1d(start=0, end=furthest * label_room),
        x_axis_label=x_label,
        height=frame_px + bar_px * len(labels),
        sizing_mode="stretch_width",
        tools="save",
        toolbar_location=None,
    )
    source = ColumnDataSource(dict(data))
    span = {"left": left} if left else {}
    bars = p.hbar(
        y="label", right=right, height=0.7, color="color", source=source, name="bars", **span
    )
    p.add_layout(
        LabelSet(
            x=label_at or right,
            y="label",
            text="end",
            source=source,
            x_offset=4,
            y_offset=-7,
            text_font_size="11px",
        )
    )
    p.add_tools(HoverTool(renderers=[bars], tooltips=tooltip))
    p.ygrid.grid_line_color = None
    return p, bars
