"""HTML tables. Every name is escaped: kernel names are full of <, > and &."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

import pandas as pd

from ..kernels import decode
from ..units import format_time

__all__ = ["TABLE_CSS", "duration_table_html", "esc", "kernel_table_html"]

TABLE_CSS = """
.gm-report{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:13px;line-height:1.35}
.gm-report table{border-collapse:collapse;margin:4px 0 10px 0}
.gm-report th,.gm-report td{padding:2px 8px;border-bottom:1px solid #e4e4e4;text-align:right;vertical-align:top}
.gm-report th{background:#f6f6f6;font-weight:600;white-space:nowrap}
.gm-report td{white-space:nowrap}
.gm-report td.gm-name,.gm-report th.gm-name{text-align:left;max-width:46em;overflow-wrap:anywhere;white-space:normal}
.gm-report .gm-summary{font-weight:600;margin:4px 0}
.gm-report .gm-finding{margin:2px 0}
.gm-report .gm-warn::before{content:"\\26a0\\fe0f  "}
.gm-report .gm-error{color:#b00020}
.gm-report .gm-error::before{content:"\\26d4  "}
.gm-report .gm-info::before{content:"\\2139\\fe0f  "}
.gm-report details>summary{cursor:pointer}
.gm-report code{font-size:12px}
.gm-report h4{margin:10px 0 2px 0}
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _t(ns: float) -> str:
    try:
        return format_time(float(ns) * 1e-9)
    except (TypeError, ValueError):
        return ""


def _yes_no(v: bool | None) -> str:
    return {True: "yes", False: "no"}.get(v, "")


def kernel_table_html(summary: pd.DataFrame, top: int = 15) -> str:
    """nsys' cuda_gpu_kern_sum columns (times shown with units, exact ns on hover) plus each name decoded."""
    if summary.empty:
        return "<p>No kernels.</p>"
    head = [
        "Time (%)",
        "Total",
        "Instances",
        "Avg",
        "Med",
        "Min",
        "Max",
        "StdDev",
        "Kernel",
        "Library",
        "Op",
        "Tensor cores",
        "Precision",
        "Tile",
        "Layout",
    ]
    rows = []
    for _, r in summary.head(top).iterrows():
        k = decode(r["Name"])
        explain = "".join(
            f"<tr><td class='gm-name'><code>{esc(t)}</code></td><td class='gm-name'>{esc(f)}</td>"
            f"<td class='gm-name'>{esc(m)}</td></tr>"
            for t, f, m in k.explain()
        )
        name_cell = (
            f"<details><summary title='{esc(r['Name'])}'>{esc(k.short)}</summary>"
            f"<div><code>{esc(r['Name'])}</code></div><table>{explain}</table></details>"
        )
        times = [
            r["Total Time (ns)"],
            None,
            r["Avg (ns)"],
            r["Med (ns)"],
            r["Min (ns)"],
            r["Max (ns)"],
            r["StdDev (ns)"],
        ]
        cells = [f"<td>{r['Time (%)']:.1f}</td>"]
        for i, v in enumerate(times):
            if i == 1:
                cells.append(f"<td>{int(r['Instances'])}</td>")
            else:
                cells.append(f"<td title='{float(v):,.1f} ns'>{esc(_t(v))}</td>")
        cells.append(f"<td class='gm-name'>{name_cell}</td>")
        for v in (k.library, k.op, _yes_no(k.tensor_cores), k.precision, k.tile, k.layout):
            cells.append(f"<td class='gm-name'>{esc(v)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = len(summary) - top
    tail = f"<p>{more} more kernel name(s) not shown (--top).</p>" if more > 0 else ""
    ths = "".join(
        f"<th class='gm-name'>{esc(h)}</th>"
        if h in ("Kernel", "Library", "Op", "Tensor cores", "Precision", "Tile", "Layout")
        else f"<th>{esc(h)}</th>"
        for h in head
    )
    return f"<table><thead><tr>{ths}</tr></thead><tbody>{''.join(rows)}</tbody></table>{tail}"


def duration_table_html(df: pd.DataFrame, top: int = 15, name_cols: Iterable[str] = ("Name",)) -> str:
    """Any nsys-style summary: columns ending in '(ns)' shown with units, name columns left-aligned and escaped."""
    if df is None or df.empty:
        return "<p>None.</p>"
    name_cols = set(name_cols)
    ths = "".join(
        f"<th class='gm-name'>{esc(c)}</th>" if c in name_cols else f"<th>{esc(c.replace(' (ns)', ''))}</th>"
        for c in df.columns
    )
    rows = []
    for _, r in df.head(top).iterrows():
        cells = []
        for c in df.columns:
            v = r[c]
            if c in name_cols:
                cells.append(f"<td class='gm-name'>{esc(v)}</td>")
            elif c.endswith("(ns)"):
                cells.append(f"<td title='{float(v):,.1f} ns'>{esc(_t(v))}</td>")
            elif c == "Time (%)":
                cells.append(f"<td>{float(v):.1f}</td>")
            elif isinstance(v, float):
                cells.append(f"<td>{v:,.3f}</td>")
            else:
                cells.append(f"<td>{esc(v)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = len(df) - top
    tail = f"<p>{more} more row(s) not shown.</p>" if more > 0 else ""
    return f"<table><thead><tr>{ths}</tr></thead><tbody>{''.join(rows)}</tbody></table>{tail}"
