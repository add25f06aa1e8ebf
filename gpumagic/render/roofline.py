"""The Bokeh roofline: each profiled kernel a point (arithmetic intensity, achieved FLOP/s), the
device's ceilings as lines (the DRAM bandwidth slope, a flat roof per precision).

The ceilings are the ones the report states (ncu's peak metrics at the clocks it ran at,
``capture/ncu/read.py``), not a datasheet's: a point is read against what the chip could do at that
moment. Where the report counted tensor-core work (``capture/ncu/tensor.py``), a kernel is placed by
its total FLOP/s, tensor cores included, and the dense tensor roof of each precision some kernel
used is drawn beside the FFMA-path ones (a bf16 GEMM then sits under the bf16 tensor roof, far above
the fp32 one, where ncu's plain roofline would show only its epilogue near the floor). An int8
GEMM's work is integer ops, not FLOPs: it is placed by its tensor-core OP/s and OP per DRAM byte
under the int8 tensor roof (in OP/s), its hover saying so, and the y axis reads "FLOP/s or OP/s"
where one is drawn. Both axes are logarithmic; a kernel without counted work (a copy; a tensor-core
kernel in a report without the tensor counters) has no place on them, so it sits on the bottom-left
edge as a cross, its hover saying why: every profiled kernel is one glyph.

:func:`calls_figure` draws timed calls (``device_peaks.view.roofline``) the same way, under
datasheet ceilings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..edges import BokehModel
from ..units import format_si, format_time
from .xy_figure import xy_figure

__all__ = ["LIMITER_COLORS", "calls_figure", "roofline_figure"]

LIMITER_COLORS = {
    "compute": "#d62728",
    "memory": "#1f77b4",
    "balanced": "#9467bd",
    "latency": "#ff7f0e",
    None: "#777",
}
_ROOF_COLORS = {
    "fp32": "#2ca02c",
    "fp64": "#8c564b",
    "fp16": "#bcbd22",
    "bf16 tensor": "#e377c2",
    "fp16 tensor": "#17becf",
    "tf32 tensor": "#ff7f0e",
    "fp8 tensor": "#9467bd",
    "fp64 tensor": "#7f7f7f",
    "int8 tensor": "#aec7e8",
}
_INT8 = "tensor int8 OP/s"
_TOOLTIP = """
<div style='max-width:min(520px,80vw);white-space:normal;overflow-wrap:anywhere;font-size:12px'>
<b>@label</b><br>@name<br>@duration &middot; SM @sm% &middot; memory @mem%<br>
@flops_text &middot; @ai_text<br>@limiter_text{math}</div>
"""


def _int8_rows(kernels: pd.DataFrame) -> pd.Series:
    """Kernels whose work is int8 tensor-core ops and no floating-point FLOPs: placed by their
    OP/s."""
    if _INT8 not in kernels:
        return pd.Series(False, index=kernels.index)
    ops = kernels[_INT8].astype(float).fillna(0.0)
    return (ops > 0) & ~(kernels["FLOP/s"].astype(float).fillna(0.0) > 0)


def _rates(kernels: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series]:
    """(y: FLOP/s, or OP/s for an int8 GEMM; x: work per DRAM byte; which rows are int8)."""
    int8 = _int8_rows(kernels)
    flops = (
        kernels["FLOP/s"]
        .astype(float)
        .where(~int8, kernels.get(_INT8, pd.Series(0.0, index=kernels.index)))
    )
    ai = kernels["Intensity (FLOP/B)"].astype(float)
    if int8.any() and "DRAM bytes/s" in kernels:
        bw = kernels["DRAM bytes/s"].astype(float)
        ai = ai.where(~int8, flops / bw.where(bw > 0))
    return flops.astype(float), ai.astype(float), int8


def _points(kernels: pd.DataFrame, labels: Mapping[str, str] | None) -> dict[str, list[Any]]:
    flops, ai, int8 = _rates(kernels)
    placed = (flops > 0) & (ai > 0)
    x_floor = float(ai[placed].min() / 10) if placed.any() else 0.01
    y_floor = float(flops[placed].min() / 10) if placed.any() else 1e9
    data: dict[str, list[Any]] = {
        k: [] for k in ("x", "y", "label", "name", "duration", "sm", "mem")
    }
    data.update(
        {k: [] for k in ("flops_text", "ai_text", "limiter_text", "math_text", "color", "marker")}
    )
    tensor = "Tensor FLOP/s" in kernels
    nothing = "no FLOPs counted" if tensor else "no FP32/FP64/FP16 FLOPs counted"
    for i, r in kernels.iterrows():
        on = bool(placed[i])
        data["x"].append(float(ai[i]) if on else x_floor)
        data["y"].append(float(flops[i]) if on else y_floor)
        name = str(r["Name"])
        data["label"].append((labels or {}).get(name, name[:80]))
        data["name"].append(name)
        data["duration"].append(format_time(float(r["Duration (ns)"]) * 1e-9))
        data["sm"].append(f"{r['SM %']:.0f}")
        data["mem"].append(f"{r['Memory %']:.0f}")
        if on and int8[i]:
            data["flops_text"].append(
                f"{format_si(float(flops[i]), 'OP/s')} int8 on the tensor cores (integer ops)"
            )
            data["ai_text"].append(f"{ai[i]:.3g} OP/byte (DRAM)")
        else:
            data["flops_text"].append(_flops_text(r) if on else nothing)
            data["ai_text"].append(f"{ai[i]:.3g} FLOP/byte (DRAM)" if on else "intensity n/a")
        limiter = r.get("Limiter")
        data["limiter_text"].append(
            f"limiter: {limiter}" if isinstance(limiter, str) else "limiter: n/a"
        )
        data["math_text"].append(_math_text(r))
        data["color"].append(LIMITER_COLORS.get(limiter if isinstance(limiter, str) else None))
        data["marker"].append("circle" if on else "x")
    return data


def _flops_text(r: pd.Series) -> str:
    """The total FLOP/s, and the tensor cores' part of it where they did some."""
    text = format_si(float(r["FLOP/s"]), "FLOP/s")
    tensor = r.get("Tensor FLOP/s")
    if isinstance(tensor, float) and tensor > 0:
        text += f" ({format_si(tensor, 'FLOP/s')} on the tensor cores)"
    return text


