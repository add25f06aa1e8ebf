"""HTML tables. Every name is escaped: kernel names are full of <, > and &.

Styles are inline on the elements, not in a ``<style>`` block: a notebook opened untrusted (after a
``git clone``) drops ``<style>`` but keeps ``style`` attributes, so the tables read the same there.
Numbers never wrap; names wrap only between tokens (after ``_``, ``,``, ``<``, ``(``, ``::`` and at
spaces), never inside a word.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from ..kernels import decode
from ..kernels.labels import distinct_labels
from ..trace.summaries import not_recorded
from ..units import format_ns

__all__ = [
    "DECODED_COLUMNS",
    "NAME_COLUMN",
    "breakable",
    "duration_table_html",
    "esc",
    "header_cells",
    "kernel_name_cell",
    "kernel_table_html",
    "kernels_left_out",
    "ns_title",
    "style",
    "table_html",
    "yes_no",
]

_LINE = "border-bottom:1px solid rgba(128,128,128,.28)"
_CELL = f"padding:2px 8px;{_LINE};vertical-align:top;"
# The elements' styles, by role. JupyterLab's own table rules (fixed layout, centred, cells that
# wrap anywhere) are what they override.
STYLES = {
    "table": "border-collapse:collapse;table-layout:auto;width:auto;max-width:100%;margin:4px "
    "0 10px 0;"
    "font-size:12.5px;line-height:1.35",
    "th": "padding:2px 8px;border-bottom:1px solid "
    "rgba(128,128,128,.55);background:rgba(128,128,128,.09);"
    "font-weight:600;text-align:right;vertical-align:bottom;white-space:nowrap",
    "th-name": "padding:2px 8px;border-bottom:1px solid "
    "rgba(128,128,128,.55);background:rgba(128,128,128,.09);"
    "font-weight:600;text-align:left;vertical-align:bottom;white-space:nowrap",
    "num": _CELL + "text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums",
    "word": _CELL + "text-align:left;white-space:nowrap",
    "name": _CELL
    + "text-align:left;white-space:normal;overflow-wrap:normal;word-break:normal;min-width:14em",
    "raw": "font-family:monospace;font-size:11.5px;"
    "white-space:normal;overflow-wrap:normal;word-break:normal;"
    "margin:2px 0 4px 0;opacity:.85",
    "stats": "margin:2px 0;font-size:12px;white-space:normal",
    "explain": "margin:1px "
    "0;padding-left:1.6em;text-indent:-0.8em;font-size:12px;white-space:normal;"
    "overflow-wrap:normal;word-break:normal",
    "summary": "cursor:pointer",
    "muted": "margin:2px 0;opacity:.75",
}


def style(role: str) -> str:
    return f"style='{STYLES[role]}'"


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def table_html(ths: str, rows: Sequence[str], css_class: str = "") -> str:
    """A table of header cells ``ths`` and body ``rows`` (each a whole ``<tr>``) in the report's
    table style: the one way every table of the report is written."""
    named = f"class='{css_class}' " if css_class else ""
    return (
        f"<table {named}{style('table')}><thead><tr>{ths}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def header_cells(columns: Iterable[tuple[str, str, str]]) -> str:
    """The header cells of (header, tooltip, role) columns; one without a tooltip shows its header
    on hover."""
    return "".join(
        f"<th {style(role)} title='{esc(tip or h)}'>{esc(h)}</th>" for h, tip, role in columns
    )


def kernels_left_out(more: int) -> str:
    """The line under a kernel table that says how many names ``--top`` left out ("" for none)."""
    if more <= 0:
        return ""
    return f"<p {style('muted')}>{more} more kernel name(s) not shown (--top).</p>"


def _text(value: object) -> str:
    """A name cell's text: missing values (None, NaN, 'nan') show empty."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    s = str(value)
    return "" if s in ("nan", "None", "NaN", "<NA>") else s


_BREAK_AFTER = re.compile(r"(?<=[_,(<])|(?<=::)")


def breakable(value: object) -> str:
    """Escaped text with a line-break opportunity (``<wbr>``) after each ``_ , ( <`` and ``::``: C++
    and generated kernel names wrap between their tokens instead of mid-word."""
    return "<wbr>".join(esc(part) for part in _BREAK_AFTER.split(_text(value)))


def ns_title(ns: object) -> str:
    try:
        return f" title='{float(ns):,.1f} ns'"  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""


