"""The Bokeh timeline: one lane per NVTX/range thread, CPU thread (torch ops), CUDA API thread and
GPU stream.

Large traces stay usable and the output small: beyond ``max_glyphs_per_lane`` events, a lane's
events are merged into time buckets (each box says how many events it holds), and WebGL draws when
there are many glyphs. Raw events never reach the browser (Chrome and Perfetto fail on trace JSON
over about 1 GB).

The lanes themselves (which events make which lane, the buckets) are ``timeline_lanes.py``'s; the
figure is made here; how it reaches a page (BokehJS once per notebook, or a standalone page) is
``embed.py``'s.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.ranks import is_multi
from ..edges import BokehModel
from ..trace import Trace
from ..units import format_time
from . import counter_lanes, rank_timeline
from .family_colors import FAMILY_COLORS, FAMILY_LABELS
from .options import ReportOptions
from .ranks_view import featured_ranks, many_ranks
from .timeline_lanes import Lane, bucket, lane_groups

__all__ = ["FAMILY_COLORS", "FAMILY_LABELS", "time_unit", "timeline_figure"]

_LANE_COLORS = {"nvtx": "#c5b0d5", "ops": "#aec7e8", "api": "#ffbb78"}
_QUAD: dict[str, Any] = {
    "left": "left",
    "right": "right",
    "top": "top",
    "bottom": "bottom",
    "fill_alpha": 0.85,
    "muted_alpha": 0.12,
}
_LEGEND: dict[str, Any] = {
    "orientation": "horizontal",
    "click_policy": "mute",
    "location": "top_left",
    "spacing": 14,
    "padding": 4,
}
_LEGEND |= {"margin": 4, "label_text_font_size": "12px", "glyph_width": 14, "glyph_height": 12}
# Pixels: rows of lanes, and what the figure adds around them (title, x axis, legend rows).
_ROW_PX = 28
_FRAME_EXTRA_PX = 86
_LEGEND_ROW_PX = 24
_LEGEND_WIDTH_PX = 760  # what a legend row may take: a notebook's output area is 900-1000 px wide
# The hover box: long kernel names wrap inside it instead of running off the page.
_TOOLTIP = (
    "<div "
    "style='max-width:min(560px,80vw);white-space:normal;overflow-wrap:anywhere;font-size:12px'>"
    "<div><b>@name</b></div>"
    "<div style='color:#555;font-family:monospace;font-size:11px'>@raw</div>"
    "<div>@dur &middot; @extra</div>"
    "<div style='color:#555'>@count event(s)</div></div>"
)


def time_unit(span_ns: float) -> tuple[str, float]:
    """The unit the x axis reads best in for a span: (name, ns per unit). A 30 s capture in s, 3 ms
    in ms."""
    if span_ns >= 2e9:
        return "s", 1e9
    if span_ns >= 2e6:
        return "ms", 1e6
    return "\u00b5s", 1e3


def _rows(
    trace: Trace, max_glyphs_per_lane: int, shown: Collection[str] | None = None
) -> tuple[pd.DataFrame, list[float], dict[float, str], float, list[tuple[float, float]]]:
    """Every box to draw (times in ns from the capture start; ``rank``: its group's name), the
    lanes' tick positions and labels, the depth of the lowest lane, and the (top, bottom) of each
    group of lanes when there are several (one per rank). ``shown``: many ranks, these groups placed
    first (:mod:`.rank_timeline`)."""
    return _stacked(trace, max_glyphs_per_lane, shown)[:5]


def _stacked(
    trace: Trace, max_glyphs_per_lane: int, shown: Collection[str] | None
) -> tuple[Any, ...]:
    """:func:`_rows`, and the groups' names in the order they are stacked."""
    t0, _ = trace.window()
    parts: list[pd.DataFrame] = []
    ticks: list[float] = []
    labels: dict[float, str] = {}
    y = 0.0
    groups = lane_groups(trace)
    if shown is not None:
        groups, limits = rank_timeline.shown_first(groups, shown, max_glyphs_per_lane)
    else:  # the glyph budget is the figure's, not each rank's: N ranks draw as much as one
        limit = (
            max(100, max_glyphs_per_lane // len(groups)) if len(groups) > 1 else max_glyphs_per_lane
        )
        limits = [limit] * len(groups)
    # between groups of lanes: halfway from one group's lowest box to the next group's top
    bounds = [0.3]
    for gi, ((name, group), limit) in enumerate(zip(groups, limits)):
        if gi:
            y -= 0.3  # a gap between ranks
        n = len(parts)
        y = _add_lanes(group, t0, limit, parts, ticks, labels, y)
        parts[n:] = [part.assign(rank=name) for part in parts[n:]]
        bounds.append(y + 0.15)
    rows = (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["t_start", "t_end", "group"])
    )
    bands = list(pairwise(bounds)) if len(groups) > 1 else []
    return rows, ticks, labels, y, bands, [name for name, _ in groups]


def _add_lanes(
    group: list[tuple[str, str, Lane]],
    t0: int,
    max_glyphs_per_lane: int,
    parts: list[pd.DataFrame],
    ticks: list[float],
    labels: dict[float, str],
    y: float,
) -> float:
    """The boxes of one group of lanes into ``parts``, from ``y`` down; returns the y below them."""
    for label, kind, lane in group:
        idx, start, end, count = bucket(lane, max_glyphs_per_lane)
        ev = lane.describe(idx)
        many = count > 1
        if many.any():
            ev.loc[many, "name"] = [
                f"{c} events, longest: {n}" for c, n in zip(count[many], ev["name"][many])
            ]
        depth = lane.depth[idx].astype(float)
        depth_rows = int(depth.max()) + 1 if len(idx) else 1
        top = y - depth * 0.8
        fam = ev["family"].astype(str)
        family = fam.where(fam.isin(FAMILY_LABELS), kind if kind != "gpu" else "other")
        end = np.maximum(end, start + 1)
        parts.append(
            pd.DataFrame(
                {
                    "t_start": start - t0,
                    "t_end": end - t0,
                    "top": top,
                    "bottom": top - 0.7,
                    "name": ev["name"].astype(str).to_numpy(),
                    "raw": ev["raw"].astype(str).str.slice(0, 240).to_numpy(),
                    "dur": [format_time(x * 1e-9) for x in (end - start).tolist()],
                    "extra": ev["extra"].astype(str).to_numpy(),
                    "count": count,
                    "group": family.to_numpy(),
                }
            )
        )
        center = y - 0.35 - (depth_rows - 1) * 0.4
        ticks.append(center)
        labels[center] = label
        y = y - depth_rows * 0.8 - 0.5
    return y


def _legend_cols(labels: list[str]) -> int:
    """As many legend entries per row as fit in _LEGEND_WIDTH_PX (swatch, gap and ~7 px per
    character)."""
    used, n = 0, 0
    for label in labels:
        used += 14 + 6 + 7 * len(label) + 14
        if used > _LEGEND_WIDTH_PX and n:
            break
        n += 1
    return max(1, n)


def _groups_in_order(groups: pd.Series) -> list[str]:
    """Legend order: host lanes first, then kernel families by their place in FAMILY_LABELS."""
    present = set(groups)
    return [g for g in ["nvtx", "ops", "api", *FAMILY_COLORS] if g in present]


def timeline_figure(
    trace: Trace,
    max_glyphs_per_lane: int = ReportOptions.max_glyphs_per_lane,
    title: str | None = None,
    featured: Mapping[str, str] | None = None,
) -> BokehModel:
    """The figure; its ``height`` is the whole plot's (title, legend and axis included): what a page
    must give it. Past :data:`~.options.MANY_RANKS` ranks, the ``featured`` ranks' lanes (role ->
    label; by default the straggler's and the fastest rank's) shown, the others' a click away in a
    legend of ranks (:mod:`.rank_timeline`)."""
    if featured is None:
        featured = featured_ranks(trace) if is_multi(trace) and many_ranks(trace) else {}
    shown = list(featured.values()) or None
    rows, ticks, labels, y, bands, names = _stacked(trace, max_glyphs_per_lane, shown)
    # --counters: the sampled metrics under the lanes (one process, one GPU's view)
    metric_lanes, y = (
        counter_lanes.plan_lanes(trace, trace.window()[0], y) if not bands else ([], y)
    )
    span = float(rows["t_end"].max() - rows["t_start"].min()) if len(rows) else 0.0
    unit, per = time_unit(span)
    groups = _groups_in_order(rows["group"]) if len(rows) else []
    legend_cols = _legend_cols([FAMILY_LABELS.get(g, g) for g in groups])
    lowest = bands[len(shown) - 1][1] if shown else y  # many ranks: the shown ones stacked first
    p, extra_px = _frame(rows, len(groups), legend_cols, lowest, unit, title)
    by_rank = _draw_families(p, rows, groups, shown, per, legend_cols)
    if not shown:
        _rank_bands(p, bands)
    more_ticks, more_labels = counter_lanes.draw_lanes(p, metric_lanes, per)
    p.yaxis.ticker = [*ticks, *more_ticks]
    p.yaxis.major_label_overrides = {float(k): v for k, v in {**labels, **more_labels}.items()}
    p.ygrid.grid_line_color = None
    p.toolbar.logo = None
    if not shown:
        return p
    return rank_timeline.rank_legend(p, names, bands, by_rank, featured, (_ROW_PX, extra_px))


def _frame(
    rows: pd.DataFrame, n_groups: int, legend_cols: int, lowest: float, unit: str, title: str | None
) -> tuple[Any, int]:
    """The empty plot, as tall as its lanes (down to ``lowest``, within 4 rows and 900 px) and what
    it adds around them: the title, the x axis and the legend's rows; WebGL past 5000 boxes. Returns
    it and those added pixels."""
    from bokeh.plotting import figure

    legend_rows = -(-n_groups // legend_cols) if n_groups else 0
    extra_px = _FRAME_EXTRA_PX + (20 if title else 0) + legend_rows * _LEGEND_ROW_PX
    p = figure(
        height=int(max(4 * _ROW_PX, min(900, (-lowest) * _ROW_PX))) + extra_px,
        sizing_mode="stretch_width",
        x_axis_label=f"{unit} since capture start",
        tools="xpan,xwheel_zoom,box_zoom,reset,save",
        active_scroll="xwheel_zoom",
        title=title,
        output_backend="webgl" if len(rows) > 5000 else "canvas",
    )
    return p, extra_px


def _draw_families(
    p: BokehModel,
    rows: pd.DataFrame,
    groups: list[str],
    shown: list[str] | None,
    per: float,
    legend_cols: int,
) -> dict[str | None, list[Any]]:
    """The boxes, one renderer per family (many ranks: per family and rank), with the hover and the
    legend of families; returns each rank's renderers (None: the one rank)."""
    from bokeh.models import HoverTool
    from bokeh.models.annotations import Legend, LegendItem

    renderers, items = [], []
    by_rank: dict[str | None, list[Any]] = {}
    for g in groups:
        sel = rows[rows["group"] == g]
        color = FAMILY_COLORS.get(g) or _LANE_COLORS.get(g, "#c7c7c7")
        mine = _family_renderers(p, sel, color, shown, per)
        for rank, r in mine:
            by_rank.setdefault(rank, []).append(r)
        renderers += [r for _, r in mine]
        items.append(LegendItem(label=FAMILY_LABELS.get(g, g), renderers=[r for _, r in mine]))
    if renderers:
        p.add_tools(HoverTool(renderers=renderers, tooltips=_TOOLTIP))
    if items:
        p.add_layout(Legend(items=items, ncols=legend_cols, **_LEGEND), "above")
    return by_rank


def _family_renderers(
    p: BokehModel, sel: pd.DataFrame, color: str, shown: list[str] | None, per: float
) -> list[tuple[str | None, Any]]:
    """One family's boxes as (rank, renderer): one renderer, or with many ranks one per rank, named
    after it and hidden unless shown, each sharing the first one's glyphs (256 ranks stay a small
    page)."""
    from bokeh.models.renderers import GlyphRenderer

    parts = sel.groupby("rank", sort=False) if shown else [(None, sel)]
    mine: list[tuple[str | None, Any]] = []
    for rank, part in parts:
        src = _boxes_source(part, per)
        visible = shown is None or rank in shown
        if not mine:
            r = p.quad(
                **_QUAD, fill_color=color, line_color=color, source=src, name=rank, visible=visible
            )
        else:
            first = mine[0][1]
            glyphs = {k: getattr(first, k) for k in ("glyph", "nonselection_glyph", "muted_glyph")}
            r = GlyphRenderer(data_source=src, **glyphs, name=rank, visible=visible)
            p.renderers.append(r)
        mine.append((rank, r))
    return mine


def _boxes_source(part: pd.DataFrame, per: float) -> BokehModel:
    """The boxes' data: numbers as arrays (sent as binary), text as lists; times in ``per`` ns."""
    from bokeh.models import ColumnDataSource

    return ColumnDataSource(
        {
            "left": (part["t_start"] / per).to_numpy(dtype=float),
            "right": (part["t_end"] / per).to_numpy(dtype=float),
            **{c: part[c].to_numpy(dtype=float) for c in ("top", "bottom")},
            "count": part["count"].to_numpy(dtype=np.int64),
            **{c: part[c].tolist() for c in ("name", "raw", "dur", "extra")},
        }
    )


def _rank_bands(p: BokehModel, bands: list[tuple[float, float]]) -> None:
    """One band per rank (``bands``: each one's top and bottom): every other one shaded, a line
    between them."""
    from bokeh.models.annotations import BoxAnnotation, Span

    for i, (top, bottom) in enumerate(bands):
        if i % 2:
            p.add_layout(
                BoxAnnotation(
                    top=top, bottom=bottom, fill_color="#808080", fill_alpha=0.07, line_alpha=0
                )
            )
        if i:
            p.add_layout(
                Span(
                    location=top,
                    dimension="width",
                    line_color="#808080",
                    line_alpha=0.6,
                    line_width=1,
                )
            )
