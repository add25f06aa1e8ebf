"""``gpumagic.plot_history()``: the median and IQR of saved results over time, one line per
statement, label and device; a Bokeh figure embedded the way every other gpumagic figure is (BokehJS
once per notebook, offline).

The IQR band is each result's own first to third quartile, from its raw samples, so an asymmetric
spread is drawn as it was measured. Hover names the result (id, label, commit) for ``%gputime --vs
ID``.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..edges import BokehModel
from ..render.compare_plot import time_unit
from ..render.figure_page import FigurePage
from ..render.sweep_plot import PALETTE
from ..timing.stats import quantile
from ..units import format_time
from .query import select
from .rows import unpack_samples
from .store import Store, resolve_path

__all__ = ["HistoryPlot", "history_figure", "plot_history", "series_name"]

_TOOLTIP = """
<div style='max-width:min(420px,80vw);white-space:normal;font-size:12px'>
<b>@series</b><br>#@id @when<br>@text per call<br>@commit</div>
"""


def series_name(row: Mapping[str, Any]) -> str:
    """What one line of the plot follows: the label (or the statement), the statement's name in a
    run, the device."""
    name = row.get("label") or " ".join(str(row.get("statement", "")).split())
    if len(name) > 48:
        name = name[:47] + "\u2026"
    if row.get("variant") and row.get("variant") != name:
        name += f" / {row['variant']}"
    if row.get("params"):
        name += f" {row['params']}"
    return f"{name} on {row.get('device')}"


def history_figure(
    rows: Sequence[Mapping[str, Any]], title: str = "History: median and IQR per call"
) -> BokehModel:
    """A Bokeh figure: per series a line through the medians with each result's IQR as a vertical
    bar."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.models.annotations import Title
    from bokeh.models.renderers import DataRenderer
    from bokeh.plotting import figure

    factor, unit = time_unit(max((r["median"] or 0 for r in rows), default=1e-3) or 1e-3)
    p = figure(
        title=Title(text=title, text_font_size="12px"),
        x_axis_type="datetime",
        y_axis_label=f"per call [{unit}]",
        height=320,
        sizing_mode="stretch_width",
        tools="pan,wheel_zoom,box_zoom,reset,save",
    )
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(series_name(r), []).append(r)
    renderers: list[DataRenderer] = []
    for i, (name, members) in enumerate(groups.items()):
        color = PALETTE[i % len(PALETTE)]
        data: dict[str, list[Any]] = {
            k: [] for k in ("x", "y", "q1", "q3", "id", "when", "text", "commit", "series")
        }
        for r in members:
            samples = unpack_samples(r.get("samples"))
            q1, q3 = (
                (quantile(samples, q) for q in (0.25, 0.75))
                if samples
                else (r["median"], r["median"])
            )
            when = datetime.fromtimestamp(r["created"], tz=timezone.utc)
            data["x"].append(when)
            data["y"].append(r["median"] * factor)
            data["q1"].append(q1 * factor)
            data["q3"].append(q3 * factor)
            data["id"].append(r["id"])
            data["when"].append(when.strftime("%Y-%m-%d %H:%M UTC"))
            data["text"].append(f"{format_time(r['median'])} \u00b1 {format_time(r['iqr'] or 0)}")
            commit = (r.get("git_commit") or "")[:7] + ("+" if r.get("git_dirty") else "")
            data["commit"].append(f"commit {commit}" if commit else "")
            data["series"].append(name)
        source = ColumnDataSource(data)
        p.segment(
            x0="x", x1="x", y0="q1", y1="q3", source=source, color=color, line_width=3, alpha=0.45
        )
        p.line(x="x", y="y", source=source, color=color, legend_label=name)
        renderers.append(p.scatter(x="x", y="y", source=source, color=color, size=6))
    p.add_tools(HoverTool(renderers=renderers, tooltips=_TOOLTIP))
    p.legend.location = "top_left"
    p.legend.label_text_font_size = "11px"
    return p


@dataclass
class HistoryPlot(FigurePage):
    """Saved results over time: ``rows`` as the store holds them. Shows as the figure in a notebook,
    as a short text in a terminal; ``save_html(path)`` writes a page that opens offline."""

    rows: list[dict[str, Any]]
    path: str = ""

    page_title = "gpumagic: history"

    def __str__(self) -> str:
        if not self.rows:
            return f"no saved results to plot in {self.path or 'the history'}"
        series = {series_name(r) for r in self.rows}
        return f"{len(self.rows)} results in {len(series)} series from {self.path}"

    def figure(self) -> BokehModel:
        return history_figure(self.rows)

    def html(self, figure: str | None = "iframe") -> str:
        from ..render.figure_modes import figure_html

        head = f"<div style='font-weight:600;margin:4px 0'>{html.escape(str(self))}</div>"
        if not self.rows or not figure:
            return head
        return head + figure_html(self.figure(), figure, self.page_title)


def plot_history(
    label: str | None = None,
    statement: str | None = None,
    device: str | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    last: int | None = None,
) -> HistoryPlot:
    """The median and IQR of saved results over time (filters as :func:`gpumagic.history`; ``last``:
    only the latest ``last`` results)."""
    where = resolve_path(path)
    rows: list[dict[str, Any]] = []
    if where is not None and where.exists():
        with Store(where, readonly=True) as store:
            rows = select(store, label=label, statement=statement, device=device, limit=last)
    return HistoryPlot([r for r in rows if r.get("median") is not None], str(where or ""))