def yes_no(v: bool | None) -> str:
    return "" if v is None else ("yes" if v else "no")


#: (header, tooltip, role) of a kernel's decoded name, in every kernel table.
NAME_COLUMN = (
    "Kernel",
    "decoded name: expand for the raw name and what each token means",
    "th-name",
)
#: The columns of what the decoder says of a kernel, the same in every kernel table.
DECODED_COLUMNS = [
    ("Library", "", "th-name"),
    ("Op", "", "th-name"),
    ("Tensor cores", "", "th-name"),
    ("Precision", "", "th-name"),
]
# (header, tooltip, role): the kernel table's columns. The rest of nsys' cuda_gpu_kern_sum (Med,
# Min, Max, StdDev) and the tile and layout are in each row's expanded part and in
# rep.kernel_summary().
_KERNEL_COLUMNS = [
    ("Time", "share of the kernels' GPU time (nsys Time (%))", "th"),
    ("Total", "total GPU time of this kernel", "th"),
    ("Calls", "instances", "th"),
    ("Avg", "average per call (Med, Min, Max, StdDev: expand the name)", "th"),
    NAME_COLUMN,
    *DECODED_COLUMNS,
]


_RATE_COLUMN = (
    "Rate",
    "achieved FLOP/s (GEMMs) or bytes/s, counted from the launching ops' recorded shapes, and the "
    "share of the device's peak; blank where the work cannot be counted",
    "th-name",
)


def _rate_cell(text: str) -> str:
    """'686 TFLOP/s bf16, 69% of peak' on one line as '686 TFLOP/s · 69%' (the precision is the
    table's own column), the whole sentence on hover."""
    rate, _, share = text.partition(", ")
    short = rate.split(" ")[0] + " " + rate.split(" ")[1] if rate.count(" ") >= 1 else rate
    if share:
        short += _DOT + share.split(" ")[0]
    return f"<td {style('num')} title='{esc(text)}'>{esc(short)}</td>"


_DOT = " \u00b7 "


def kernel_name_cell(
    r: pd.Series,
    label: str,
    stats: bool = True,
    fused: str | None = None,
    launch: str | None = None,
) -> str:
    """A kernel table's name cell: the label, expanding to the other statistics (``stats``), the
    tile and layout, what a generated kernel fused (``fused``: its ATen ops and graph nodes, read
    from Inductor's output code), the raw name and each token explained."""
    k = decode(r["Name"], launch)
    facts = [
        f"{label} {format_ns(r[col])}"
        for label, col in (
            ("Med", "Med (ns)"),
            ("Min", "Min (ns)"),
            ("Max", "Max (ns)"),
            ("StdDev", "StdDev (ns)"),
        )
        if stats and col in r
    ]
    facts += [f"{label} {v}" for label, v in (("tile", k.tile), ("layout", k.layout)) if v]
    explain = "".join(
        f"<div {style('explain')}><code>{breakable(t)}</code> <i>{esc(f)}</i>: {esc(m)}</div>"
        for t, f, m in k.explain()
    )
    hover = r["Name"] + (f"\n{fused}" if fused else "")
    return (
        f"<td class='gm-name' {style('name')}><details><summary {style('summary')} "
        f"title='{esc(hover)}'>"
        f"{breakable(label)}</summary>"
        + (f"<div {style('stats')}>{esc(_DOT.join(facts))}</div>" if facts else "")
        + (f"<div {style('stats')}>{esc(fused)}</div>" if fused else "")
        + f"<div {style('raw')}>{breakable(r['Name'])}</div>{explain}</details></td>"
    )


#: Decoded precisions that do not tell the dtype: the launching op's inputs say it where they were
#: recorded.
_UNTOLD = (None, "", "16-bit")


def precision_cell(decoded: str | None, from_ops: str | None) -> str:
    """The precision a name says; where it cannot tell (cuDNN's shared f16 attention kernels serve
    bf16 and fp16), the launching op's input dtype, marked and explained on hover."""
    if decoded not in _UNTOLD or not from_ops:
        return f"<td {style('word')}>{esc(decoded or '')}</td>"
    why = (
        f"from the launching op's input dtype: the kernel name does not "
        f"say{f' (it says {decoded})' if decoded else ''}"
    )
    return f"<td {style('word')} title='{esc(why)}'>{esc(from_ops)}*</td>"


