"""The frame of an x-y plot to explore: the sweep plot's and the rooflines'. One place, so that they
stretch to the page, zoom and pan, and keep their toolbar above the plot alike.
"""

from __future__ import annotations

from ..edges import BokehModel

__all__ = ["EXPLORE_TOOLS", "xy_figure"]

#: Pan, zoom (the wheel or a box), reset and save: what a plot of points to explore offers.
EXPLORE_TOOLS = "pan,wheel_zoom,box_zoom,reset,save"


def xy_figure(
    *,
    title: str,
    x_label: str,
    y_label: str,
    height: int,
    log_x: bool = False,
    log_y: bool = False,
    x_range: BokehModel | None = None,
    y_range: BokehModel | None = None,
) -> BokehModel:
    """An empty Bokeh figure of ``height`` px, as wide as the page, with :data:`EXPLORE_TOOLS`
    above it; log axes where asked; ``x_range``/``y_range``: Bokeh ranges (None: from the data)."""
    from bokeh.plotting import figure

    ranges = {"x_range": x_range, "y_range": y_range}
    return figure(
        title=title,
        x_axis_type="log" if log_x else "linear",
        y_axis_type="log" if log_y else "linear",
        x_axis_label=x_label,
        y_axis_label=y_label,
        height=height,
        sizing_mode="stretch_width",
        tools=EXPLORE_TOOLS,
        toolbar_location="above",
        **{k: v for k, v in ranges.items() if v is not None},
    )
