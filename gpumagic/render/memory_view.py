"""MemoryView: where the GPU memory went, as a result object. ``str()`` is the text for a terminal,
the notebook output draws the timeline (BokehJS once per kernel session, through the reports'
carrier), ``to_dataframe()`` gives the allocations alive at the peak, ``timeline()`` the drawn
samples.

Top to bottom: one line (peak, reserved, device memory, the recording); the findings (where the
peak falls on the time axis, and the estimates of what would change it where the blocks were
named); the timeline, with what the cell was doing below it on the same axis; what was alive at the
peak by module (where names placed any block), by the user's line and by op, largest first; after
an out-of-memory failure, what was alive when it failed first of all, since that is what the user
came for.
"""

from __future__ import annotations

import math

import pandas as pd

from ..analysis.memory import CATEGORIES, MemoryAnalysis, format_bytes
from ..edges import BokehModel
from .figure_page import FigurePage
from .memory_figure import CATEGORY_COLORS
from .tables import esc, style

__all__ = ["MemoryView"]

_ROOT = (
    'font-family:system-ui,-apple-system,"Segoe '
    'UI",Roboto,sans-serif;font-size:13px;line-height:1.4'
)
_H4 = "style='margin:10px 0 2px 0;font-size:14px'"
_SEVERITY = {"error": "#b00020", "warn": "#8a5300", "info": "inherit"}
_WEIGHT = {"error": "font-weight:600;", "warn": "", "info": ""}