def _math_text(r: pd.Series) -> str:
    math_, pct = r.get("Math"), r.get("Peak %")
    if not isinstance(math_, str):
        return ""
    return f"main math: {math_}" + (
        f", {pct:.0f}% of its peak" if isinstance(pct, float) and pct == pct else ""
    )


def _used_roofs(kernels: pd.DataFrame, ceilings: Mapping[str, float]) -> dict[str, float]:
    """The FFMA-path roofs the report states, and the tensor roofs of the precisions some kernel ran
    on (a roof per tensor precision the chip has would bury the chart in lines)."""
    roofs = {}
    for key, peak in ceilings.items():
        if key not in _ROOF_COLORS or not peak > 0:
            continue
        if key.endswith(" tensor"):
            col = _INT8 if key == "int8 tensor" else f"tensor {key.split()[0]} FLOP/s"
            if col not in kernels or not (kernels[col].astype(float) > 0).any():
                continue
        roofs[key] = peak
    return roofs


def roofline_figure(
    kernels: pd.DataFrame,
    ceilings: Mapping[str, float],
    title: str = "Roofline",
    labels: Mapping[str, str] | None = None,
) -> BokehModel:
    """A Bokeh figure: one glyph per row of ``kernels`` (``ncu_read.kernel_figures`` columns), the
    ``ceilings`` (``fp32``/``fp64``/``fp16`` FLOP/s; ``bf16 tensor`` ... where some kernel used that
    precision's tensor cores; ``dram`` bytes/s) as lines. ``labels`` maps a raw name to its short
    label."""
    from bokeh.models import HoverTool

    data = _points(kernels, labels)
    any_int8 = bool(_int8_rows(kernels).any())
    p = _frame(
        data["x"],
        data["y"],
        _used_roofs(kernels, ceilings),
        ceilings.get("dram"),
        title,
        "Arithmetic intensity [FLOP/byte of DRAM traffic]"
        + (" (int8: OP/byte)" if any_int8 else ""),
        "Performance [FLOP/s]" + (" (int8: OP/s)" if any_int8 else ""),
    )
    glyphs = _scatter(p, data)
    tooltip = _TOOLTIP.replace("{math}", "<br>@math_text" if "Math" in kernels else "")
    p.add_tools(HoverTool(renderers=[glyphs], tooltips=tooltip))
    return p


