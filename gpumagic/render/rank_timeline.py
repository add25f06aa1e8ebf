"""The timeline of a job of many ranks: the ranks worth comparing first, every other one a tick
away.

Past :data:`~.options.MANY_RANKS` ranks, every rank's lanes at once would be a few pixels each. So
the timeline stacks the featured ranks' lanes first (the straggler's, then the fastest rank's:
``ranks_view.featured_ranks``) and shows only them; the other ranks' lanes are drawn too (one
renderer per rank and kernel family, named after the rank) but hidden, below, with a coarser glyph
budget. A legend of ranks under the plot (core BokehJS: no widget bundle to send) shows or hides a
rank on a click, greyed while hidden; a script then restacks the shown ranks from the top in the
order of stacking (featured first, then by rank), so no hidden rank leaves a gap, and grows the plot
with them (up to the timeline's 900 px of lanes).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..edges import BokehModel

__all__ = ["rank_legend", "shown_first"]

#: The glyph budget of each lane of a rank shown only on request: a coarse picture (time buckets) of
#: the rank.
HIDDEN_GLYPHS = 25
_ROW_PX = 22  # a row of the ranks' legend
_TITLE_PX = 20  # its title
# what a row of it may take: the plot's frame, in a ~950 px output area, less the lanes' labels
_WIDTH_PX = 640

#: How the legend of ranks looks: smaller than the families' legend above the lanes.
_LEGEND_LOOK: dict[str, Any] = {
    "title_text_font_size": "12px",
    "title_text_font_style": "normal",
    "label_text_font_size": "11px",
    "glyph_width": 10,
    "glyph_height": 10,
    "spacing": 8,
    "padding": 4,
    "margin": 4,
    "inactive_fill_alpha": 0.75,
}

# Restacks the shown ranks' lanes from the top: shifts each shown rank's boxes and ticks by how far
# its top moves, shades every other shown rank and draws a line between them, and sizes the plot to
# the shown lanes. It runs when the last renderer of a rank changes visibility: the legend has
# toggled all of that rank's by then.
_RESTACK_JS = """
let top = 0.3, k = 0;
const ticks = [], names = new Map(), y0 = [], y1 = [], lines = [];
for (let g = 0; g < rends.length; g++) {
  if (!rends[g].length || !rends[g][rends[g].length - 1].visible) continue;
  const d = top - tops[g];
  if (d !== 0) {
    for (const r of rends[g]) {
      const data = r.data_source.data;
      const shift = (a) => Float64Array.from(a, (v) => v + d);
      r.data_source.data = Object.assign(
        {}, data, {top: shift(data.top), bottom: shift(data.bottom)});
    }
    tops[g] = top;
  }
  for (let i = 0; i < rel[g].length; i++) {
    ticks.push(top + rel[g][i]);
    names.set(top + rel[g][i], texts[g][i]);
  }
  if (k % 2) {
    y0.push(top - heights[g]);
    y1.push(top);
  }
  if (k > 0) lines.push(top);
  top -= heights[g];
  k++;
}
strips.data = {y0: y0, y1: y1};
spans.data = {y: lines};
axis.ticker.ticks = ticks;
axis.major_label_overrides = names;
p.y_range.start = Math.min(top, -0.5);
p.y_range.end = 0.3;
const h = Math.round(Math.max(4 * row_px, Math.min(900, (0.3 - top) * row_px)) + extra_px);
if (p.height !== h) p.height = h;
"""


def shown_first(
    groups: list[tuple[str, Any]], shown: Collection[str], limit: int
) -> tuple[list[tuple[str, Any]], list[int]]:
    """The groups of lanes in stacking order (the ``shown`` ones first, in that order, then the
    others by rank) and each one's glyph budget per lane: the shown ranks share the figure's, the
    others get :data:`HIDDEN_GLYPHS`."""
    order = list(shown)
    first = sorted((g for g in groups if g[0] in shown), key=lambda g: order.index(g[0]))
    rest = [g for g in groups if g[0] not in shown]
    each = max(100, limit // max(1, len(first)))
    return first + rest, [each] * len(first) + [HIDDEN_GLYPHS] * len(rest)


def _rank_key(label: str) -> tuple[int, int, str]:
    m = re.fullmatch(r"(?:rank|process) (\d+)", label)
    return (0, int(m.group(1)), "") if m else (1, 0, label)


def _short(label: str) -> str:
    """A rank's legend entry: its number ("17" for "rank 17"), the whole label for anything else."""
    m = re.fullmatch(r"(?:rank|process) (\d+)", label)
    return m.group(1) if m else label


