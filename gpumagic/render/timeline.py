"""The Bokeh timeline: one lane per NVTX/range thread, CPU thread (torch ops), CUDA API thread and GPU stream.

Large traces stay usable and the output small: beyond ``max_glyphs_per_lane`` events, a lane's events are merged
into time buckets (each box says how many events it holds), and WebGL draws when there are many glyphs. Raw events
never reach the browser (Chrome and Perfetto fail on trace JSON over about 1 GB).

The figure is made here; how it reaches a page (BokehJS once per notebook, or a standalone page) is ``embed.py``'s.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.finding import kernel_labels
from ..kernels import decode
from ..trace import Trace
from ..units import format_time
from .options import ReportOptions

__all__ = ["FAMILY_COLORS", "FAMILY_LABELS", "time_unit", "timeline_figure"]

FAMILY_COLORS = {
    "cutlass2": "#1f77b4",
    "cutlass3": "#17becf",
    "cublas_xmma": "#2ca02c",
    "cublas_legacy": "#98df8a",
    "nvjet": "#bcbd22",
    "cudnn": "#9467bd",
    "flash_attention": "#e377c2",
    "aten": "#ff7f0e",
    "triton": "#d62728",
    "nccl": "#8c564b",
    "cufft": "#ad494a",
    "cusolver": "#8c6d31",
    "cusparse": "#6b6ecf",
    "memop": "#7f7f7f",
    "other": "#c7c7c7",
}
# What the legend calls each kernel family and each kind of host lane.
FAMILY_LABELS = {
    "cutlass2": "CUTLASS 2.x",
    "cutlass3": "CUTLASS 3.x",
    "cublas_xmma": "cuBLAS",
    "cublas_legacy": "cuBLAS (legacy)",
    "nvjet": "cuBLAS (nvjet)",
    "cudnn": "cuDNN",
    "flash_attention": "FlashAttention",
    "aten": "PyTorch ATen",
    "triton": "Triton",
    "nccl": "NCCL",
    "cufft": "cuFFT",
    "cusolver": "cuSOLVER",
    "cusparse": "cuSPARSE",
    "memop": "memory op",
    "other": "other kernel",
    "nvtx": "NVTX range",
    "ops": "CPU op",
    "api": "CUDA API",
}
_LANE_COLORS = {"nvtx": "#c5b0d5", "ops": "#aec7e8", "api": "#ffbb78"}
_MAX_DEPTH = 6
# Pixels: rows of lanes, and what the figure adds around them (title, x axis, legend rows).
_ROW_PX = 28
_FRAME_EXTRA_PX = 86
_LEGEND_ROW_PX = 24
_LEGEND_WIDTH_PX = 760  # what a legend row may take: a notebook's output area is 900-1000 px wide
# The hover box: long kernel names wrap inside it instead of running off the page.
_TOOLTIP = (
    "<div style='max-width:min(560px,80vw);white-space:normal;overflow-wrap:anywhere;font-size:12px'>"
    "<div><b>@name</b></div>"
    "<div style='color:#555;font-family:monospace;font-size:11px'>@raw</div>"
    "<div>@dur &middot; @extra</div>"
    "<div style='color:#555'>@count event(s)</div></div>"
)


def time_unit(span_ns: float) -> tuple[str, float]:
    """The unit the x axis reads best in for a span: (name, ns per unit). A 30 s capture in s, 3 ms in ms."""
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


def _bucket(df: pd.DataFrame, limit: int) -> pd.DataFrame:
    """Merge a lane's events into at most ``limit`` time buckets per depth; each bucket is labelled by its longest
    event and says how many it holds."""
    if len(df) <= limit:
        return df.assign(count=1)
    t0, t1 = int(df["start"].min()), int(df["end"].max())
    width = max(1, (t1 - t0) // limit + 1)
    d = df.assign(_b=(df["start"] - t0) // width, _dur=df["end"] - df["start"])
    g = d.groupby(["_b", "depth"], sort=False)
    longest = d.loc[g["_dur"].idxmax()].set_index(["_b", "depth"])
    agg = g.agg(start=("start", "min"), end=("end", "max"), count=("start", "size"))
    out = agg.join(longest[["name", "raw", "family", "extra"]]).reset_index()
    many = out["count"] > 1
    out.loc[many, "name"] = (
        out.loc[many, "count"].astype(str) + " events, longest: " + out.loc[many, "name"].astype(str)
    )
    return out.drop(columns=["_b"])


def _host_lane(g: pd.DataFrame, name: pd.Series, family: str, extra: Any, depth: Any) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "start": g["start"],
            "end": g["end"],
            "name": name,
            "raw": "",
            "family": family,
            "extra": extra,
            "depth": depth,
        }
    )


def _lanes(trace: Trace) -> list[tuple[str, str, pd.DataFrame]]:
    """(label, kind, events with name/raw/family/extra/depth/start/end) from top to bottom."""
    lanes: list[tuple[str, str, pd.DataFrame]] = []
    for th, g in trace.nvtx.groupby("thread", sort=True) if not trace.nvtx.empty else ():
        ev = _host_lane(g, g["text"].astype(str), "nvtx", g["domain"].astype(str), g["depth"].clip(upper=_MAX_DEPTH))
        lanes.append((f"ranges (thread {th})", "nvtx", ev))
    for th, g in trace.ops.groupby("thread", sort=True) if not trace.ops.empty else ():
        shapes = g["shapes"].fillna("").astype(str).replace("nan", "")
        ev = _host_lane(g, g["name"].astype(str), "ops", shapes, g["depth"].clip(upper=_MAX_DEPTH))
        lanes.append((f"CPU ops (thread {th})", "ops", ev))
    for th, g in trace.api.groupby("thread", sort=True) if not trace.api.empty else ():
        ev = _host_lane(g, g["name"].astype(str), "api", "correlation " + g["correlation"].astype(str), 0)
        lanes.append((f"CUDA API (thread {th})", "api", ev))
    gpu = []
    if not trace.kernels.empty:
        k = trace.kernels
        dec = k["name"].map(decode)
        gpu.append(
            pd.DataFrame(
                {
                    "start": k["start"],
                    "end": k["end"],
                    "name": k["name"].map(kernel_labels(trace)),
                    "raw": k["name"].astype(str).str.slice(0, 400),
                    "family": dec.map(lambda d: d.family),
                    "stream": k["stream"].astype(str),
                    "extra": "grid "
                    + k["grid"].fillna("?").astype(str)
                    + ", block "
                    + k["block"].fillna("?").astype(str),
                }
            )
        )
    if not trace.memops.empty:
        m = trace.memops
        gpu.append(
            pd.DataFrame(
                {
                    "start": m["start"],
                    "end": m["end"],
                    "name": m["kind"].astype(str),
                    "raw": m["name"].astype(str),
                    "family": "memop",
                    "stream": m["stream"].astype(str),
                    "extra": m["bytes"].astype(str) + " bytes",
                }
            )
        )
    if gpu:
        g_all = pd.concat(gpu, ignore_index=True)
        for st in sorted(g_all["stream"].unique(), key=_stream_key):
            g = g_all[g_all["stream"] == st]
            lanes.append((f"GPU stream {st}", "gpu", g.drop(columns=["stream"]).assign(depth=0)))
    return lanes


def _rows(trace: Trace, max_glyphs_per_lane: int) -> tuple[pd.DataFrame, list[float], dict[float, str], float]:
    """Every box to draw (times in ns from the capture start), the lanes' tick positions and labels, and the depth
    of the lowest lane."""
    t0, _ = trace.window()
    parts = []
    ticks, labels = [], {}
    y = 0.0
    for label, kind, ev in _lanes(trace):
        ev = _bucket(ev.reset_index(drop=True), max_glyphs_per_lane)
        depth = ev["depth"].astype(float).to_numpy()
        depth_rows = int(depth.max()) + 1 if len(ev) else 1
        top = y - depth * 0.8
        fam = ev["family"].astype(str)
        group = fam.where(fam.isin(FAMILY_LABELS), kind if kind != "gpu" else "other")
        start = ev["start"].to_numpy(dtype="int64")
        end = np.maximum(ev["end"].to_numpy(dtype="int64"), start + 1)
        parts.append(
            pd.DataFrame(
                {
                    "t_start": start - t0,
                    "t_end": end - t0,
                    "top": top,
                    "bottom": top - 0.7,
                    "name": ev["name"].astype(str).to_numpy(),
                    "raw": ev["raw"].astype(str).str.slice(0, 240).to_numpy(),
                    "dur": [format_time(x * 1e-9) for x in (end - start)],
                    "extra": ev["extra"].astype(str).to_numpy(),
                    "count": ev["count"].to_numpy(),
                    "group": group.to_numpy(),
                }
            )
        )
        center = y - 0.35 - (depth_rows - 1) * 0.4
        ticks.append(center)
        labels[center] = label
        y = y - depth_rows * 0.8 - 0.5
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["t_start", "t_end", "group"])
    return rows, ticks, labels, y


def _legend_cols(labels: list[str]) -> int:
    """As many legend entries per row as fit in _LEGEND_WIDTH_PX (swatch, gap and ~7 px per character)."""
    used, n = 0, 0
    for label in labels:
        used += 14 + 6 + 7 * len(label) + 14
        if used > _LEGEND_WIDTH_PX and n:
            break
        n += 1
    return max(1, n)


def _groups_in_order(groups: pd.Series) -> list[str]:
    """Legend order: host lanes first, then kernel families by their place in FAMILY_LABELS."""
    order = ["nvtx", "ops", "api", *FAMILY_COLORS]
    present = set(groups)
    return [g for g in order if g in present]


def timeline_figure(
    trace: Trace, max_glyphs_per_lane: int = ReportOptions.max_glyphs_per_lane, title: str | None = None
) -> Any:
    """The figure; its ``height`` is the whole plot's (title, legend and axis included): what a page must give it."""
    from bokeh.models import ColumnDataSource, HoverTool, Legend, LegendItem
    from bokeh.plotting import figure

    rows, ticks, labels, y = _rows(trace, max_glyphs_per_lane)
    span = float(rows["t_end"].max() - rows["t_start"].min()) if len(rows) else 0.0
    unit, per = time_unit(span)
    groups = _groups_in_order(rows["group"]) if len(rows) else []
    legend_cols = _legend_cols([FAMILY_LABELS.get(g, g) for g in groups])
    legend_rows = -(-len(groups) // legend_cols) if groups else 0
    lanes_px = int(max(4 * _ROW_PX, min(900, (-y) * _ROW_PX)))
    height = lanes_px + _FRAME_EXTRA_PX + (20 if title else 0) + legend_rows * _LEGEND_ROW_PX
    p = figure(
        height=height,
        sizing_mode="stretch_width",
        x_axis_label=f"{unit} since capture start",
        tools="xpan,xwheel_zoom,box_zoom,reset,save",
        active_scroll="xwheel_zoom",
        title=title,
        output_backend="webgl" if len(rows) > 5000 else "canvas",
    )
    renderers, items = [], []
    for g in groups:
        sel = rows[rows["group"] == g]
        color = FAMILY_COLORS.get(g) or _LANE_COLORS.get(g, "#c7c7c7")
        src = ColumnDataSource(
            {
                "left": (sel["t_start"] / per).tolist(),
                "right": (sel["t_end"] / per).tolist(),
                **{c: sel[c].tolist() for c in ("top", "bottom", "name", "raw", "dur", "extra", "count")},
            }
        )
        r = p.quad(
            left="left",
            right="right",
            top="top",
            bottom="bottom",
            fill_color=color,
            line_color=color,
            source=src,
            fill_alpha=0.85,
            muted_alpha=0.12,
        )
        renderers.append(r)
        items.append(LegendItem(label=FAMILY_LABELS.get(g, g), renderers=[r]))
    if renderers:
        p.add_tools(HoverTool(renderers=renderers, tooltips=_TOOLTIP))
    if items:
        legend = Legend(
            items=items,
            orientation="horizontal",
            ncols=legend_cols,
            click_policy="mute",
            location="top_left",
            spacing=14,
            padding=4,
            margin=4,
            label_text_font_size="12px",
            glyph_width=14,
            glyph_height=12,
        )
        p.add_layout(legend, "above")
    p.yaxis.ticker = ticks
    p.yaxis.major_label_overrides = {float(k): v for k, v in labels.items()}
    p.ygrid.grid_line_color = None
    p.toolbar.logo = None
    return p