class MemoryView(FigurePage):
    """The memory of one recording (:class:`~gpumagic.analysis.memory.MemoryAnalysis` in
    ``analysis``): ``label`` names it (a cell, a file); ``top``: table rows; ``notes``: lines about
    how it was recorded; ``error``: the exception the recorded code raised (an out-of-memory error),
    if any."""

    def __init__(
        self,
        analysis: MemoryAnalysis,
        label: str = "memory",
        top: int = 15,
        notes: list[str] | None = None,
        error: BaseException | None = None,
        bokehjs: str = "once",
    ) -> None:
        self.analysis = analysis
        self.label = label
        self.top = top
        self.notes = list(analysis.notes) + list(notes or [])
        self.error = error
        self.bokehjs = bokehjs

    # --- numbers
    # ----------------------------------------------------------------------------------------------
    @property
    def peak_bytes(self) -> int:
        """Allocated bytes at the peak (exact: the maximum over every history entry)."""
        return self.analysis.peak_bytes

    @property
    def findings(self) -> list[str]:
        return [f.message for f in self.analysis.findings]

    def to_dataframe(self) -> pd.DataFrame:
        """One row per allocation alive at the peak (``bytes``, ``category``, ``line``, ``op``,
        ``allocated_ms``, ``freed_ms``), largest first; after an out-of-memory failure, those alive
        when it failed."""
        m = self.analysis
        live = m.live_at_oom if m.live_at_oom is not None else m.live_at_peak
        return live.copy()

    def timeline(self) -> pd.DataFrame:
        """The drawn samples: ``time_ms``, ``allocated``, ``reserved`` and one column per category
        (bytes)."""
        return self.analysis.samples.copy()

    def figure(self) -> BokehModel:
        from .memory_figure import memory_figure

        return memory_figure(self.analysis)

    def summary_line(self) -> str:
        m = self.analysis
        parts = [f"Memory of {self.label}: peak {format_bytes(m.peak_bytes)} allocated"]
        if m.has_times:
            parts[0] += f" at {m.peak_time_ms:.1f} ms"
        parts.append(f"{format_bytes(m.peak_reserved)} reserved then")
        if m.device_memory:
            parts.append(f"device {format_bytes(m.device_memory)}")
        parts.append(f"{m.events:,} allocator events on device {m.device}")
        if m.start_allocated:
            named = f" ({format_bytes(m.start_named)} of it named)" if m.start_named else ""
            parts.append(
                f"{format_bytes(m.start_allocated)} already allocated when the recording "
                f"began{named}"
            )
        return "; ".join(parts)

    def _focus(self) -> tuple[str, str]:
        """Which live set leads: the failure's after an out-of-memory error, else the peak's."""
        if self.analysis.oom:
            return "oom", "Alive when it ran out of memory"
        return "peak", "Alive at the peak"

    def _columns(self) -> list[tuple[str, str]]:
        """The breakdowns shown: by module where names placed any block, by line, by op."""
        live = self.analysis.live_at_peak
        named = "module" in live and (~live["module"].str.startswith("(")).any()
        return [("module", "module")] * bool(named) + [("line", "source line"), ("op", "op")]

    def _same_live_sets(self) -> bool:
        m = self.analysis
        a, b = m.live_at_oom, m.live_at_peak
        return a is not None and len(a) == len(b) and int(a["bytes"].sum()) == int(b["bytes"].sum())

    # --- text
    # ----------------------------------------------------------------------------------------------
    def __str__(self) -> str:
        m = self.analysis
        lines = [self.summary_line()]
        lines += [f"  {f.message}" for f in m.findings]
        at, head = self._focus()
        for column, word in self._columns():
            g = m.by(column, at).head(self.top)
            if g.empty:
                continue
            lines.append(f"  {head}, by {word}:")
            for _, r in g.iterrows():
                lines.append(
                    f"    {format_bytes(r['bytes']):>10} {r['share']:>5.0%} {r['count']:>5}  "
                    f"{r[column]}"
                )
        cats = {c: v for c, v in m.category_at_peak.items() if v}
        if cats:
            lines.append(
                "  At the peak by category: "
                + ", ".join(f"{c} {format_bytes(v)}" for c, v in cats.items())
            )
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    # --- HTML
    # ----------------------------------------------------------------------------------------------
    @property
    def page_title(self) -> str:  # type: ignore[override]
        return f"gpumagic: memory of {self.label}"

    def html(self, figure: str | None = "iframe") -> str:
        """The view as HTML; ``figure``: "notebook", "iframe" (self-contained), "page", or None (no
        figure)."""
        m = self.analysis
        parts = [f"<div style='font-weight:600;margin:4px 0'>{esc(self.summary_line())}</div>"]
        for f in m.findings:
            color = _SEVERITY.get(f.severity, "inherit")
            weight = _WEIGHT.get(f.severity, "")
            parts.append(f"<div style='margin:2px 0;{weight}color:{color}'>{esc(f.message)}</div>")
        at, head = self._focus()
        if at == "oom":
            parts.append(self._live_html(at, head))
        if figure and len(m.samples):
            parts.append(self._figure_html(figure))
        parts.append(self._categories_html())
        if at == "peak" or not self._same_live_sets():
            parts.append(self._live_html("peak", "Alive at the peak"))
        else:
            parts.append(f"<div {style('muted')}>At the peak the same blocks were alive.</div>")
        for n in self.notes:
            parts.append(f"<div {style('muted')}>{esc(n)}</div>")
        return f"<div class='gm-memory' style='{_ROOT}'>{''.join(parts)}</div>"

    def _figure_html(self, mode: str) -> str:
        from .figure_modes import figure_html

        if mode == "notebook" and self.bokehjs != "once":
            mode = "iframe"
        return figure_html(self.figure(), mode, self.page_title)

    def _categories_html(self) -> str:
        m = self.analysis
        cells = []
        for c in CATEGORIES:
            v = m.category_at_peak.get(c, 0)
            if not v:
                continue
            share = v / m.peak_bytes if m.peak_bytes else 0.0
            swatch = (
                f"<span "
                f"style='display:inline-block;width:10px;height:10px;background:{CATEGORY_COLORS[c]}'></span>"
            )
            cells.append(
                f"<span style='margin-right:14px;white-space:nowrap'>{swatch} {esc(c)} "
                f"<b>{esc(format_bytes(v))}</b> ({share:.0%})</span>"
            )
        if not cells:
            return ""
        return f"<div style='margin:4px 0'>At the peak: {''.join(cells)}</div>"

    def _live_html(self, at: str, head: str) -> str:
        m = self.analysis
        blocks = []
        for column, name in self._columns():
            g = m.by(column, at)
            if g.empty:
                continue
            live = m.live_at_oom if at == "oom" and m.live_at_oom is not None else m.live_at_peak
            cat = live.groupby(column, sort=False)["category"].agg(
                lambda s: ", ".join(dict.fromkeys(s))
            )
            shown = g.head(self.top)
            rows = []
            for _, r in shown.iterrows():
                rows.append(
                    f"<tr><td {style('num')}>{esc(format_bytes(r['bytes']))}</td>"
                    f"<td {style('num')}>{r['share']:.0%}</td><td "
                    f"{style('num')}>{r['count']:,}</td>"
                    f"<td {style('word')}>{esc(cat.get(r[column], ''))}</td>"
                    f"<td {style('name')}>{esc(r[column])}</td></tr>"
                )
            more = len(g) - len(shown)
            rest = ""
            if more > 0:
                left = int(g["bytes"].iloc[len(shown) :].sum())
                rest = (
                    f"<div {style('muted')}>{more} more ({esc(format_bytes(left))}) in "
                    f"to_dataframe().</div>"
                )
            head_row = (
                f"<tr><th {style('th')}>bytes</th><th {style('th')}>share</th><th "
                f"{style('th')}>blocks</th>"
                f"<th {style('th-name')}>category</th><th {style('th-name')}>{esc(name)}</th></tr>"
            )
            blocks.append(f"<table {style('table')}>{head_row}{''.join(rows)}</table>{rest}")
        if not blocks:
            return ""
        total = m.oom["allocated"] if at == "oom" and m.oom else m.peak_bytes
        when = m.oom["time_ms"] if at == "oom" and m.oom else m.peak_time_ms
        t = f" ({when:.1f} ms)" if m.has_times and not math.isnan(when) else ""
        return f"<h4 {_H4}>{esc(head)}{esc(t)}: {esc(format_bytes(total))}</h4>{''.join(blocks)}"
