"""The by-code sections of a report: where the GPU time went by module (a tree that opens level by
level in HTML, the top rows in text) and by line of the cell, forward and backward; or the one
sentence that says what to record where the trace cannot tell.

The tables come from ``Trace.by_module()`` and ``Trace.by_line()`` (``gpumagic.trace.code_rows``);
this module only lays them out. Each names its total ("of 8.70 ms of GPU time"), and its rows,
the outside row included, make that total.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..trace import Trace
from ..trace.by_code import attribution
from ..units import format_ns
from .tables import esc, style

__all__ = ["code_html", "code_text_lines"]

#: Rows of the module tree the text shows at most (the outside row comes on top of them).
TEXT_DEPTH = 1
_ROW = "white-space:nowrap;font-variant-numeric:tabular-nums"
_NUM = "display:inline-block;width:6.5em;text-align:right;padding-right:.6em"
_INDENT = "padding-left:1.1em"


def _unit(trace: Trace) -> str:
    return "GPU time" if trace.recorded("kernels") or not trace.kernels.empty else "CPU time"


def _sections(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The two tables, or None where there is nothing to place: no torch ops to tie work to (an
    nsys capture), or no work (an idle GPU)."""
    if trace.ops.empty or not attribution(trace).total_ns:
        return None
    return trace.by_module(), trace.by_line()


def _total(modules: pd.DataFrame) -> int:
    """The work's total: the top-level modules and the outside row (all at depth 0)."""
    return int(modules.loc[modules["depth"] == 0, "total_ns"].sum())


def _name(r: pd.Series | Mapping[str, Any]) -> str:
    """A module row's name: its dotted name where the model named it, else its own instance name
    (the tree's indentation says where it sits)."""
    if r["module"] != r["instance"] or not r["instance"]:
        return str(r["module"])
    return str(r["instance"]).rsplit(".", 1)[-1]


def _bound(r: pd.Series | Mapping[str, Any]) -> str:
    """A launch-bound module's mark: how little of its forward's span its kernels kept the GPU
    busy."""
    if not r.get("launch_bound"):
        return ""
    return (
        f"  [launch-bound: GPU busy {r['fwd_busy_ns'] / r['fwd_span_ns']:.0%} of its forward's "
        f"{format_ns(r['fwd_span_ns'])}]"
    )


def code_text_lines(trace: Trace, top: int) -> list[str]:
    """The report's text lines for the by-code view: the module tree's top levels and the lines
    (``top`` rows each, largest first where there are more), or the sentence of what is missing."""
    got = _sections(trace)
    if got is None:
        return []
    modules, lines = got
    unit = _unit(trace)
    out: list[str] = []
    if modules.empty:
        out.append(f"  By module: {modules.attrs.get('note', '')}")
    else:
        total = _total(modules)
        out.append(f"  By module, forward and backward, of {format_ns(total)} of {unit}:")
        out.append(f"    {'Share':>6}  {'Forward':>9}  {'Backward':>9}  Module")
        shown = modules[(modules["depth"] <= TEXT_DEPTH) & (modules["instance"] != "")]
        keep = set(shown.nlargest(top, "total_ns").index)
        for i, r in modules.iterrows():
            if i in keep or r["instance"] == "":
                name = _name(r) + (f": {r['why']}" if r["why"] and not r["instance"] else "")
                name += _bound(r)
                out.append(
                    f"    {r['share']:6.1%}  {format_ns(r['fwd_ns']):>9}  "
                    f"{format_ns(r['bwd_ns']):>9}  {'  ' * int(r['depth'])}{name}"
                )
    if lines.empty:
        out.append(f"  By line: {lines.attrs.get('note', '')}")
        return out
    total = int(lines["total_ns"].sum())
    head = "By line" if "note" not in lines.attrs else "By function"
    out.append(f"  {head}, its forward work and that work's backward, of {format_ns(total)}:")
    out.append(f"    {'Line':>5}  {'Share':>6}  {'Forward':>9}  {'Backward':>9}  Source")
    body = lines[lines["line"].notna()]
    keep = set(body.nlargest(top, "incl_ns").index) if len(body) > top else set(body.index)
    for i, r in lines.iterrows():
        if i in keep or (pd.isna(r["line"]) and r["total_ns"]):
            num = "" if pd.isna(r["line"]) else str(int(r["line"]))
            src = "  " * _line_depth(r) + r["source"] + (f": {r['why']}" if r["why"] else "")
            src += _with_body(r, total)
            out.append(
                f"    {num:>5}  {r['share']:6.1%}  {format_ns(r['fwd_ns']):>9}  "
                f"{format_ns(r['bwd_ns']):>9}  {src}"
            )
    if "graphs" in lines.attrs:
        out.append(f"  CUDA graphs: {lines.attrs['graphs']}")
    return out


def code_html(trace: Trace, top: int) -> str:
    """The by-code sections as collapsed ``<details>``: the module tree (each module opens to its
    children) and the line table; the sentence of what is missing where the trace cannot tell."""
    got = _sections(trace)
    if got is None:
        return ""
    modules, lines = got
    unit = _unit(trace)
    parts = []
    if modules.empty:
        body = f"<p {style('muted')}>{esc(modules.attrs.get('note', ''))}</p>"
        title = "By module (no module information)"
    else:
        title = f"By module: forward and backward, of {format_ns(_total(modules))} of {unit}"
        body = _tree_html(modules)
    parts.append(_details(title, body))
    if lines.empty:
        parts.append(
            _details(
                "By line (no line information)",
                f"<p {style('muted')}>{esc(lines.attrs.get('note', ''))}</p>",
            )
        )
    else:
        total = int(lines["total_ns"].sum())
        head = "By function" if "note" in lines.attrs else "By line"
        parts.append(_details(f"{head}: of {format_ns(total)} of {unit}", _lines_html(lines, top)))
    if "graphs" in lines.attrs:
        parts.append(f"<p {style('muted')}>CUDA graphs: {esc(lines.attrs['graphs'])}</p>")
    return "".join(parts)


