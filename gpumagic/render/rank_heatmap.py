"""A rank x figure heatmap: the per-rank table of a job of many ranks, read at a glance (one row per
rank and GPU).

Four figures, each over that rank's own range (:func:`~gpumagic.analysis.ranks.rank_figures`):

- GPU busy: busy time as a share of the range;
- NCCL: NCCL time as a share of busy time;
- exposed NCCL: NCCL time during which no other kernel ran on that GPU (not overlapped with
  compute), as a share of the range: what communication costs the step;
- range skew: the range minus the shortest rank's range, as a share of the shortest.

Each column has its own scale (a sequential palette from 0 to the column's largest value; at least
:data:`SCALE_FLOOR`, so that noise of a percent or two is not drawn as contrast), darker is more.
The value is written in the cell where the cell is tall enough, and always in the hover. Rows shrink
from :data:`CELL_PX` as ranks are added, down to :data:`MIN_CELL_PX` (256 ranks fit about 900 px),
and their labels thin out to every 2nd, 4th, 8th... rank, the featured ranks (the straggler, the
fastest) always labelled. Only figures are drawn here.

A job read rank by rank (``gpumagic.job``) has a second heatmap: busy share per rank and time bin
(:func:`rank_time_heatmap_figure`), one image whatever the rank count (ranks share rows past
:data:`TIME_ROWS`), so its page stays small at thousands of ranks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.ranks import rank_figures
from ..edges import BokehModel
from ..trace import Trace
from ..units import format_ns
from .ranks_view import times

__all__ = [
    "COLUMNS",
    "TIME_ROWS",
    "grouped_rows",
    "heatmap_values",
    "rank_heatmap_figure",
    "rank_time_heatmap_figure",
]

#: (key, axis label, palette) of each column, left to right.
COLUMNS = [
    ("busy", "GPU busy\n(of its range)", "Blues256"),
    ("nccl", "NCCL\n(of busy)", "Purples256"),
    ("exposed", "Exposed NCCL\n(of range, not overlapped)", "Oranges256"),
    ("skew", "Range skew\n(vs the shortest range)", "Reds256"),
]
#: A column's scale runs from 0 to its largest value, and at least to this.
SCALE_FLOOR = 0.05
CELL_PX = 22
MIN_CELL_PX = 3
#: The rows' total height is kept near this while each row is at least MIN_CELL_PX tall.
ROWS_PX = 900
#: Labels on the rank axis at least this far apart; values written in cells at least this tall.
LABEL_PX = 13
TEXT_PX = 12
_WIDTH_PX = 900  # JupyterLab's output area is ~950 px wide
_TOOLTIP = (
    "<div style='font-size:12px;max-width:420px;white-space:normal'><b>@row</b> &middot; "
    "@col: <b>@value</b>"
    "<div>@text</div><div style='color:#777'>column scale: @scale</div></div>"
)
_FRAME_PX = 78  # title and the two-line column labels above the cells


def heatmap_values(trace: Trace) -> pd.DataFrame:
    """One row per rank and GPU, in rank order, indexed by its label ("rank R", "rank R · GPU d"
    where a process ran on several GPUs): the four figures as shares (``busy``, ``nccl``,
    ``exposed``, ``skew``), and the sentence the hover shows for each (``busy_text``...)."""
    fig = rank_figures(trace)
    several = fig.groupby("pid")["device"].transform("nunique") > 1
    labels = [
        f"{x} \u00b7 GPU {int(d)}" if s else str(x)
        for x, d, s in zip(fig["label"], fig["device"], several)
    ]
    span = fig["span_ns"].clip(lower=1)
    exposed_ns = (fig["nccl_ns"] - fig["overlap_ns"]).clip(lower=0)
    busy = fig[fig["span_skew_ns"] >= 0] if "span_skew_ns" in fig else fig
    shortest = int(busy["span_ns"].min()) if len(busy) else 0
    out = pd.DataFrame(
        {
            "busy": fig["busy_ns"] / span,
            "nccl": fig["nccl_share"].astype(float),
            "exposed": exposed_ns / span,
            "skew": fig["span_skew"].astype(float),
        }
    )
    out["busy_text"] = [
        f"{format_ns(b)} busy of a {format_ns(s)} range"
        for b, s in zip(fig["busy_ns"], fig["span_ns"])
    ]
    out["nccl_text"] = [
        f"{format_ns(n)} in NCCL kernels of {format_ns(b)} busy"
        for n, b in zip(fig["nccl_ns"], fig["busy_ns"])
    ]
    out["exposed_text"] = [
        f"{format_ns(e)} of its {format_ns(n)} NCCL ran with no other kernel on the GPU"
        for e, n in zip(exposed_ns, fig["nccl_ns"])
    ]
    out["skew_text"] = [
        f"range {format_ns(s)}, no kernels to compare"
        if k < 0
        else f"range {format_ns(s)}, +{format_ns(k)} on the shortest ({format_ns(shortest)})"
        for s, k in zip(fig["span_ns"], fig["span_skew_ns"])
    ]
    out.index = pd.Index(labels, name="label")
    return out.fillna(0.0)


def _ticks(n: int, cell: float, featured: list[int]) -> list[int]:
    """Rows to label: every 1st, 2nd, 4th... so that labels stay LABEL_PX apart, the featured rows
    always, the regular ones next to a featured one left out."""
    step = 1
    while step * cell < LABEL_PX:
        step *= 2
    near = max(1, int(np.ceil(LABEL_PX / cell)))
    regular = [i for i in range(0, n, step) if all(abs(i - f) >= near for f in featured)]
    return sorted(set(regular) | set(featured))


def _colors(values: np.ndarray, palette: str) -> tuple[list[str], list[str], float]:
    """Fill and text colours of a column on its own scale (0 to its largest value, at least
    SCALE_FLOOR)."""
    from bokeh import palettes

    colors = list(reversed(getattr(palettes, palette)))  # light to dark
    top = max(float(np.nanmax(values)) if len(values) else 0.0, SCALE_FLOOR)
    level = np.clip(np.nan_to_num(values) / top, 0.0, 1.0)
    idx = (16 + level * (len(colors) - 40)).astype(int)  # never white, never the darkest
    return [colors[i] for i in idx], ["white" if x > 0.55 else "#222" for x in level], top


def rank_heatmap_figure(trace: Trace, featured: Mapping[str, str] | None = None) -> BokehModel:
    """The heatmap as a Bokeh figure; ``featured``: role -> label (``ranks_view.featured_ranks``),
    named on the rank axis. Its ``height`` is the whole plot's."""
    from bokeh.models import FixedTicker, Range1d
    from bokeh.plotting import figure

    values = heatmap_values(trace)
    n = len(values)
    cell = _cell_px(n)
    p = figure(
        height=int(n * cell) + _FRAME_PX,
        sizing_mode="stretch_width",
        max_width=_WIDTH_PX,
        x_range=Range1d(start=-0.5, end=len(COLUMNS) - 0.5),
        y_range=Range1d(start=n - 0.5, end=-0.5),  # rank 0 on top
        x_axis_location="above",
        tools="save",
        toolbar_location=None,
        title="Per rank: each column on its own scale, darker is more (hover a cell for its "
        "numbers)",
    )
    _draw_cells(p, _cells(values), cell)
    p.xaxis.ticker = FixedTicker(ticks=list(range(len(COLUMNS))))
    p.xaxis.major_label_overrides = {j: name for j, (_, name, _) in enumerate(COLUMNS)}
    p.xaxis.major_label_text_font_size = "12px"
    # a rank on several GPUs has a row per GPU, each named after the rank's role
    base = [label.split(" \u00b7 GPU")[0] for label in values.index]
    font = f"{int(min(12, max(9, cell - 2)))}px" if n <= ROWS_PX // LABEL_PX else "11px"
    _rank_axis(p, list(map(str, values.index)), base, featured, cell, font)
    for axis in (p.xaxis, p.yaxis):
        axis.major_tick_line_color = None
        axis.minor_tick_line_color = None
        axis.axis_line_color = None
    return p


