"""ProfileReport: what ``%%gpuprofile`` shows, as an object. ``_repr_html_`` for notebooks, text for terminals,
``save_html(path)`` for a standalone page, ``to_chrome_trace(path)`` for Perfetto / chrome://tracing."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..analysis import Finding, findings
from ..capture.chrome_trace import chrome_trace_events, write_chrome_trace
from ..kernels import decode
from ..trace import Trace
from ..units import format_time
from .options import ReportOptions
from .tables import TABLE_CSS, duration_table_html, esc, kernel_table_html

__all__ = ["ProfileReport"]


def _t(ns: float) -> str:
    return format_time(ns * 1e-9)


@dataclass
class ProfileReport:
    trace: Trace
    label: str = ""
    top: int = ReportOptions.top
    timeline: bool = ReportOptions.timeline
    max_glyphs_per_lane: int = ReportOptions.max_glyphs_per_lane
    notes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.findings:
            self.findings = findings(self.trace)
        self._timeline_page: str | None = None

    # --- figures ----------------------------------------------------------------------------------------------
    @property
    def figures(self) -> dict[str, Any]:
        return self.trace.figures()

    def kernel_summary(self) -> pd.DataFrame:
        """cuda_gpu_kern_sum columns plus the decoded name (short, family, library, op, tensor cores, precision)."""
        s = self.trace.kernel_summary()
        dec = s["Name"].map(decode)
        return s.assign(
            Short=dec.map(lambda d: d.short),
            Family=dec.map(lambda d: d.family),
            Library=dec.map(lambda d: d.library),
            Op=dec.map(lambda d: d.op),
            **{"Tensor cores": dec.map(lambda d: d.tensor_cores)},
            Precision=dec.map(lambda d: d.precision),
        )

    def to_dataframe(self) -> pd.DataFrame:
        return self.kernel_summary()

    def summary_line(self) -> str:
        f = self.figures
        meta = self.trace.meta
        device = meta.get("device") or "unknown device"
        backend = meta.get("backend", "?")
        version = meta.get("torch") or meta.get("nsys_version") or ""
        parts = [device]
        if f["kernels"] or f["memops"]:
            util = f"{f['gpu_util']:.0%}" if f["gpu_util"] is not None else "?"
            parts.append(f"GPU busy {_t(f['gpu_busy_ns'])} of {_t(f['wall_ns'])} wall ({util})")
            parts.append(f"{f['kernels']} kernels" + (f", {f['memops']} memory ops" if f["memops"] else ""))
        else:
            parts.append(f"wall {_t(f['wall_ns'])}, no GPU activity")
        parts.append(f"{backend} {version}".strip())
        return " \u00b7 ".join(parts)

    # --- text -------------------------------------------------------------------------------------------------
    def __str__(self) -> str:
        lines = [self.summary_line()]
        lines += [f"  {f.message}" for f in self.findings]
        lines += [f"  note: {n}" for n in self.notes]
        s = self.trace.kernel_summary().head(self.top)
        if not s.empty:
            lines.append(f"  {'Time %':>6}  {'Total':>9}  {'Calls':>5}  {'Avg':>9}  Kernel")
            for _, r in s.iterrows():
                lines.append(
                    f"  {r['Time (%)']:6.1f}  {_t(r['Total Time (ns)']):>9}  {int(r['Instances']):>5}  "
                    f"{_t(r['Avg (ns)']):>9}  {decode(r['Name']).short}"
                )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    # --- HTML -------------------------------------------------------------------------------------------------
    def timeline_page(self) -> str:
        if self._timeline_page is None:
            from .timeline import timeline_html

            self._timeline_page = timeline_html(
                self.trace, self.max_glyphs_per_lane, f"{self.label or 'cell'} timeline"
            )
        return self._timeline_page

    def _body(self) -> str:
        parts = [f"<div class='gm-summary'>{esc(self.summary_line())}</div>"]
        for f in self.findings:
            parts.append(f"<div class='gm-finding gm-{esc(f.severity)}'>{esc(f.message)}</div>")
        for n in self.notes:
            parts.append(f"<div class='gm-finding gm-info'>{esc(n)}</div>")
        ks = self.trace.kernel_summary()
        if not ks.empty:
            parts.append("<h4>Kernels</h4>" + kernel_table_html(ks, self.top))
        if not self.trace.memops.empty:
            parts.append(
                "<details><summary>Memory operations</summary>"
                + duration_table_html(self.trace.memop_summary(), self.top, ("Operation",))
                + duration_table_html(self.trace.memop_size_summary(), self.top, ("Operation",))
                + "</details>"
            )
        if not self.trace.ops.empty:
            parts.append(
                "<details><summary>Torch ops (Self CPU vs GPU)</summary>"
                + duration_table_html(self.trace.op_summary(), self.top, ("Name", "Input shapes"))
                + "</details>"
            )
        if not self.trace.api.empty:
            parts.append(
                "<details><summary>CUDA API calls</summary>"
                + duration_table_html(self.trace.api_summary(), self.top)
                + "</details>"
            )
        if not self.trace.osrt.empty:
            parts.append(
                "<details><summary>OS runtime calls</summary>"
                + duration_table_html(self.trace.osrt_summary(), self.top)
                + "</details>"
            )
        if not self.trace.nvtx.empty:
            parts.append(
                "<details><summary>NVTX ranges</summary>"
                + duration_table_html(self.trace.nvtx_summary(), self.top, ("Style", "Range"))
                + "</details>"
            )
        if self.timeline and (len(self.trace.ops) + len(self.trace.kernels) + len(self.trace.api)):
            page = self.timeline_page()
            height = 120 + 28 * min(
                30,
                4
                + self.trace.kernels["stream"].nunique()
                + self.trace.api["thread"].nunique()
                + 6 * max(1, self.trace.ops["thread"].nunique()),
            )
            parts.append(
                "<h4>Timeline</h4>"
                f"<iframe class='gm-timeline' srcdoc=\"{html.escape(page, quote=True)}\" "
                f"style='width:100%;height:{min(height, 900)}px;border:0'></iframe>"
            )
        return "".join(parts)

    def _repr_html_(self) -> str:
        return f"<div class='gm-report'><style>{TABLE_CSS}</style>{self._body()}</div>"

    def save_html(self, path: str | os.PathLike[str]) -> str:
        """A standalone page (BokehJS inlined: opens offline)."""
        title = esc(f"gpumagic: {self.label or 'profile'}")
        page = (
            f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>"
            f"<style>{TABLE_CSS}</style></head><body>{self._repr_html_()}</body></html>"
        )
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)
        return os.fspath(path)

    def to_chrome_trace(self, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """Chrome/Perfetto trace JSON of the Trace (ph 'X' events, µs); written to ``path`` when given."""
        if path is None:
            return chrome_trace_events(self.trace)
        return write_chrome_trace(self.trace, path)