def _details(title: str, body: str, open_: bool = False) -> str:
    return (
        f"<details style='margin:2px 0'{' open' if open_ else ''}><summary {style('summary')}>"
        f"{esc(title)}</summary>{body}</details>"
    )


def _cells(r: pd.Series | Mapping[str, Any]) -> str:
    title = f"{int(r['kernels']):,} kernels and memory operations"
    if r["instance"]:
        title += (
            f"; its own (children left out): forward {format_ns(r['self_fwd_ns'])}, "
            f"backward {format_ns(r['self_bwd_ns'])}"
        )
    return (
        f"<span style='{_NUM}' title='{esc(title)}'>{r['share']:.1%}</span>"
        f"<span style='{_NUM}'>{esc(format_ns(r['fwd_ns']))}</span>"
        f"<span style='{_NUM}'>{esc(format_ns(r['bwd_ns']))}</span>"
    )


def _tree_html(modules: pd.DataFrame) -> str:
    """Nested ``<details>``: a module's summary is its row, its body its children; the top level
    open. The outside row last, with what it was."""
    rows = modules.to_dict("records")
    head = (
        f"<div style='{_ROW};font-weight:600'><span style='{_NUM}'>Share</span>"
        f"<span style='{_NUM}'>Forward</span><span style='{_NUM}'>Backward</span>"
        f"<span>Module</span></div>"
    )
    out = [head]
    stack: list[int] = []
    for i, r in enumerate(rows):
        while stack and stack[-1] >= r["depth"] and r["instance"]:
            out.append("</div></details>")
            stack.pop()
        if not r["instance"]:  # the outside row: after every module
            while stack:
                out.append("</div></details>")
                stack.pop()
            out.append(
                f"<div style='{_ROW}'>{_cells(r)}<span>{esc(r['module'])}"
                f"<span style='opacity:.75'> {esc(r['why'])}</span></span></div>"
            )
            continue
        nxt = rows[i + 1] if i + 1 < len(rows) else None
        has_kids = bool(nxt and nxt["instance"] and nxt["depth"] > r["depth"])
        label = f"<span title='{esc(r['instance'])}'>{esc(_name(r))}</span>"
        if r["launch_bound"]:
            label += f"<span style='color:#b36b00' title='{esc(r['why'])}'>{esc(_bound(r))}</span>"
        if has_kids:
            out.append(
                f"<details{' open' if r['depth'] == 0 else ''}><summary style='{_ROW};"
                f"cursor:pointer'>{_cells(r)}{label}</summary><div style='{_INDENT}'>"
            )
            stack.append(int(r["depth"]))
        else:
            out.append(f"<div style='{_ROW};{_INDENT}'>{_cells(r)}{label}</div>")
    out += ["</div></details>"] * len(stack)
    return f"<div style='font-size:12.5px;margin:4px 0 10px 0'>{''.join(out)}</div>"


def _line_depth(r: pd.Series | Mapping[str, Any]) -> int:
    """How many of the cell's lines enclose this one (a loop's body is one deeper)."""
    depth = r.get("depth") if hasattr(r, "get") else None
    return int(depth) if depth is not None and depth == depth else 0


def _with_body(r: pd.Series | Mapping[str, Any], total: int) -> str:
    """'  [with its body: 91.2%, 4.1 ms]' for a line whose body ran work (a loop, a ``with``)."""
    incl, own = r.get("incl_ns"), r.get("total_ns")
    if incl is None or incl != incl or not incl > own:
        return ""
    share = incl / total if total else 0.0
    return f"  [with its body: {share:.1%}, {format_ns(int(incl))}]"


def _lines_html(lines: pd.DataFrame, top: int) -> str:
    heads = ["Line", "Source", "Share", "Forward", "Backward", "Launched", "of which backward"]
    th = "".join(f"<th {style('th-name' if h == 'Source' else 'th')}>{esc(h)}</th>" for h in heads)
    body = lines[lines["line"].notna()]
    if len(body) > max(top, 40):
        body = body.nlargest(top, "incl_ns").sort_index()
    rows = [*body.to_dict("records"), *lines[lines["line"].isna()].to_dict("records")]
    trs = []
    total = int(lines["total_ns"].sum())
    for r in rows:
        src = r["source"] + (f": {r['why']}" if r["why"] else "") + _with_body(r, total)
        num = "" if pd.isna(r["line"]) else str(int(r["line"]))
        pad = f" style='padding-left:{1.2 * _line_depth(r):.1f}em'" if _line_depth(r) else ""
        trs.append(
            f"<tr><td {style('num')}>{num}</td>"
            f"<td class='gm-name' {style('name')}><code{pad}>{esc(src)}</code></td>"
            + "".join(
                f"<td {style('num')}>{esc(v)}</td>"
                for v in (
                    f"{r['share']:.1%}",
                    format_ns(r["fwd_ns"]),
                    format_ns(r["bwd_ns"]),
                    format_ns(r["launched_ns"]),
                    format_ns(r["launched_bwd_ns"]),
                )
            )
            + "</tr>"
        )
    note = f"<p {style('muted')}>{esc(lines.attrs['note'])}</p>" if "note" in lines.attrs else ""
    return f"{note}<table {style('table')}><tr>{th}</tr>{''.join(trs)}</table>"