def kernel_table_html(
    summary: pd.DataFrame,
    top: int = 15,
    labels: Mapping[str, str] | None = None,
    op_precisions: Mapping[str, str] | None = None,
    fused: Mapping[str, str] | None = None,
    launches: Mapping[str, str] | None = None,
    rates: Mapping[str, str] | None = None,
) -> str:
    """The kernels, longest first: share, total, calls, average (exact ns on hover), the decoded
    name (expand it for the raw name, the other statistics, what a generated kernel fused
    (``fused``) and each token explained), library, op, tensor cores, precision (from the name, else
    from the launching ops' input dtypes, ``op_precisions``, marked with *), and where any row's
    work was counted (``rates``: name -> text), its achieved rate and share of peak."""
    if summary.empty:
        unrecorded = not_recorded(summary)  # not recorded: never "no kernels"
        return f"<p {style('muted')}>{esc(unrecorded)}</p>" if unrecorded else "<p>No kernels.</p>"
    rates = rates or {}
    columns = [*_KERNEL_COLUMNS, *([_RATE_COLUMN] if rates else [])]
    rows = []
    if labels is None:  # every distinct name reads differently, even where shorts collide
        labels = distinct_labels(summary["Name"])
    launches = launches or {}
    for _, r in summary.head(top).iterrows():
        launch = launches.get(r["Name"])
        k = decode(r["Name"], launch)
        cells = [
            f"<td {style('num')}>{float(r['Time (%)']):.1f}%</td>",
            f"<td {style('num')}{ns_title(r['Total Time (ns)'])}>"
            f"{esc(format_ns(r['Total Time (ns)']))}</td>",
            f"<td {style('num')}>{int(r['Instances'])}</td>",
            f"<td {style('num')}{ns_title(r['Avg (ns)'])}>{esc(format_ns(r['Avg (ns)']))}</td>",
            kernel_name_cell(
                r, labels[r["Name"]], fused=(fused or {}).get(r["Name"]), launch=launch
            ),
        ]
        cells += [
            f"<td {style('word')}>{esc(v)}</td>" for v in (k.library, k.op, yes_no(k.tensor_cores))
        ]
        cells.append(precision_cell(k.precision, (op_precisions or {}).get(r["Name"])))
        if rates:
            cells.append(_rate_cell(rates.get(r["Name"], "")))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    table = table_html(header_cells(columns), rows, "gm-kernels")
    return table + kernels_left_out(len(summary) - top)


def duration_table_html(
    df: pd.DataFrame, top: int = 15, name_cols: Iterable[str] = ("Name",)
) -> str:
    """Any nsys-style summary: columns ending in '(ns)' shown with units, name columns left-aligned,
    escaped and wrapped between tokens, missing values empty. A summary of what its capture did not
    record says so (and how to record it) instead of "None."; a table with a column it could not
    fill (an op's GPU time without kernel records) says why below it."""
    unrecorded = not_recorded(df)
    if df is None or df.empty:
        return f"<p {style('muted')}>{esc(unrecorded) if unrecorded else 'None.'}</p>"
    name_cols = set(name_cols)
    ths = "".join(
        f"<th class='gm-name' {style('th-name')}>{esc(c)}</th>"
        if c in name_cols
        else f"<th {style('th')}>{esc(c.replace(' (ns)', ''))}</th>"
        for c in df.columns
    )
    rows = []
    for _, r in df.head(top).iterrows():
        cells = []
        for c in df.columns:
            v = r[c]
            if c in name_cols:
                cells.append(f"<td class='gm-name' {style('name')}>{breakable(v)}</td>")
            elif c.endswith("(ns)"):
                cells.append(f"<td {style('num')}{ns_title(v)}>{esc(format_ns(v))}</td>")
            elif c == "Time (%)":
                cells.append(f"<td {style('num')}>{float(v):.1f}</td>")
            elif isinstance(v, float):
                cells.append(f"<td {style('num')}>{'' if math.isnan(v) else f'{v:,.3f}'}</td>")
            else:
                cells.append(f"<td {style('num')}>{esc(_text(v))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = len(df) - top
    tail = f"<p {style('muted')}>{more} more row(s) not shown.</p>" if more > 0 else ""
    if unrecorded:
        tail += f"<p {style('muted')}>{esc(unrecorded)}</p>"
    return table_html(ths, rows) + tail