def rank_legend(
    p: BokehModel,
    names: Sequence[str],
    bands: Sequence[tuple[float, float]],
    by_rank: Mapping[str | None, list[Any]],
    featured: Mapping[str, str],
    px: tuple[int, int],
) -> BokehModel:
    """The figure ``p`` (every rank's lanes stacked in ``names`` order, from ``bands``' top to
    bottom, each rank's renderers in ``by_rank``, the featured ranks' shown) with a legend of ranks
    that shows or hides each one, and its height grown by that legend. ``px``: the timeline's pixels
    per lane row and around its lanes."""
    from bokeh.models import CustomJS, Range1d

    roles = {label: role for role, label in featured.items()}
    n_shown = sum(label in roles for label in names)
    rel, words = _ticks_by_band(p, bands)
    p.y_range = Range1d(start=min(bands[n_shown - 1][1], -0.5), end=0.3)
    strips, spans = _shade_bands(p, bands[:n_shown])
    choice = [label for label in sorted(names, key=_rank_key) if by_rank.get(label)]
    legend, rows = _legend_of_ranks(names, choice, by_rank, featured)
    p.add_layout(legend, "below")  # under the lanes and their time axis: the lanes come first
    p.height += _TITLE_PX + rows * _ROW_PX
    args = {
        "rends": [by_rank.get(label, []) for label in names],
        "tops": [top for top, _ in bands],
        "heights": [top - bottom for top, bottom in bands],
        "rel": rel,
        "texts": words,
        "strips": strips,
        "spans": spans,
        "axis": p.yaxis[0],
        "p": p,
        "row_px": px[0],
        "extra_px": px[1] + _TITLE_PX + rows * _ROW_PX,
    }
    restack = CustomJS(args=args, code=_RESTACK_JS)
    for label in choice:
        by_rank[label][-1].js_on_change("visible", restack)
    return p


def _ticks_by_band(
    p: BokehModel, bands: Sequence[tuple[float, float]]
) -> tuple[list[list[float]], list[list[str]]]:
    """The lane ticks of each rank's band, as offsets from its top, and their labels: what the
    restacking script moves with the band."""
    ticks = list(p.yaxis[0].ticker.ticks)
    texts = p.yaxis[0].major_label_overrides
    rel, words = [], []
    for top, bottom in bands:
        mine = [t for t in ticks if bottom < t < top]
        rel.append([t - top for t in mine])
        words.append([texts[float(t)] for t in mine])
    return rel, words


def _shade_bands(
    p: BokehModel, shown: Sequence[tuple[float, float]]
) -> tuple[BokehModel, BokehModel]:
    """Every other shown band shaded and a line between them, from sources the restacking script
    rewrites: returns (the strips' source, the lines' source)."""
    from bokeh.models import ColumnDataSource

    shaded = [b for i, b in enumerate(shown) if i % 2]
    strips = ColumnDataSource({"y0": [b for _, b in shaded], "y1": [t for t, _ in shaded]})
    spans = ColumnDataSource({"y": [t for t, _ in shown[1:]]})
    p.hstrip(
        y0="y0",
        y1="y1",
        source=strips,
        fill_color="#808080",
        fill_alpha=0.07,
        line_alpha=0,
        level="underlay",
    )
    p.hspan(
        y="y", source=spans, line_color="#808080", line_alpha=0.6, line_width=1, level="underlay"
    )
    return strips, spans


def _legend_of_ranks(
    names: Sequence[str],
    choice: Sequence[str],
    by_rank: Mapping[str | None, list[Any]],
    featured: Mapping[str, str],
) -> tuple[Any, int]:
    """The legend of ranks (one entry per rank in ``choice``, as many to a row as fit in
    :data:`_WIDTH_PX`), titled with how many ranks there are and which are shown; and its rows."""
    from bokeh.models.annotations import Legend, LegendItem

    items = [LegendItem(label=_short(label), renderers=by_rank[label]) for label in choice]
    cols = max(1, _WIDTH_PX // max(len(_short(label)) * 7 + 10 + 5 + 8 for label in choice))
    ranks = sum(_rank_key(label)[0] == 0 for label in names)
    said = " and ".join(f"{label}, the {role}" for role, label in featured.items())
    legend = Legend(
        items=items,
        orientation="horizontal",
        ncols=cols,
        click_policy="hide",
        location="top_left",
        title=f"Ranks ({ranks}): click one to show or hide its lanes (greyed: hidden). Shown: "
        f"{said}.",
        **_LEGEND_LOOK,
    )
    return legend, -(-len(items) // cols)
