"""The report's "What the silicon says" section (``--counters``): per heavy kernel, its sampled
counters as shares of their peaks and one verdict (``analysis/counters.py``), the kernel named as
the kernel table names it."""

from __future__ import annotations

import math

import pandas as pd

from ..analysis.counters import code_counters, counters_table
from ..analysis.finding import kernel_labels
from ..trace import Trace
from .tables import esc, style, table_html

__all__ = ["counters_html", "counters_text_lines"]

_SHOWN = [
    ("Time (%)", "Time %"),
    ("SM Active (%)", "SMs active"),
    ("SM Issue (%)", "SM issue"),
    ("Tensor Active (%)", "Tensor"),
    ("DRAM Read (%)", "DRAM read"),
    ("DRAM Write (%)", "DRAM write"),
]
_H4 = "style='margin:10px 0 2px 0;font-size:14px'"


#: Rows of the by-module and by-line tables.
CODE_ROWS = 8


def _period(trace: Trace, short: bool = False) -> str:
    """'every 100 µs, metric set gh100' (``short``) or with the set's name after its alias."""
    period = trace.meta.get("counters_period_ns")
    text = f"every {period / 1000:.0f} µs" if period else "periodically"
    chosen = str(trace.meta.get("counters_set") or "")
    if short:
        chosen = chosen.split(":", 1)[0]
    return f"{text}, metric set {chosen}" if chosen else text


def _cell(value: float | None) -> str:
    return (
        "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.0f}"
    )


def counters_html(trace: Trace, top: int) -> str:
    """The section's HTML: a heading that says how the counters were sampled, then one row per
    kernel name, heaviest first."""
    table = counters_table(trace, top)
    if table.empty:
        return ""
    labels = kernel_labels(trace)
    names = [str(n) for n in table["Name"]]
    heads = [
        f"<div>{esc(labels.get(n, n))}</div>" for n in names
    ]  # the kernel as the kernel table names it, its raw name on hover
    return (
        f"<h4 {_H4} title='{esc(_period(trace))}'>What the silicon says (% of peak; GPU "
        f"metrics sampled {_period(trace, short=True)})</h4>"
        + _rows_html(table, "Kernel", heads, names)
        + _code_html(code_counters(trace, "module", CODE_ROWS), "Module", "By module")
        + _code_html(code_counters(trace, "line", CODE_ROWS), "Line", "By line")
    )


def _code_html(table: pd.DataFrame, first: str, title: str) -> str:
    """One by-code table: the module or line and its pass, its verdict under it, its counters."""
    if table.empty:
        return ""
    heads = [
        f"<div>{esc(r[first])} <span style='opacity:.7'>{esc(r['Pass'])}</span></div>"
        for _, r in table.iterrows()
    ]
    return (
        f"<h4 {_H4}>{esc(title)} (its kernels and, for a module, its children's)</h4>"
        + _rows_html(table, first, heads)
    )


def _rows_html(
    table: pd.DataFrame, first: str, heads: list[str], titles: list[str] | None = None
) -> str:
    """A counters table: Time %, then ``first`` with each row's ``heads`` HTML and its verdict
    under it (``titles``: a hover text per row), then the counters as shares of peak."""
    th = f"<th {style('th')}>Time %</th><th {style('th-name')}>{esc(first)}: verdict</th>"
    th += "".join(f"<th {style('th')}>{esc(h)}</th>" for c, h in _SHOWN if c != "Time (%)")
    rows = []
    for i, (_, r) in enumerate(table.iterrows()):
        title = f" title='{esc(titles[i])}'" if titles else ""
        cells = f"<td {style('num')}>{_cell(r['Time (%)'])}</td>"
        cells += (
            f"<td {style('name')}{title}>{heads[i]}"
            f"<div style='font-size:12px;opacity:.8'>{esc(r['Verdict'])}</div></td>"
        )
        cells += "".join(
            f"<td {style('num')}>{_cell(r[c])}</td>" for c, _ in _SHOWN if c != "Time (%)"
        )
        rows.append(f"<tr>{cells}</tr>")
    return table_html(th, rows)


def counters_text_lines(trace: Trace, top: int) -> list[str]:
    """The section as terminal lines: one verdict per heavy kernel."""
    table = counters_table(trace, top)
    if table.empty:
        return []
    labels = kernel_labels(trace)
    lines = [f"  What the silicon says (GPU metrics sampled {_period(trace)}):"]
    for _, r in table.iterrows():
        name = str(r["Name"])
        lines.append(f"  {r['Time (%)']:6.1f}%  {labels.get(name, name)}: {r['Verdict']}")
    for by, first in (("module", "Module"), ("line", "Line")):
        code = code_counters(trace, by, 5)
        if len(code):
            lines.append(f"  By {by}:")
            lines += [
                f"  {r['Time (%)']:6.1f}%  {r[first]} {r['Pass']}: {r['Verdict']}"
                for _, r in code.iterrows()
            ]
    return lines
