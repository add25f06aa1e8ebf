"""The Bokeh timeline: one lane per NVTX/range thread, CPU thread (torch ops), CUDA API thread and
GPU stream.

Large traces stay usable and the output small: beyond ``max_glyphs_per_lane`` events, a lane's
events are merged into time buckets (each box says how many events it holds), and WebGL draws when
there are many glyphs. Raw events never reach the browser (Chrome and Perfetto fail on trace JSON
over about 1 GB).

The figure is made here; how it reaches a page (BokehJS once per notebook, or a standalone page) is
``embed.py``'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.finding import kernel_labels
from ..analysis.ranks import is_multi, processes
from ..kernels import decode
from ..trace import Trace, id_column
from ..trace.launching_ops import kernel_launch_apis
from ..units import format_time
from . import counter_lanes, rank_timeline
from .family_colors import FAMILY_COLORS, FAMILY_LABELS
from .options import ReportOptions
from .ranks_view import featured_ranks, many_ranks

__all__ = ["FAMILY_COLORS", "FAMILY_LABELS", "time_unit", "timeline_figure"]

_LANE_COLORS = {"nvtx": "#c5b0d5", "ops": "#aec7e8", "api": "#ffbb78"}
_QUAD = {
    "left": "left",
    "right": "right",
    "top": "top",
    "bottom": "bottom",
    "fill_alpha": 0.85,
    "muted_alpha": 0.12,
}
_LEGEND = {
    "orientation": "horizontal",
    "click_policy": "mute",
    "location": "top_left",
    "spacing": 14,
    "padding": 4,
}
_LEGEND |= {"margin": 4, "label_text_font_size": "12px", "glyph_width": 14, "glyph_height": 12}
_MAX_DEPTH = 6
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


def _stream_key(value: Any) -> tuple[int, float, str]:
    """Streams sort as numbers (7, 13, 17, 143), names after them."""
    s = str(value)
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*", s)
    return (0, float(m.group(1)), "") if m else (1, 0.0, s)


@dataclass
class _Lane:
    """One lane's events as numbers (start, end, depth) and how to describe any of them: the text of
    an event (name, raw name, family, extra) is made only for the events that are drawn, never for a
    million."""

    start: np.ndarray
    end: np.ndarray
    depth: np.ndarray
    describe: Callable[[np.ndarray], pd.DataFrame]

    def __len__(self) -> int:
        return len(self.start)


def _bucket(lane: _Lane, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The events to draw: all of them up to ``limit``; beyond, one box per time bucket (``limit``
    buckets over the lane) and depth, spanning its events and standing for its longest one. (event
    index, start, end, count)."""
    n = len(lane)
    if n <= limit:
        return np.arange(n), lane.start, lane.end, np.ones(n, dtype=np.int64)
    t0 = int(lane.start.min())
    width = max(1, (int(lane.end.max()) - t0) // limit + 1)
    key = ((lane.start - t0) // width) * (_MAX_DEPTH + 1) + lane.depth
    # events in start order on one level (a GPU stream, API calls) come grouped already; nested or
    # unordered ones are sorted by bucket, longest first
    ordered = not (key[1:] < key[:-1]).any()
    order = np.arange(n) if ordered else np.lexsort((lane.start - lane.end, key))
    k, start, end = key[order], lane.start[order], lane.end[order]
    first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    count = np.diff(np.r_[first, n])
    dur = end - start
    longest = np.repeat(np.maximum.reduceat(dur, first), count)
    pick = np.minimum.reduceat(
        np.where(dur == longest, np.arange(n), n), first
    )  # the first longest (ties: earlier)
    return order[pick], np.minimum.reduceat(start, first), np.maximum.reduceat(end, first), count


def _groups(
    values: pd.Series, key: Callable[[Any], Any] | None = None
) -> list[tuple[Any, np.ndarray]]:
    """(value, row positions) for each distinct value, values in sorted order (by ``key``), rows in
    table order."""
    codes, uniques = pd.factorize(values)  # missing values (-1) belong to no lane
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
    found = [(uniques[i], order[bounds[i] : bounds[i + 1]]) for i in range(len(uniques))]
    return sorted(found, key=lambda vi: key(vi[0]) if key else vi[0])


def _ints(df: pd.DataFrame, col: str) -> np.ndarray:
    return df[col].to_numpy(dtype="int64")


def _host_lane(
    df: pd.DataFrame, rows: np.ndarray, name: str, family: str, extra: Callable, depth: bool
) -> _Lane:
    """A lane of host events (NVTX ranges, torch ops, API calls) from rows of ``df``."""
    g = df.iloc[rows]

    def describe(idx: np.ndarray) -> pd.DataFrame:
        e = g.iloc[idx]
        return pd.DataFrame(
            {
                "name": e[name].astype(str).to_numpy(),
                "raw": "",
                "family": family,
                "extra": extra(e).to_numpy(),
            }
        )

    d = np.minimum(_ints(g, "depth"), _MAX_DEPTH) if depth else np.zeros(len(g), dtype=np.int64)
    return _Lane(_ints(g, "start"), _ints(g, "end"), d, describe)


def _gpu_lanes(
    trace: Trace, k: pd.DataFrame, m: pd.DataFrame, prefix: str = "", by_device: bool = False
) -> list[tuple[str, str, _Lane]]:
    """One lane per GPU stream (per GPU and stream with ``by_device``): its kernels and memory
    operations."""
    parts = [df for df in (k, m) if not df.empty]
    if not parts:
        return []
    both = pd.concat([df[["start", "end", "stream", "device"]] for df in parts], ignore_index=True)
    n_k = len(k)
    labels = kernel_labels(trace) if n_k else {}
    launches = kernel_launch_apis(trace)
    families = {n: decode(n, launches.get(n)).family for n in labels}

    def describe(idx: np.ndarray) -> pd.DataFrame:
        ki, mi = idx[idx < n_k], idx[idx >= n_k] - n_k
        out = []
        if len(ki):
            e = k.iloc[ki]
            names = e["name"].astype(object)
            grid = e["grid"].astype(object).fillna("?").astype(str)
            block = e["block"].astype(object).fillna("?").astype(str)
            out.append(
                pd.DataFrame(
                    {
                        "name": names.map(labels).to_numpy(),
                        "raw": names.astype(str).str.slice(0, 240).to_numpy(),
                        "family": names.map(families).to_numpy(),
                        "extra": ("grid " + grid + ", block " + block).to_numpy(),
                    },
                    index=np.flatnonzero(idx < n_k),
                )
            )
        if len(mi):
            e = m.iloc[mi]
            out.append(
                pd.DataFrame(
                    {
                        "name": e["kind"].astype(str).to_numpy(),
                        "raw": e["name"].astype(str).to_numpy(),
                        "family": "memop",
                        "extra": (e["bytes"].astype(str) + " bytes").to_numpy(),
                    },
                    index=np.flatnonzero(idx >= n_k),
                )
            )
        return pd.concat(out).sort_index().reset_index(drop=True)

    lanes = []
    start, end = _ints(both, "start"), _ints(both, "end")
    if (
        by_device
    ):  # one lane per (GPU, stream): the pair as one number, named and sorted through its parts
        dev, devs = pd.factorize(both["device"].astype(object).fillna(-1))
        stream, streams = pd.factorize(both["stream"].astype(object).fillna(-1))
        key = pd.Series(dev.astype(np.int64) * (len(streams) + 1) + stream)
        pair = lambda v: (devs[v // (len(streams) + 1)], streams[v % (len(streams) + 1)])  # noqa: E731
        order = lambda v: (_stream_key(pair(v)[0]), _stream_key(pair(v)[1]))  # noqa: E731
        named = lambda v: f"{prefix}GPU {pair(v)[0]} \u00b7 stream {pair(v)[1]}"  # noqa: E731
    else:
        key, order = both["stream"].astype(object), _stream_key
        named = (lambda v: f"{prefix}stream {v}") if prefix else (lambda v: f"GPU stream {v}")
    for value, rows in _groups(key, key=order):
        flat = np.zeros(len(rows), dtype=np.int64)
        lane = _Lane(start[rows], end[rows], flat, lambda idx, rows=rows: describe(rows[idx]))
        lanes.append((named(value), "gpu", lane))
    return lanes


def _host_lanes(
    nv: pd.DataFrame, ops: pd.DataFrame, api: pd.DataFrame, prefix: str
) -> list[tuple[str, str, _Lane]]:
    """NVTX ranges, torch ops and CUDA API calls, one lane per thread each."""
    lanes: list[tuple[str, str, _Lane]] = []
    for th, rows in _groups(nv["thread"]) if not nv.empty else ():
        lane = _host_lane(nv, rows, "text", "nvtx", lambda e: e["domain"].astype(str), depth=True)
        lanes.append((f"{prefix}ranges (thread {th})", "nvtx", lane))
    for th, rows in _groups(ops["thread"]) if not ops.empty else ():
        shapes = lambda e: e["shapes"].fillna("").astype(str).replace("nan", "")  # noqa: E731
        lane = _host_lane(ops, rows, "name", "ops", shapes, depth=True)
        lanes.append((f"{prefix}CPU ops (thread {th})", "ops", lane))
    for th, rows in _groups(api["thread"]) if not api.empty else ():
        corr = lambda e: "correlation " + e["correlation"].astype(str)  # noqa: E731
        lane = _host_lane(api, rows, "name", "api", corr, depth=False)
        lanes.append((f"{prefix}CUDA API (thread {th})", "api", lane))
    return lanes


def _lane_groups(trace: Trace) -> list[tuple[str, list[tuple[str, str, _Lane]]]]:
    """The lanes from top to bottom, in named groups: one group ("", NVTX ranges, torch ops and CUDA
    API calls per thread, then GPU streams) for a single process on one GPU; with several processes
    or GPUs, one group per rank, in rank order, named and each lane named after its rank ("rank 0
    \u00b7 stream 7"), then the host lanes of processes that ran no GPU work ("other processes")."""
    tables = {name: getattr(trace, name) for name in ("nvtx", "ops", "api", "kernels", "memops")}
    if not is_multi(trace):
        return [
            (
                "",
                _host_lanes(tables["nvtx"], tables["ops"], tables["api"], "")
                + _gpu_lanes(trace, *_gpu(tables)),
            )
        ]
    procs = processes(trace)
    pids = {
        name: id_column(df["pid"]) if "pid" in df.columns else np.full(len(df), -1, dtype=np.int64)
        for name, df in tables.items()
    }
    known = procs["pid"].to_numpy(dtype=np.int64)
    devices = trace.gpu_units()[1].groupby("pid")["device"].nunique()
    groups = []
    for pid, label in zip(known.tolist(), procs["label"]):
        mine = {name: df[pids[name] == pid] for name, df in tables.items()}
        prefix = (
            f"{label} \u00b7 " if len(known) > 1 else ""
        )  # one process on several GPUs: lanes by GPU
        lanes = _host_lanes(mine["nvtx"], mine["ops"], mine["api"], prefix)
        lanes += _gpu_lanes(trace, *_gpu(mine), prefix, by_device=bool(devices.get(pid, 1) > 1))
        groups.append((str(label), lanes))
    rest = {name: df[~np.isin(pids[name], known)] for name, df in tables.items()}
    others = _host_lanes(rest["nvtx"], rest["ops"], rest["api"], "other processes \u00b7 ")
    return groups + ([("other processes", others)] if others else [])


def _gpu(tables: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame]:
    return tables["kernels"], tables["memops"]


def _lanes(trace: Trace) -> list[tuple[str, str, _Lane]]:
    """(label, kind, events) from top to bottom (:func:`_lane_groups`, flattened)."""
    return [lane for _, group in _lane_groups(trace) for lane in group]


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
    parts = []
    ticks, labels = [], {}
    y = 0.0
    groups = _lane_groups(trace)
    if shown is not None:
        groups, limits = rank_timeline.shown_first(groups, shown, max_glyphs_per_lane)
    else:  # the glyph budget is the figure's, not each rank's: N ranks draw as much as one
        limit = (
            max(100, max_glyphs_per_lane // len(groups)) if len(groups) > 1 else max_glyphs_per_lane
        )
        limits = [limit] * len(groups)
    bounds = [
        0.3
    ]  # between groups of lanes: halfway from one group's lowest box to the next group's top
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
    group: list[tuple[str, str, _Lane]],
    t0: int,
    max_glyphs_per_lane: int,
    parts: list[pd.DataFrame],
    ticks: list[float],
    labels: dict[float, str],
    y: float,
) -> float:
    """The boxes of one group of lanes into ``parts``, from ``y`` down; returns the y below them."""
    for label, kind, lane in group:
        idx, start, end, count = _bucket(lane, max_glyphs_per_lane)
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
        group = fam.where(fam.isin(FAMILY_LABELS), kind if kind != "gpu" else "other")
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
                    "group": group.to_numpy(),
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
) -> Any:
    """The figure; its ``height`` is the whole plot's (title, legend and axis included): what a page
    must give it. Past :data:`~.options.MANY_RANKS` ranks, the ``featured`` ranks' lanes (role ->
    label; by default the straggler's and the fastest rank's) shown, the others' a click away in a
    legend of ranks (:mod:`.rank_timeline`)."""
    from bokeh.models import (
        BoxAnnotation,
        ColumnDataSource,
        GlyphRenderer,
        HoverTool,
        Legend,
        LegendItem,
        Span,
    )
    from bokeh.plotting import figure

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
    legend_rows = -(-len(groups) // legend_cols) if groups else 0
    extra_px = _FRAME_EXTRA_PX + (20 if title else 0) + legend_rows * _LEGEND_ROW_PX
    lowest = (
        bands[len(shown) - 1][1] if shown else y
    )  # many ranks: the shown ones are stacked first
    p = figure(
        height=int(max(4 * _ROW_PX, min(900, (-lowest) * _ROW_PX))) + extra_px,
        sizing_mode="stretch_width",
        x_axis_label=f"{unit} since capture start",
        tools="xpan,xwheel_zoom,box_zoom,reset,save",
        active_scroll="xwheel_zoom",
        title=title,
        output_backend="webgl" if len(rows) > 5000 else "canvas",
    )
    renderers, items, by_rank = [], [], {}
    for g in groups:
        sel = rows[rows["group"] == g]
        color = FAMILY_COLORS.get(g) or _LANE_COLORS.get(g, "#c7c7c7")
        parts = sel.groupby("rank", sort=False) if shown else [(None, sel)]
        mine = []
        for (
            rank,
            part,
        ) in parts:  # many ranks: one renderer per rank, named after it, the others hidden
            src = ColumnDataSource(  # numbers as arrays (sent as binary), text as lists
                {
                    "left": (part["t_start"] / per).to_numpy(dtype=float),
                    "right": (part["t_end"] / per).to_numpy(dtype=float),
                    **{c: part[c].to_numpy(dtype=float) for c in ("top", "bottom")},
                    "count": part["count"].to_numpy(dtype=np.int64),
                    **{c: part[c].tolist() for c in ("name", "raw", "dur", "extra")},
                }
            )
            visible = rank in (shown or [rank])
            if not mine:
                r = p.quad(
                    **_QUAD,
                    fill_color=color,
                    line_color=color,
                    source=src,
                    name=rank,
                    visible=visible,
                )
            # many ranks: each rank's renderer shares its family's glyphs (256 ranks stay a small
            # page)
            else:
                glyphs = {
                    k: getattr(mine[0], k) for k in ("glyph", "nonselection_glyph", "muted_glyph")
                }
                r = GlyphRenderer(data_source=src, **glyphs, name=rank, visible=visible)
                p.renderers.append(r)
            mine.append(r)
            by_rank.setdefault(rank, []).append(r)
        renderers += mine
        items.append(LegendItem(label=FAMILY_LABELS.get(g, g), renderers=mine))
    if renderers:
        p.add_tools(HoverTool(renderers=renderers, tooltips=_TOOLTIP))
    if items:
        p.add_layout(Legend(items=items, ncols=legend_cols, **_LEGEND), "above")
    for i, (top, bottom) in enumerate(
        [] if shown else bands
    ):  # one band per rank: every other one shaded
        if i % 2:
            p.add_layout(
                BoxAnnotation(
                    top=top, bottom=bottom, fill_color="#808080", fill_alpha=0.07, line_alpha=0
                )
            )
        if i:  # a line between them
            p.add_layout(
                Span(
                    location=top,
                    dimension="width",
                    line_color="#808080",
                    line_alpha=0.6,
                    line_width=1,
                )
            )
    more_ticks, more_labels = counter_lanes.draw_lanes(p, metric_lanes, per)
    ticks, labels = [*ticks, *more_ticks], {**labels, **more_labels}
    p.yaxis.ticker = ticks
    p.yaxis.major_label_overrides = {float(k): v for k, v in labels.items()}
    p.ygrid.grid_line_color = None
    p.toolbar.logo = None
    if not shown:
        return p
    return rank_timeline.rank_legend(p, names, bands, by_rank, featured, (_ROW_PX, extra_px))