def _cell_px(n: int) -> float:
    """A row's height for ``n`` rows: :data:`CELL_PX`, less as rows are added to keep the rows near
    :data:`ROWS_PX`, never under :data:`MIN_CELL_PX`."""
    return float(max(MIN_CELL_PX, min(CELL_PX, ROWS_PX / max(n, 1))))


def _cells(values: pd.DataFrame) -> dict[str, list[Any]]:
    """One cell per rank and column (column by column): its place, colours, the value written in it
    and what the hover says."""
    n = len(values)
    data: dict[str, list[Any]] = {
        k: [] for k in ("x", "y", "fill", "ink", "value", "text", "row", "col", "scale")
    }
    for j, (key, name, palette) in enumerate(COLUMNS):
        v = values[key].to_numpy(dtype=float)
        fill, ink, top = _colors(v, palette)
        data["x"] += [j] * n
        data["y"] += list(range(n))
        data["fill"] += fill
        data["ink"] += ink
        data["value"] += [
            f"{x:.0%}" if key != "skew" else (times(x + 1) if x > 1 else f"+{x:.1%}") for x in v
        ]
        data["text"] += values[f"{key}_text"].tolist()
        data["row"] += list(values.index)
        data["col"] += [name.replace("\n", " ")] * n
        data["scale"] += [f"0 to {top:.0%}"] * n
    return data


