"""Where the GPU time moved between two runs: a waterfall from A's GPU busy time to B's.

The first bar is A's GPU busy time; then each of the largest changes, largest first, as a step from
where the previous one ended (red: B spends more there, green: less); the rest in one step; the last
bar is B's GPU busy time. The steps reconcile (the diff's rows add up to the difference in GPU
busy), so the last step lands exactly on B. No torch import; Bokeh loads on first use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..edges import BokehModel
from .compare_plot import time_unit

__all__ = ["LESS", "MORE", "waterfall_figure", "waterfall_html", "waterfall_rows"]

MORE, LESS, TOTAL = "#d62728", "#2ca02c", "#7f7f7f"
_TOOLTIP = """
<div style='max-width:min(460px,80vw);white-space:normal;font-size:12px'>
<b>@label</b><br>@text</div>
"""


def waterfall_rows(
    busy_a: int, busy_b: int, steps: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], str]:
    """The waterfall's bars in the unit that fits (``left``, ``right``, ``color``, ``text``,
    ``end``, ``label``): A's busy time, one step per entry of ``steps`` (keys: label, delta_ns,
    text) from where the last one ended, B's busy time; and the unit's name."""
    factor, unit = time_unit(max(busy_a, busy_b, 1) * 1e-9)
    scale = factor * 1e-9
    rows = [
        {
            "label": "GPU busy, A",
            "left": 0.0,
            "right": busy_a * scale,
            "color": TOTAL,
            "text": "",
            "end": "",
        }
    ]
    level = busy_a
    for s in steps:
        d = int(s["delta_ns"])
        lo, hi = sorted((level, level + d))
        sign = "+" if d > 0 else "\u2212"
        rows.append(
            {
                "label": str(s["label"]),
                "left": lo * scale,
                "right": hi * scale,
                "color": MORE if d > 0 else LESS,
                "text": str(s.get("text", "")),
                "end": f"{sign}{abs(d) * scale:.3g} {unit}",
            }
        )
        level += d
    rows.append(
        {
            "label": "GPU busy, B",
            "left": 0.0,
            "right": busy_b * scale,
            "color": TOTAL,
            "text": "",
            "end": "",
        }
    )
    rows[0]["end"] = f"{busy_a * scale:.3g} {unit}"
    rows[-1]["end"] = f"{busy_b * scale:.3g} {unit}"
    for row, label in zip(rows, _unique([str(r["label"]) for r in rows])):
        row["label"] = label
    return rows, unit


def waterfall_html(busy_a: int, busy_b: int, steps: Sequence[Mapping[str, Any]]) -> str:
    """The same waterfall as plain HTML bars: what ``%%gpuprofile --vs`` shows under its report,
    where a second Bokeh document would cost more than the whole diff (about 0.1 s to build and
    embed)."""
    from .tables import esc

    rows, _ = waterfall_rows(busy_a, busy_b, steps)
    top = max(max(r["right"] for r in rows), 1e-12)
    body = []
    for r in rows:
        left, width = 100 * r["left"] / top, max(100 * (r["right"] - r["left"]) / top, 0.3)
        bar = (
            f"<div style='position:relative;height:12px;background:#f4f4f4'><div "
            f"title='{esc(r['text'] or r['end'])}' "
            f"style='position:absolute;left:{left:.2f}%;width:{width:.2f}%;height:100%;background:{r['color']}'>"
            "</div></div>"
        )
        body.append(
            f"<tr><td style='padding:1px 8px 1px "
            f"0;white-space:nowrap;max-width:28em;overflow:hidden;"
            f"text-overflow:ellipsis' title='{esc(r['label'])}'>{esc(r['label'])}</td>"
            f"<td style='width:55%;padding:1px 0'>{bar}</td>"
            f"<td style='padding:1px 0 1px "
            f"8px;white-space:nowrap;text-align:right'>{esc(r['end'])}</td></tr>"
        )
    return (
        "<div style='margin:6px 0 2px 0;font-weight:600;font-size:12px'>Where the GPU time "
        "moved</div>"
        f"<table style='border-collapse:collapse;width:100%;font-size:12px'>{''.join(body)}</table>"
    )


def waterfall_figure(
    busy_a: int,
    busy_b: int,
    steps: Sequence[Mapping[str, Any]],
    title: str = "Where the GPU time moved",
) -> BokehModel:
    """A Bokeh figure: A's busy time, one step per entry of ``steps`` (keys: label, delta_ns, text),
    B's busy."""
    from bokeh.models import NumeralTickFormatter

    from .bar_chart import bar_chart

    rows, unit = waterfall_rows(busy_a, busy_b, steps)
    labels = [r["label"] for r in rows]
    data = {k: [r[k] for r in rows] for k in ("left", "right", "color", "text", "end")}
    data["label"] = labels
    data["at"] = [max(r["left"], r["right"]) for r in rows]
    p, _ = bar_chart(
        data,
        title=title,
        x_label=f"GPU time [{unit}]",
        tooltip=_TOOLTIP,
        sizes=(70, 26),
        label_room=1.22,
        left="left",
        label_at="at",
    )
    p.xaxis.formatter = NumeralTickFormatter(format="0.[00]")
    p.yaxis.major_label_text_font_size = "11px"
    return p


def _unique(labels: list[str]) -> list[str]:
    """Category labels must differ: a repeated one gets a counter."""
    seen: dict[str, int] = {}
    out = []
    for lbl in labels:
        short = lbl if len(lbl) <= 60 else lbl[:59] + "\u2026"
        n = seen.get(short, 0)
        seen[short] = n + 1
        out.append(short if not n else f"{short} ({n + 1})")
    return out
