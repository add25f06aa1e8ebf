"""The Bokeh timeline: one lane per NVTX/range thread, CPU thread (torch ops), CUDA API thread and GPU stream.

Large traces stay usable and the output small: beyond ``max_glyphs_per_lane`` events, a lane's events are merged
into time buckets (each box says how many events it holds), and WebGL draws when there are many glyphs. Raw events
never reach the browser (Chrome and Perfetto fail on trace JSON over about 1 GB).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..kernels import decode
from ..trace import Trace
from ..units import format_time
from .options import ReportOptions

__all__ = ["FAMILY_COLORS", "timeline_figure", "timeline_html"]

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
    "memop": "#7f7f7f",
    "other": "#c7c7c7",
}
_LANE_COLORS = {"nvtx": "#c5b0d5", "ops": "#aec7e8", "api": "#ffbb78"}
_MAX_DEPTH = 6


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


def _lanes(trace: Trace) -> list[tuple[str, str, pd.DataFrame]]:
    """(label, kind, events with name/raw/family/extra/depth/start/end) from top to bottom."""
    lanes: list[tuple[str, str, pd.DataFrame]] = []
    if not trace.nvtx.empty:
        for th, g in trace.nvtx.groupby("thread", sort=True):
            lanes.append(
                (
                    f"ranges (thread {th})",
                    "nvtx",
                    pd.DataFrame(
                        {
                            "start": g["start"],
                            "end": g["end"],
                            "name": g["text"].astype(str),
                            "raw": "",
                            "family": "nvtx",
                            "extra": g["domain"].astype(str),
                            "depth": g["depth"].clip(upper=_MAX_DEPTH),
                        }
                    ),
                )
            )
    if not trace.ops.empty:
        for th, g in trace.ops.groupby("thread", sort=True):
            lanes.append(
                (
                    f"CPU ops (thread {th})",
                    "ops",
                    pd.DataFrame(
                        {
                            "start": g["start"],
                            "end": g["end"],
                            "name": g["name"].astype(str),
                            "raw": "",
                            "family": "ops",
                            "extra": g["shapes"].fillna("").astype(str),
                            "depth": g["depth"].clip(upper=_MAX_DEPTH),
                        }
                    ),
                )
            )
    if not trace.api.empty:
        for th, g in trace.api.groupby("thread", sort=True):
            lanes.append(
                (
                    f"CUDA API (thread {th})",
                    "api",
                    pd.DataFrame(
                        {
                            "start": g["start"],
                            "end": g["end"],
                            "name": g["name"].astype(str),
                            "raw": "",
                            "family": "api",
                            "extra": "correlation " + g["correlation"].astype(str),
                            "depth": 0,
                        }
                    ),
                )
            )
    gpu = []
    if not trace.kernels.empty:
        k = trace.kernels
        dec = k["name"].map(decode)
        gpu.append(
            pd.DataFrame(
                {
                    "start": k["start"],
                    "end": k["end"],
                    "name": dec.map(lambda d: d.short),
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
        for st, g in g_all.groupby("stream", sort=True):
            lanes.append((f"GPU stream {st}", "gpu", g.drop(columns=["stream"]).assign(depth=0)))
    return lanes


def timeline_figure(
    trace: Trace, max_glyphs_per_lane: int = ReportOptions.max_glyphs_per_lane, title: str | None = None
) -> Any:
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure

    lanes = _lanes(trace)
    t0, _ = trace.window()
    parts = []
    ticks, labels = [], {}
    y = 0.0
    for label, kind, ev in lanes:
        ev = _bucket(ev.reset_index(drop=True), max_glyphs_per_lane)
        depth = ev["depth"].astype(float).to_numpy()
        depth_rows = int(depth.max()) + 1 if len(ev) else 1
        top = y - depth * 0.8
        fam = ev["family"].astype(str)
        color = fam.map(FAMILY_COLORS).fillna(fam.map(_LANE_COLORS)).fillna(_LANE_COLORS.get(kind, "#c7c7c7"))
        start = ev["start"].to_numpy(dtype="int64")
        end = np.maximum(ev["end"].to_numpy(dtype="int64"), start + 1)
        parts.append(
            pd.DataFrame(
                {
                    "left": (start - t0) / 1e6,
                    "right": (end - t0) / 1e6,
                    "top": top,
                    "bottom": top - 0.7,
                    "name": ev["name"].astype(str).to_numpy(),
                    "raw": ev["raw"].astype(str).str.slice(0, 240).to_numpy(),
                    "dur": [format_time(x * 1e-9) for x in (end - start)],
                    "extra": ev["extra"].astype(str).to_numpy(),
                    "count": ev["count"].to_numpy(),
                    "color": color.to_numpy(),
                }
            )
        )
        center = y - 0.35 - (depth_rows - 1) * 0.4
        ticks.append(center)
        labels[center] = label
        y = y - depth_rows * 0.8 - 0.5
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    n = len(rows)
    height = int(max(160, min(900, 60 + (-y) * 28)))
    p = figure(
        height=height,
        sizing_mode="stretch_width",
        x_axis_label="ms since capture start",
        tools="xpan,xwheel_zoom,box_zoom,reset,save",
        active_scroll="xwheel_zoom",
        title=title,
        output_backend="webgl" if n > 5000 else "canvas",
    )
    src = ColumnDataSource(
        rows.to_dict("list")
        if n
        else {k: [] for k in ("left", "right", "top", "bottom", "color", "name", "raw", "dur", "extra", "count")}
    )
    r = p.quad(
        left="left",
        right="right",
        top="top",
        bottom="bottom",
        fill_color="color",
        line_color="color",
        source=src,
        fill_alpha=0.85,
    )
    p.add_tools(
        HoverTool(
            renderers=[r],
            tooltips=[
                ("name", "@name"),
                ("raw", "@raw"),
                ("duration", "@dur"),
                ("detail", "@extra"),
                ("events", "@count"),
            ],
        )
    )
    p.yaxis.ticker = ticks
    p.yaxis.major_label_overrides = {float(k): v for k, v in labels.items()}
    p.ygrid.grid_line_color = None
    p.toolbar.logo = None
    return p


def timeline_html(
    trace: Trace, max_glyphs_per_lane: int = ReportOptions.max_glyphs_per_lane, title: str = "gpumagic timeline"
) -> str:
    """A standalone HTML page with the timeline, BokehJS inlined (GPU boxes are often offline)."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    fig = timeline_figure(trace, max_glyphs_per_lane)
    return file_html(fig, INLINE, title)  # file_html inlines only the bundles the figure needs
