"""ProfileDiff: two runs compared, as a result object: the text for a terminal, HTML with the
waterfall of where the GPU time moved for a notebook (BokehJS once, through the report carrier),
``to_dataframe()`` for the rows.

Top to bottom: one line (GPU busy A -> B, the change and the ratio); what differs between the runs'
setups, first, because it may explain everything below; the largest changes, a sentence each; the
figures side by side; the figure; the kernel rows (their sum, said under the table, is the change in
GPU busy); the launching ops where both runs recorded them.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..analysis.diff import DiffData
from ..analysis.diff_text import MEMOP_NOUN, row_labels
from ..edges import BokehModel
from ..units import format_ns
from .figure_page import FigurePage
from .tables import esc, ns_title, style

__all__ = ["ProfileDiff"]

_ROOT = (
    'font-family:system-ui,-apple-system,"Segoe '
    'UI",Roboto,sans-serif;font-size:13px;line-height:1.4'
)
_H4 = "style='margin:10px 0 2px 0;font-size:14px'"
_MATCH = {"same": "", "loose": "matched loosely", "new": "new in B", "vanished": "only in A"}
#: Changes drawn as steps of their own; the rest are one step.
STEPS = 10


t = format_ns  # a duration in ns as the page writes it


def signed(ns: float) -> str:
    return ("+" if ns > 0 else "\u2212" if ns < 0 else "\u00b1") + t(abs(ns))


def _ratio(r: float) -> str:
    return "" if r is None or (isinstance(r, float) and math.isnan(r)) else f"{r:.2f}\u00d7"


def _figure_value(v: float | None, unit: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "\u2014"
    if unit == "ns":
        return t(v)
    if unit == "share":
        return f"{v:.1%}"
    if unit == "bytes":
        return f"{v / 1e6:,.1f} MB"
    return f"{int(v):,}"


def _time_cell(r: pd.Series, side: str) -> str:
    """A row's time in one run; a dash where the kernel or copy did not run there (not a time of
    0)."""
    absent = r["kind"] != "overlap" and not r[f"calls_{side}"]
    return "\u2014" if absent else t(r[f"ns_{side}"])


class ProfileDiff(FigurePage):
    """Run A against run B (:class:`~gpumagic.analysis.diff.DiffData` in ``data``). ``str()`` is the
    text, ``_repr_html_``/``save_html`` the page with the waterfall, ``to_dataframe()`` the rows,
    ``figure()`` the Bokeh figure."""

    def __init__(
        self,
        data: DiffData,
        name_a: str = "A",
        name_b: str = "B",
        top: int = 15,
        bokehjs: str = "once",
        waterfall: str = "bokeh",
    ):
        self.data = data
        self.name_a, self.name_b = name_a, name_b
        self.top = top
        self.bokehjs = bokehjs
        #: "bokeh" (an interactive figure) or "bars" (plain HTML: no second Bokeh document under a
        #: report)
        self.waterfall = waterfall
        self.labels = row_labels(data.rows)

    # --- numbers
    # ----------------------------------------------------------------------------------------------
    @property
    def delta_ns(self) -> int:
        return self.data.delta_ns

    @property
    def ratio(self) -> float:
        return self.data.ratio

    @property
    def changes(self) -> list[str]:
        return list(self.data.changes)

    @property
    def environment(self) -> list[str]:
        return list(self.data.environment)

    def label(self, r: pd.Series) -> str:
        """A row's name: the kernel's label ("A's → B's" where they differ), a copy kind, or the
        overlap."""
        if r["kind"] == "memop":
            kind = str(r["name_b"] if pd.isna(r["name_a"]) else r["name_a"])
            return MEMOP_NOUN.get(kind, kind)
        if r["kind"] == "overlap":
            return "overlap (counted once)"
        la = self.labels.get(str(r["name_a"]), "") if not pd.isna(r["name_a"]) else ""
        lb = self.labels.get(str(r["name_b"]), "") if not pd.isna(r["name_b"]) else ""
        return la if la == lb or not lb else lb if not la else f"{la} \u2192 {lb}"

    def to_dataframe(self) -> pd.DataFrame:
        """Every row (kernels, memory-operation kinds, overlap), with its readable ``label``;
        ``delta_ns`` sums to the change in GPU busy time."""
        rows = self.data.rows.copy()
        rows.insert(2, "label", [self.label(r) for _, r in rows.iterrows()])
        return rows

    def by_module(self) -> pd.DataFrame:
        """Per module, A's and B's forward and backward GPU time and the change (``delta_ns``, B -
        A): empty unless both runs have module rows (``Trace.by_module``)."""
        return self.data.modules.copy()

    def summary_line(self) -> str:
        d = self.data
        ratio = f", {d.ratio:.2f}\u00d7" if d.busy_a else ""
        return (
            f"GPU busy {t(d.busy_a)} ({self.name_a}) \u2192 {t(d.busy_b)} ({self.name_b}): "
            f"{signed(d.delta_ns)}{ratio}"
        )

    def _side(self, which: str) -> str:
        s = self.data.a if which == "a" else self.data.b
        env = s.env
        src = env.get("source")
        src = src if isinstance(src, str) or src is None else f"{len(src)} files"
        parts = [env.get("device") or "unknown device", env.get("backend") or "?"]
        if len(s.ranks) > 1:
            parts.append(f"{len(s.ranks)} ranks")
        return ", ".join(str(p) for p in parts) + (f" ({src})" if src else "")

    def _steps(self) -> list[dict[str, Any]]:
        rows = self.data.rows
        moved = rows[rows["delta_ns"] != 0]
        moved = moved.assign(_size=moved["delta_ns"].abs()).sort_values(
            "_size", ascending=False, kind="stable"
        )
        multi = len(self.data.ranks) > 1
        steps = []
        for _, r in moved.head(STEPS).iterrows():
            label = self.label(r)
            steps.append(
                {
                    "label": f"{r['rank']}: {label}" if multi and r["rank"] else label,
                    "delta_ns": int(r["delta_ns"]),
                    "text": f"{t(r['ns_a'])} \u2192 {t(r['ns_b'])} ({signed(r['delta_ns'])})",
                }
            )
        rest = moved.iloc[STEPS:]
        if len(rest):
            d = int(rest["delta_ns"].sum())
            steps.append({"label": f"{len(rest)} other changes", "delta_ns": d, "text": signed(d)})
        return steps

    def figure(self) -> BokehModel:
        """The waterfall from A's GPU busy time to B's (``render/diff_figure.py``)."""
        from .diff_figure import waterfall_figure

        return waterfall_figure(self.data.busy_a, self.data.busy_b, self._steps())

    # --- text
    # ----------------------------------------------------------------------------------------------
    def __str__(self) -> str:
        lines = [
            self.summary_line(),
            f"  A = {self.name_a}: {self._side('a')}",
            f"  B = {self.name_b}: {self._side('b')}",
        ]
        lines += [f"  differs: {e}" for e in self.environment]
        lines += [f"  {i}. {c}" for i, c in enumerate(self.changes, 1)]
        fig = self.data.figures
        if len(fig):
            lines.append(f"  {'figure':<24} {'A':>10} {'B':>10}")
            for _, f in fig.iterrows():
                name = f"{f['rank']}: {f['figure']}" if f["rank"] else f["figure"]
                a, b = _figure_value(f["a"], f["unit"]), _figure_value(f["b"], f["unit"])
                lines.append(f"  {name:<24} {a:>10} {b:>10}")
        rows = self.data.rows.head(self.top) if len(self.data.ranks) > 1 else self._top_rows()
        if len(rows):
            lines.append(f"  {'delta':>10} {'A':>10} {'B':>10} {'calls':>11}  kernel")
            for _, r in rows.iterrows():
                calls = f"{r['calls_a']}\u2192{r['calls_b']}"
                tag = _MATCH.get(r["match"], "") if r["kind"] == "kernel" else ""
                who = f"{r['rank']}: " if r["rank"] and len(self.data.ranks) > 1 else ""
                lines.append(
                    f"  {signed(r['delta_ns']):>10} {t(r['ns_a']):>10} {t(r['ns_b']):>10} "
                    f"{calls:>11}  "
                    f"{who}{self.label(r)}{f'  [{tag}]' if tag else ''}"
                )
            more = len(self.data.rows) - len(rows)
            lines.append(
                f"  rows sum to {signed(int(self.data.rows['delta_ns'].sum()))} = the change "
                f"in GPU busy" + (f" ({more} more rows in to_dataframe())" if more > 0 else "")
            )
        return "\n".join(lines + self._module_lines())

    def _module_lines(self) -> list[str]:
        """The modules whose GPU time changed most (``top`` of them), forward + backward each."""
        mods = self.data.modules
        if mods.empty:
            return []
        shown = mods.assign(_s=-mods["delta_ns"].abs()).sort_values("_s", kind="stable")
        lines = [f"  {'delta':>10} {'A fwd+bwd':>19} {'B fwd+bwd':>19}  module"]
        for _, r in shown.head(self.top).iterrows():
            a = f"{t(r['fwd_ns_a'])}+{t(r['bwd_ns_a'])}"
            b = f"{t(r['fwd_ns_b'])}+{t(r['bwd_ns_b'])}"
            lines.append(f"  {signed(r['delta_ns']):>10} {a:>19} {b:>19}  {r['module']}")
        return lines

    def _top_rows(self) -> pd.DataFrame:
        rows = self.data.rows
        return (
            rows.assign(_s=-rows["delta_ns"].abs()).sort_values("_s", kind="stable").head(self.top)
        )

    # --- HTML
    # ----------------------------------------------------------------------------------------------
    @property
    def page_title(self) -> str:  # type: ignore[override]
        return f"gpumagic: {self.name_a} vs {self.name_b}"

    def html(self, figure: str | None = "iframe") -> str:
        """The diff as HTML; ``figure``: "notebook", "iframe" (self-contained), "page", or None (no
        figure)."""
        parts = [f"<div style='font-weight:600;margin:4px 0'>{esc(self.summary_line())}</div>"]
        parts.append(
            f"<div {style('muted')}>{esc(self.name_a)}: {esc(self._side('a'))}<br>"
            f"{esc(self.name_b)}: {esc(self._side('b'))}</div>"
        )
        for e in self.environment:
            parts.append(
                f"<div style='margin:2px 0;color:#8a5300'>\u26a0\ufe0f {esc('Differs: ' + e)}</div>"
            )
        if self.changes:
            items = "".join(f"<li>{esc(c)}</li>" for c in self.changes)
            parts.append(
                f"<h4 {_H4}>Largest changes</h4><ol style='margin:2px 0 6px "
                f"0;padding-left:22px'>{items}</ol>"
            )
        parts.append(self._figures_html())
        if figure and len(self.data.rows):
            if self.waterfall == "bars":
                from .diff_figure import waterfall_html

                parts.append(waterfall_html(self.data.busy_a, self.data.busy_b, self._steps()))
            else:
                parts.append(self._figure_html(figure))
        parts.append(self._rows_html())
        parts.append(self._ops_html())
        parts.append(self._modules_html())
        return f"<div class='gm-diff' style='{_ROOT}'>{''.join(parts)}</div>"

    def _modules_html(self) -> str:
        """The module rows, in B's tree order (indented by depth), forward and backward in each
        run and the change; collapsed."""
        mods = self.data.modules
        if mods.empty:
            return ""
        heads = ["module", f"{self.name_a} fwd", f"{self.name_a} bwd"]
        heads += [f"{self.name_b} fwd", f"{self.name_b} bwd", "delta"]
        th = "".join(
            f"<th {style('th-name' if i == 0 else 'th')}>{esc(h)}</th>" for i, h in enumerate(heads)
        )
        body = []
        for _, r in mods.iterrows():
            pad = f"padding-left:{0.5 + int(r['depth']) * 1.1:.1f}em"
            cells = "".join(
                f"<td {style('num')}>{esc(v)}</td>"
                for v in (
                    t(r["fwd_ns_a"]),
                    t(r["bwd_ns_a"]),
                    t(r["fwd_ns_b"]),
                    t(r["bwd_ns_b"]),
                    signed(r["delta_ns"]),
                )
            )
            body.append(
                f"<tr><td style='{pad};white-space:nowrap'>{esc(r['module'])}</td>{cells}</tr>"
            )
        return (
            "<details style='margin:2px 0'><summary style='cursor:pointer'>GPU time by module, "
            f"forward and backward</summary><table {style('table')}><tr>{th}</tr>"
            f"{''.join(body)}</table></details>"
        )

    def _figure_html(self, mode: str) -> str:
        from .figure_modes import figure_html

        if mode == "notebook" and self.bokehjs != "once":
            mode = "iframe"
        return figure_html(self.figure(), mode, self.page_title)

    def _figures_html(self) -> str:
        """One row per figure; a column per run, per rank where there are several (rank 0 A, rank 0
        B, ...)."""
        fig = self.data.figures
        if fig.empty:
            return ""
        ranks = list(dict.fromkeys(fig["rank"]))
        cols = [(r, side) for r in ranks for side in ("a", "b")]
        names = {"a": self.name_a, "b": self.name_b}
        head = f"<th {style('th-name')}>figure</th>" + "".join(
            f"<th {style('th')}>{esc(f'{r}: ' if r else '')}{esc(names[side])}</th>"
            for r, side in cols
        )
        body = []
        for name in dict.fromkeys(fig["figure"]):
            mine = fig[fig["figure"] == name].set_index("rank")
            unit = mine["unit"].iloc[0]
            cells = "".join(
                f"<td {style('num')}>{esc(_figure_value(mine[side].get(r), unit))}</td>"
                for r, side in cols
            )
            body.append(f"<tr><td {style('word')}>{esc(name)}</td>{cells}</tr>")
        return (
            f"<h4 {_H4}>Side by side</h4><table "
            f"{style('table')}><tr>{head}</tr>{''.join(body)}</table>"
        )

    def _rows_html(self) -> str:
        rows = self.data.rows if len(self.data.ranks) > 1 else self._top_rows()
        rows = rows.head(self.top * max(len(self.data.ranks), 1))
        if rows.empty:
            return ""
        multi = len(self.data.ranks) > 1
        cols = ["rank"] if multi else []
        cols += [
            "kernel / copies",
            f"{self.name_a}",
            f"{self.name_b}",
            "delta",
            "ratio",
            "calls",
            "match",
        ]
        NAME_COLUMNS = ("rank", "kernel / copies", "match")
        head = "".join(
            f"<th {style('th-name' if c in NAME_COLUMNS else 'th')}>{esc(c)}</th>" for c in cols
        )
        body = []
        for _, r in rows.iterrows():
            full = " \u2192 ".join(
                str(n) for n in (r["name_a"], r["name_b"]) if not pd.isna(n) and n
            )
            tag = _MATCH.get(r["match"], "") if r["kind"] == "kernel" else ""
            how = f" ({r['how']})" if r["how"] else ""
            color = (
                "#b00020" if r["delta_ns"] > 0 else "#1a7f37" if r["delta_ns"] < 0 else "inherit"
            )
            cells = [f"<td {style('word')}>{esc(r['rank'])}</td>"] if multi else []
            cells += [
                f"<td {style('name')} title='{esc(full)}'>{esc(self.label(r))}</td>",
                f"<td {style('num')}{ns_title(r['ns_a'])}>{esc(_time_cell(r, 'a'))}</td>",
                f"<td {style('num')}{ns_title(r['ns_b'])}>{esc(_time_cell(r, 'b'))}</td>",
                f"<td {style('num')} ><span "
                f"style='color:{color}'>{esc(signed(r['delta_ns']))}</span></td>",
                f"<td {style('num')}>{esc(_ratio(r['ratio']))}</td>",
                f"<td {style('num')}>{r['calls_a']} \u2192 {r['calls_b']}</td>",
                f"<td {style('word')} "
                f"title='{esc(r['how'])}'>{esc(tag)}{esc(how) if r['how'] else ''}</td>",
            ]
            body.append(f"<tr>{''.join(cells)}</tr>")
        total = int(self.data.rows["delta_ns"].sum())
        more = len(self.data.rows) - len(rows)
        note = f"All {len(self.data.rows)} rows sum to {signed(total)}, the change in GPU busy time"
        note += f"; the {more} not shown are in to_dataframe()." if more > 0 else "."
        return (
            f"<h4 {_H4}>Kernels and copies, largest changes first</h4><table "
            f"{style('table')}><tr>{head}</tr>"
            f"{''.join(body)}</table><div {style('muted')}>{esc(note)}</div>"
        )

    def _ops_html(self) -> str:
        ops = self.data.ops
        if ops.empty:
            missing = [
                n
                for n, s in ((self.name_a, self.data.a), (self.name_b, self.data.b))
                if not s.ops_known
            ]
            if not missing:
                return ""
            return (
                f"<div {style('muted')}>Launching ops: not compared "
                f"({esc(', '.join(missing))} recorded no torch "
                "ops: an nsys export has none; torch.profiler traces do).</div>"
            )
        multi = len(self.data.ranks) > 1
        top = ops.head(self.top * max(len(self.data.ranks), 1))
        body = []
        for _, o in top.iterrows():
            rank = f"<td {style('word')}>{esc(o['rank'])}</td>" if multi else ""
            body.append(
                f"<tr>{rank}<td {style('name')}>{esc(o['op'])}</td><td "
                f"{style('num')}>{esc(t(o['ns_a']))}</td>"
                f"<td {style('num')}>{esc(t(o['ns_b']))}</td><td "
                f"{style('num')}>{esc(signed(o['delta_ns']))}</td>"
                f"<td {style('num')}>{esc(_ratio(o['ratio']))}</td>"
                f"<td {style('num')}>{o['calls_a']} \u2192 {o['calls_b']}</td></tr>"
            )
        head = (
            f"<th {style('th-name')}>rank</th>" if multi else ""
        ) + f"<th {style('th-name')}>op</th>"
        head += "".join(
            f"<th {style('th')}>{esc(c)}</th>"
            for c in (self.name_a, self.name_b, "delta", "ratio", "calls")
        )
        return (
            f"<details style='margin:2px 0'><summary style='cursor:pointer'>GPU time by "
            f"launching op</summary>"
            f"<table {style('table')}><tr>{head}</tr>{''.join(body)}</table></details>"
        )