def _compact(values: list[float]) -> list[float]:
    """Positions to 6 significant digits: a figure's JSON carries what the eye can tell apart, not
    17 digits."""
    return [float(f"{v:.6g}") for v in values]


def _frame(
    xs_in: list[float],
    ys_in: list[float],
    roofs: Mapping[str, float],
    dram: float | None,
    title: str,
    x_label: str,
    y_label: str,
) -> BokehModel:
    """The log-log axes, the DRAM slope and a flat roof per entry of ``roofs`` (name -> FLOP/s or
    OP/s)."""
    from bokeh.models import Range1d

    xs = [x for x in xs_in if x > 0] or [1.0]
    ys = [y for y in ys_in if y > 0] or [1e12]
    ridges = [p / dram for p in roofs.values()] if dram else []
    x0, x1 = min(xs + ridges) / 4, max(xs + ridges) * 4
    y0, y1 = min(ys) / 4, max(ys + list(roofs.values())) * 2
    x0, x1, y0, y1 = _compact([x0, x1, y0, y1])
    p = xy_figure(
        title=title,
        x_label=x_label,
        y_label=y_label,
        height=380,
        log_x=True,
        log_y=True,
        x_range=Range1d(start=x0, end=x1),
        y_range=Range1d(start=y0, end=y1),
    )
    if dram:
        top = max(roofs.values()) if roofs else y1
        label = f"DRAM {format_si(dram, 'B/s')}"
        p.line(
            _compact([x0, top / dram]),
            [*_compact([dram * x0]), top],
            line_color="#444",
            line_width=2,
            legend_label=label,
        )
    for key, peak in roofs.items():
        start = peak / dram if dram else x0
        p.line(
            _compact([start, x1]),
            [peak, peak],  # the ceiling exactly as the report or the datasheet states it
            line_color=_ROOF_COLORS.get(key, "#555"),
            line_width=2,
            legend_label=f"{key} {format_si(peak, 'OP/s' if key.startswith('int') else 'FLOP/s')}",
        )
    p.legend.location = "bottom_right"
    p.legend.label_text_font_size = "11px"
    return p


def _scatter(p: BokehModel, data: dict[str, list[Any]]) -> BokehModel:
    from bokeh.models import ColumnDataSource

    data = {**data, "x": _compact(data["x"]), "y": _compact(data["y"])}
    return p.scatter(
        "x",
        "y",
        source=ColumnDataSource(data),
        size=11,
        color="color",
        marker="marker",
        line_color="#222",
        alpha=0.9,
    )


_CALL_TOOLTIP = """
<div style='max-width:min(520px,80vw);white-space:normal;overflow-wrap:anywhere;font-size:12px'>
<b>@label</b><br>@rate_text &middot; @ai_text<br>@share_text<br>@limiter_text</div>
"""


def calls_figure(
    points: Mapping[str, list[Any]],
    roofs: Mapping[str, float],
    dram: float | None,
    title: str = "Roofline",
) -> BokehModel:
    """A Bokeh roofline of timed calls (``device_peaks.view.roofline``): ``points`` columns ``x``
    (FLOP per byte), ``y`` (FLOP/s), ``label``, ``rate_text``, ``ai_text``, ``share_text``,
    ``limiter_text``, ``limiter`` (a key of :data:`LIMITER_COLORS`, or None); ``roofs``: name ->
    FLOP/s; ``dram``: bytes/s (the slope), or None."""
    from bokeh.models import HoverTool

    p = _frame(
        list(points["x"]),
        list(points["y"]),
        roofs,
        dram,
        title,
        "Arithmetic intensity [FLOP/byte, counted]",
        "Performance [FLOP/s]",
    )
    data = {k: list(v) for k, v in points.items() if k != "limiter"}
    data["color"] = [LIMITER_COLORS.get(x, LIMITER_COLORS[None]) for x in points["limiter"]]
    data["marker"] = ["circle"] * len(data["x"])
    glyphs = _scatter(p, data)
    p.add_tools(HoverTool(renderers=[glyphs], tooltips=_CALL_TOOLTIP))
    return p
