"""ProfileReport: what ``%%gpuprofile`` shows, as an object. ``_repr_html_`` for notebooks, text for
terminals, ``save_html(path)`` for a standalone page, ``to_chrome_trace(path)`` for Perfetto /
chrome://tracing."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd

from ..analysis import Finding, findings
from ..analysis.counters import code_counters, counters_table
from ..analysis.finding import kernel_labels
from ..analysis.op_rates import code_rates, kernel_rates, rate_text
from ..analysis.ranks import is_multi, rank_figures
from ..analysis.selfcheck import launches, without_cuda
from ..edges import BokehModel, TorchValue
from ..kernels import decode
from ..trace import Trace
from ..trace.chrome_export import chrome_trace_events, write_chrome_trace
from ..trace.launching_ops import kernel_launch_apis, kernel_op_precisions
from ..trace.window import in_window
from ..units import format_ns, plural
from .bokeh_import import start_bokeh_import
from .code_view import code_html, code_text_lines
from .counters_view import counters_html, counters_text_lines
from .figure_page import FigurePage
from .options import ReportOptions
from .tables import duration_table_html, esc, kernel_table_html, style

__all__ = ["ProfileReport"]


# Inline styles (see tables.py: an untrusted notebook keeps them, not a <style> block); icons as
# text, not ::before.
#: The report's font and size: the page reads as one document whatever the notebook's theme.
ROOT_STYLE = (
    'font-family:system-ui,-apple-system,"Segoe '
    'UI",Roboto,sans-serif;font-size:13px;line-height:1.4'
)
_SEVERITY = {
    "warn": ("\u26a0\ufe0f ", ""),
    "error": ("\u26d4 ", "color:#b00020"),
    "info": ("\u2139\ufe0f ", ""),
}
_H4 = "style='margin:10px 0 2px 0;font-size:14px'"
_SUMMARY = "style='cursor:pointer'"
_MUTED = style("muted")
#: In a report of many ranks, a finding longer than this (characters) shows its first half and opens
#: to the rest.
_LONG_FINDING = 600
#: What the summary line calls a kind of GPU record the capture did not record.
_UNRECORDED_NOUN = {"kernels": "CUDA kernels", "memops": "memory operations"}


def _memops(trace: Trace, top: int) -> str:
    return duration_table_html(trace.memop_summary(), top, ("Operation",)) + duration_table_html(
        trace.memop_size_summary(), top, ("Operation",)
    )


def _ops(trace: Trace, top: int) -> str:
    return duration_table_html(trace.op_summary(), top, ("Name", "Input shapes"))


def _nvtx(trace: Trace, top: int) -> str:
    return duration_table_html(trace.nvtx_summary(), top, ("Style", "Range"))


@dataclass
class ProfileReport(FigurePage):
    trace: Trace
    label: str = ""
    top: int = ReportOptions.top
    timeline: bool = ReportOptions.timeline
    max_glyphs_per_lane: int = ReportOptions.max_glyphs_per_lane
    #: "once": in a notebook, BokehJS travels once per kernel session; "every": each report brings
    #: its own.
    bokehjs: str = ReportOptions.bokehjs
    notes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    #: The span the report is taken over (``gpumagic.trace.window``): None for the trace's default
    #: (a loaded torch.profiler trace: its profiler steps, else its GPU span; a live capture: the
    #: cell's range); a range name, a step range ("3-5"), "steps", "gpu" or "capture". The summary
    #: line says which.
    window: str | None = None

    def __post_init__(self) -> None:
        start_bokeh_import()  # while the window's tables are read, not after
        self.trace = in_window(
            self.trace, self.window
        )  # every table, figure and finding over this one window
        if not self.findings:
            self.findings = findings(self.trace)

    # --- figures
    # ----------------------------------------------------------------------------------------------
    @property
    def figures(self) -> dict[str, Any]:
        return self.trace.figures()

    @property
    def multi(self) -> bool:
        """Several processes or GPUs ran GPU work: the per-rank views replace the single-GPU
        ones."""
        return is_multi(self.trace)

    @cached_property
    def featured_ranks(self) -> dict[str, str]:
        """Past MANY_RANKS ranks, the ranks the views show first, role -> label (the straggler the
        findings name, else the slowest; the fastest): ``ranks_view.featured_ranks``. Empty for
        fewer ranks."""
        from .ranks_view import featured_ranks, many_ranks

        if not (self.multi and self._several_processes() and many_ranks(self.trace)):
            return {}
        return featured_ranks(self.trace, self.findings)

    def rank_figures(self) -> pd.DataFrame:
        """Every per-rank figure, one row per rank and GPU
        (``gpumagic.analysis.ranks.rank_figures``): what the per-rank table and the heatmap show,
        every rank included."""
        return rank_figures(self.trace)

    def kernel_summary(self) -> pd.DataFrame:
        """cuda_gpu_kern_sum columns plus the decoded name (short, family, library, op, tensor
        cores, precision). With several processes: one summary per process, stacked, with ``rank``,
        ``rank_label`` and ``pid`` first."""
        if self.multi and self._several_processes():
            from .ranks_view import decoded_by_rank

            return decoded_by_rank(self.trace, kernel_labels(self.trace))
        s = self.trace.kernel_summary()
        dec = s["Name"].map(decode)
        return s.assign(
            Short=s["Name"].map(kernel_labels(self.trace)),
            Family=dec.map(lambda d: d.family),
            Library=dec.map(lambda d: d.library),
            Op=dec.map(lambda d: d.op),
            **{"Tensor cores": dec.map(lambda d: d.tensor_cores)},
            Precision=dec.map(lambda d: d.precision),
        )

    def rates(self, by: str = "kernel") -> pd.DataFrame:
        """How near the silicon each row ran, from the work its launching ops' recorded shapes
        count (``analysis/op_rates.py``): per kernel name (``by="kernel"``), module or line of
        the cell. FLOP/s for GEMMs, bytes/s for the memory-bound ops, and the share of the
        device's peak; rows whose work cannot be counted are absent, never guessed."""
        if by == "kernel":
            return kernel_rates(self.trace)
        if by not in ("module", "line"):
            raise ValueError(f"by must be 'kernel', 'module' or 'line', not {by!r}")
        return code_rates(self.trace, by)

    def counters(self, by: str = "kernel") -> pd.DataFrame:
        """The sampled hardware counters with a verdict each (``--counters``; empty without
        them). ``by="kernel"``: per kernel name, Time (%), Instances, SM Active, SM Issue, Tensor
        Active, DRAM Read and Write (% of peak), Warps, GPC clock, Verdict, Name; ``"module"``
        (a module's row holds its children's kernels) or ``"line"``: per module or line of the
        cell and pass (forward, backward), as :meth:`by_module` and :meth:`by_line` put the
        kernels."""
        if by == "kernel":
            return counters_table(self.trace)
        if by not in ("module", "line"):
            raise ValueError(f"by must be 'kernel', 'module' or 'line', not {by!r}")
        return code_counters(self.trace, by)

    def to_dataframe(self) -> pd.DataFrame:
        return self.kernel_summary()

    def by_module(self, model: TorchValue | Mapping[str, TorchValue] | None = None) -> pd.DataFrame:
        """GPU time by ``nn.Module``, forward and backward, with an outside row: the rows make the
        report's kernel and memory-operation time exactly (``Trace.by_module``). ``model``: the
        live module (or name -> module), to name rows as the code does (``blocks.1.attn``)."""
        return self.trace.by_module(model)

    def by_line(self) -> pd.DataFrame:
        """GPU time by line of the cell, each line's forward work and that work's backward, and
        what each line's run launched (``Trace.by_line``)."""
        return self.trace.by_line()

    def summary_line(self) -> str:
        missing = self._missing_gpu_records()
        if missing:
            return self._unrecorded_line(missing)
        if self.multi:
            from .ranks_view import rank_summary_line

            return rank_summary_line(self.trace)
        f = self.figures
        meta = self.trace.meta
        device = meta.get("device") or "unknown device"
        backend = meta.get("backend", "?")
        version = meta.get("torch") or meta.get("nsys_version") or ""
        parts = [device]
        if f["kernels"] or f["memops"]:
            util = f"{f['gpu_util']:.0%}" if f["gpu_util"] is not None else "?"
            window = f.get("window_text", "the capture")
            parts.append(
                f"GPU busy {format_ns(f['gpu_busy_ns'])} of {format_ns(f['wall_ns'])}, "
                f"{window} ({util})"
            )
            parts.append(
                plural(f["kernels"], "kernel")
                + (f", {plural(f['memops'], 'memory op')}" if f["memops"] else "")
            )
        else:
            parts.append(
                f"{format_ns(f['wall_ns'])}, {f.get('window_text', 'the capture')}; no GPU activity"
            )
        parts.append(f"{backend} {version}".strip())
        if meta.get("child"):  # how the tool's process came: "warm child reused"
            parts.append(str(meta["child"]))
        return " \u00b7 ".join(parts)

    def _missing_gpu_records(self) -> str:
        """What GPU busy would be made of and the capture lacks: kinds it did not record, or kernels
        it recorded none of after launching some (dropped: an error, never an idle GPU); "" where
        nothing is missing."""
        unrecorded = self.figures["unrecorded"]
        meta, no_gpu_rows = self.trace.meta, self.trace.kernels.empty and self.trace.memops.empty
        if no_gpu_rows and without_cuda(self.trace):
            return ""  # nothing could run on a GPU: the plain line says there was no GPU activity
        if no_gpu_rows and meta.get("unread_devices"):
            return " and ".join(meta["unread_devices"]) + " device activity not read by gpumagic"
        if self.trace.kernels.empty and meta.get("range_profiler"):
            n = int(meta["range_profiler"]["kernels"])
            return (
                f"{n:,} kernel{'s' if n != 1 else ''} profiled with CUPTI's range profiler "
                f"(counters, no run times)"
            )
        if unrecorded:
            return " and ".join(_UNRECORDED_NOUN[kind] for kind in unrecorded) + " not recorded"
        if self.trace.kernels.empty and not launches(self.trace).empty:
            return "CUDA kernels launched but none recorded"
        return ""

    def _unrecorded_line(self, missing: str) -> str:
        """The summary line of a capture without the kernels or memory operations GPU busy is made
        of: what it did record, and no GPU time (busy, idle or a share of the window) made from what
        it lacks."""
        f, trace, meta = self.figures, self.trace, self.trace.meta
        parts = [meta.get("device") or "unknown device", f"{missing}: no GPU time figure"]
        counts = []
        if trace.recorded("kernels"):
            counts.append(plural(f["kernels"], "kernel"))
        if trace.recorded("memops"):
            counts.append(plural(f["memops"], "memory op"))
        if trace.recorded("api"):
            calls = trace.rows("api")
            counts.append(f"{calls:,} CUDA API call{'' if calls == 1 else 's'}")
        if counts:
            parts.append(", ".join(counts))
        version = meta.get("torch") or meta.get("nsys_version") or ""
        parts.append(f"{meta.get('backend', '?')} {version}".strip())
        return " \u00b7 ".join(parts)

    # --- text
    # ----------------------------------------------------------------------------------------------
    def __str__(self) -> str:
        lines = [self.summary_line()]
        lines += [f"  {f.message}" for f in self.findings]
        lines += [f"  note: {n}" for n in self.notes]
        if self.multi:
            lines += self._rank_text()
            if self._several_processes():
                return "\n".join(lines)
        s = self.trace.kernel_summary().head(self.top)
        if not s.empty:
            labels = kernel_labels(self.trace)
            lines.append(f"  {'Time %':>6}  {'Total':>9}  {'Calls':>5}  {'Avg':>9}  Kernel")
            for _, r in s.iterrows():
                lines.append(
                    f"  {r['Time (%)']:6.1f}  {format_ns(r['Total Time (ns)']):>9}  "
                    f"{int(r['Instances']):>5}  "
                    f"{format_ns(r['Avg (ns)']):>9}  {labels[r['Name']]}"
                )
        lines += counters_text_lines(self.trace, self.top)
        lines += code_text_lines(self.trace, self.top)
        return "\n".join(lines)

    def _rank_text(self) -> list[str]:
        from .ranks_view import rank_kernel_text_lines, rank_text_lines

        if not self._several_processes():
            return rank_text_lines(self.trace)
        featured, labels = self.featured_ranks, kernel_labels(self.trace)
        return rank_text_lines(self.trace, featured) + rank_kernel_text_lines(
            self.trace, self.top, labels, featured
        )

    # --- HTML
    # ----------------------------------------------------------------------------------------------
    def _timeline_figure(self) -> BokehModel:
        from .timeline import timeline_figure

        title = "Timeline" + (f" \u00b7 {self.label}" if self.label else "")
        return timeline_figure(self.trace, self.max_glyphs_per_lane, title, self.featured_ranks)

    def _has_timeline(self) -> bool:
        return bool(
            self.timeline and (len(self.trace.ops) + len(self.trace.kernels) + len(self.trace.api))
        )

    def _timeline_html(self, mode: str) -> str:
        """``notebook``: BokehJS once per kernel session (see embed.py); ``iframe``: a page of its
        own in an iframe; ``page``: for a page that loads BokehJS in its head."""
        return self._figure_html(self._timeline_figure(), mode, "timeline")

    def _figure_html(self, fig: BokehModel, mode: str, what: str) -> str:
        from .figure_modes import figure_html

        if mode == "notebook" and self.bokehjs != "once":
            mode = "iframe"  # each report brings its own BokehJS
        return figure_html(fig, mode, f"gpumagic: {self.label or 'cell'} {what}")

    def _body(self, timeline: str | None, draw_timeline: bool = True) -> str:
        parts = [
            f"<div class='gm-summary' style='font-weight:600;margin:4px "
            f"0'>{esc(self.summary_line())}</div>"
        ]
        for f in self.findings:
            icon, color = _SEVERITY.get(f.severity, ("", ""))
            parts.append(
                f"<div class='gm-finding gm-{esc(f.severity)}' style='margin:2px 0;{color}'>"
                f"{icon}{self._finding_text(f.message)}</div>"
            )
        for n in self.notes:
            parts.append(
                f"<div class='gm-finding gm-info' style='margin:2px "
                f"0'>{_SEVERITY['info'][0]}{esc(n)}</div>"
            )
        if self.multi:
            parts.append(self._ranks_html(timeline))
        else:
            ks = self.trace.kernel_summary()
            if not ks.empty:
                parts.append(
                    f"<h4 {_H4}>Kernels</h4>"
                    + kernel_table_html(
                        ks,
                        self.top,
                        kernel_labels(self.trace),
                        kernel_op_precisions(self.trace),
                        self.trace.meta.get("fused"),
                        kernel_launch_apis(self.trace),
                        rates=_rates(self.trace),
                    )
                )
        if not self.multi and self.trace.meta.get("counters"):
            parts.append(counters_html(self.trace, self.top))
        if not self.multi:
            parts.append(code_html(self.trace, self.top))
        sections = [
            ("Memory operations", "memops", lambda: _memops(self.trace, self.top)),
            ("Torch ops (Self CPU vs GPU)", "ops", lambda: _ops(self.trace, self.top)),
            (
                "CUDA API calls",
                "api",
                lambda: duration_table_html(self.trace.api_summary(), self.top),
            ),
            (
                "OS runtime calls",
                "osrt",
                lambda: duration_table_html(self.trace.osrt_summary(), self.top),
            ),
            ("NVTX ranges", "nvtx", lambda: _nvtx(self.trace, self.top)),
        ]
        for title, kind, table in sections:
            # a table the capture did not record (and its backend records) says so, and how to
            # record it
            unrecorded = self.trace.not_recorded(kind) if self.trace.recordable(kind) else None
            if unrecorded:
                title, content = f"{title} (not recorded)", f"<p {_MUTED}>{esc(unrecorded)}</p>"
            elif self.trace.rows(kind):
                content = table()
            else:
                continue
            parts.append(
                f"<details style='margin:2px 0'><summary "
                f"{_SUMMARY}>{esc(title)}</summary>{content}</details>"
            )
        if timeline and draw_timeline and self._has_timeline():
            parts.append(self._timeline_html(timeline))
        return f"<div class='gm-report' style='{ROOT_STYLE}'>{''.join(parts)}</div>"

    def _finding_text(self, message: str) -> str:
        """A finding, escaped; in a report of many ranks, one longer than :data:`_LONG_FINDING` (a
        figure for every rank) shows its start and opens to the rest."""
        cut = message.rfind(" ", 0, _LONG_FINDING // 2)
        if not self.featured_ranks or len(message) <= _LONG_FINDING or cut < 0:
            return esc(message)
        return (
            f"{esc(message[:cut])}<details style='display:inline'><summary "
            f"style='display:inline;cursor:pointer;"
            f"color:#555'> \u2026 (more)</summary>{esc(message[cut:])}</details>"
        )

    def _ranks_html(self, mode: str | None) -> str:
        """Several processes or GPUs: the per-rank table, then the kernel table with a rank column;
        past MANY_RANKS ranks, the rank x figure heatmap above the table (a figure: drawn in
        ``mode`` as the timeline is, none without one) and the table cut to the featured ranks and
        either end."""
        from .ranks_view import rank_kernel_table_html, rank_table_html

        labels = kernel_labels(self.trace)
        if (
            not self._several_processes()
        ):  # one process on several GPUs: per GPU, and the one kernel table
            ranks = f"<h4 {_H4}>Per GPU</h4>" + rank_table_html(self.trace)
            ks = self.trace.kernel_summary()
            return ranks + (
                f"<h4 {_H4}>Kernels</h4>" + kernel_table_html(ks, self.top, labels)
                if len(ks)
                else ""
            )
        ranks = f"<h4 {_H4}>Per rank and GPU</h4>"
        if self.featured_ranks and mode and not self.figures["unrecorded"]:
            from .rank_heatmap import rank_heatmap_figure

            ranks += self._figure_html(
                rank_heatmap_figure(self.trace, self.featured_ranks), mode, "ranks"
            )
        ranks += rank_table_html(self.trace, self.featured_ranks)
        kernels = f"<h4 {_H4}>Kernels by rank</h4>" + rank_kernel_table_html(
            self.trace, self.top, labels, self.featured_ranks
        )
        return ranks + (kernels if not self.trace.kernels.empty else "")

    def _several_processes(self) -> bool:
        from ..analysis.ranks import processes

        return len(processes(self.trace)) > 1

    def html(self, timeline: str | None = "iframe") -> str:
        """The report as HTML; ``timeline``: "notebook", "iframe" (self-contained), "page", or
        None."""
        return self._body(timeline, self.timeline)

    @property
    def page_title(self) -> str:  # type: ignore[override]
        return f"gpumagic: {self.label or 'profile'}"

    def to_chrome_trace(self, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """Chrome/Perfetto trace JSON of the Trace (ph 'X' events, µs); written to ``path`` when
        given."""
        if path is None:
            return chrome_trace_events(self.trace)
        return write_chrome_trace(self.trace, path)


def _rates(trace: Trace) -> dict[str, str]:
    """Kernel name -> its rate as the kernel table shows it (none where nothing was counted)."""
    table = kernel_rates(trace)
    return {str(r["Name"]): text for r in table.to_dict("records") if (text := rate_text(r))}