def _draw_cells(p: BokehModel, data: dict[str, list[Any]], cell: float) -> None:
    """The cells, a gap between them where rows are tall enough, each value written in its cell
    from :data:`TEXT_PX` on, and the hover."""
    from bokeh.models import ColumnDataSource, HoverTool

    src = ColumnDataSource(data)
    cells = p.rect(
        x="x",
        y="y",
        width=0.97,
        height=0.92 if cell >= 6 else 1.0,
        source=src,
        fill_color="fill",
        line_color=None,
    )
    if cell >= TEXT_PX:
        p.text(
            x="x",
            y="y",
            text="value",
            source=src,
            text_color="ink",
            text_align="center",
            text_baseline="middle",
            text_font_size=f"{int(min(12, cell - 3))}px",
        )
    p.add_tools(HoverTool(renderers=[cells], tooltips=_TOOLTIP))


def _rank_axis(
    p: BokehModel,
    labels: list[str],
    ranks: list[str],
    featured: Mapping[str, str] | None,
    cell: float,
    font: str,
    offset: float = 0,
) -> None:
    """The rank axis of either heatmap: ticks at the rows :func:`_ticks` keeps (at row +
    ``offset``), each named by its row's ``labels`` entry and, where its rank (``ranks``) is
    featured, its role; the frame bare (no grid, no outline). Both heatmaps name the featured ranks
    alike."""
    from bokeh.models import FixedTicker

    roles = {label: role for role, label in (featured or {}).items()}
    ticks = _ticks(len(labels), cell, [i for i, r in enumerate(ranks) if r in roles])
    p.yaxis.ticker = FixedTicker(ticks=[i + offset for i in ticks])
    p.yaxis.major_label_overrides = {
        i + offset: f"{labels[i]} \u00b7 {roles[ranks[i]]}" if ranks[i] in roles else labels[i]
        for i in ticks
    }
    p.yaxis.major_label_text_font_size = font
    p.grid.grid_line_color = None
    p.outline_line_color = None
    p.min_border_left = 10


#: A rank x time heatmap draws at most this many rows: past it, consecutive ranks share a row.
TIME_ROWS = 256


def grouped_rows(
    matrix: np.ndarray, ranks: list[int], rows: int = TIME_ROWS
) -> tuple[np.ndarray, list[str]]:
    """``matrix`` (one row per rank, in ``ranks``' order) with at most ``rows`` rows: consecutive
    ranks averaged into one row past it; and each row's label ("rank 7", "ranks 64-127")."""
    n = len(ranks)
    if n <= rows:
        return matrix, [f"rank {r}" for r in ranks]
    size = -(-n // rows)
    groups = np.arange(n) // size
    count = np.bincount(groups).astype(np.float32)
    out = np.zeros((int(groups.max()) + 1, matrix.shape[1]), dtype=np.float32)
    np.add.at(out, groups, matrix)
    labels = [
        f"ranks {ranks[g * size]}-{ranks[min((g + 1) * size, n) - 1]}" for g in range(len(out))
    ]
    return out / count[:, None], labels


def rank_time_heatmap_figure(
    matrix: np.ndarray,
    ranks: list[int],
    width_ns: int,
    start_ns: int,
    featured: Mapping[str, str] | None = None,
) -> BokehModel:
    """Busy share per rank (rows) and time bin (columns) as a Bokeh image: darker is busier. Past
    :data:`TIME_ROWS` ranks, a row stands for a block of consecutive ranks (their mean), so the page
    stays the same size at any rank count; the featured ranks' rows are named on the axis."""
    from bokeh.models import HoverTool, LinearColorMapper, Range1d
    from bokeh.palettes import Blues256
    from bokeh.plotting import figure

    shown, labels = grouped_rows(matrix, ranks)
    n, cols = shown.shape
    cell = _cell_px(n)
    span_s = cols * width_ns * 1e-9
    p = figure(
        height=int(n * cell) + _FRAME_PX,
        sizing_mode="stretch_width",
        max_width=_WIDTH_PX,
        x_range=Range1d(start=0, end=span_s),
        y_range=Range1d(start=n, end=0),  # rank 0 on top
        tools="save,xwheel_zoom,xpan,reset",
        toolbar_location="right",
        title="GPU busy per rank over time (darker is busier; hover for the numbers)",
        x_axis_label="seconds from the job's first bin",
    )
    mapper = LinearColorMapper(palette=list(reversed(Blues256)), low=0.0, high=1.0)
    img = p.image(image=[shown], x=0, y=0, dw=span_s, dh=n, color_mapper=mapper)
    p.add_tools(
        HoverTool(
            renderers=[img],
            tooltips=[("time", "$x{0.000} s"), ("row", "$y{0}"), ("busy", "@image{0%}")],
        )
    )
    _rank_axis(p, labels, labels, featured, cell, "11px", offset=0.5)
    return p
