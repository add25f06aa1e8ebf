"""A job's report, text and HTML, the same size at any rank count: a summary line, the findings, a
rank x time heatmap of busy time (ranks share rows past a few hundred), the per-rank table cut to
the ranks worth a look (the featured ones, and the top and bottom by NCCL time; every row in
``job.to_dataframe()``, a page of it in ``job.table(page=...)``), and the kernels summed over ranks
with their spread across ranks. The detailed timeline is a second pass: ``job.report()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from ..render.report import ROOT_STYLE
from ..render.tables import esc, style
from ..units import format_ns

if TYPE_CHECKING:  # named through the package: Job's own module imports this one (lazily)
    from . import Job

__all__ = ["EDGE", "TOP_KERNELS", "html_report", "table", "text_report"]

#: Ranks shown at either end of the per-rank table by NCCL time (busy time without NCCL).
EDGE = 5
#: Kernel names in the kernel table.
TOP_KERNELS = 15
_DOT = " \u00b7 "
_APPROX = (
    "Exact: every per-rank figure, counts, totals, averages, minima and maxima. Approximate "
    "(\u2248): medians, read from a quantile sketch, within 0.5%."
)


def _range(values: pd.Series) -> str:
    lo, hi = format_ns(values.min()), format_ns(values.max())
    return lo if lo == hi else f"{lo} to {hi}"


def summary_line(job: Job) -> str:
    fig, ranks, meta = job.data.figures, job.data.ranks, job.meta
    gpus = ", ".join(meta.get("gpus") or []) or meta.get("device", "GPU")
    kernels = int(job.data.rank_kernels["Instances"].sum()) if len(job.data.rank_kernels) else 0
    parts = [
        f"{len(ranks)} ranks on {len(fig)} \u00d7 {gpus}",
        f"range per rank {_range(fig['span_ns'])}",
        f"GPU busy {_range(fig['busy_ns'])}",
        f"{kernels:,} kernels",
    ]
    hosts = ranks["host"].replace("", pd.NA).dropna().nunique()
    if hosts > 1:
        parts.insert(1, f"{hosts} hosts")
    return _DOT.join(parts)


def _order(fig: pd.DataFrame) -> str:
    return "nccl_ns" if fig["nccl_ns"].gt(0).any() else "busy_ns"


def excerpt(job: Job, edge: int = EDGE) -> tuple[pd.DataFrame, str]:
    """The per-rank rows worth a look: the featured ranks and the ``edge`` at either end by NCCL
    time (busy time without NCCL), in rank order, with a sentence of what was left out."""
    fig = job.data.figures
    if len(fig) <= 2 * edge + 2:
        return fig, ""
    by = _order(fig)
    ranked = fig.sort_values(by, kind="stable").index
    featured = job.featured()
    keep = set(ranked[:edge]) | set(ranked[-edge:])
    keep |= set(fig.index[fig["label"].isin(list(featured.values()))])
    what = "NCCL" if by == "nccl_ns" else "busy"
    said = (
        f"{len(keep)} of {len(fig)} rows: the featured ranks, the {edge} with the least and the "
        f"{edge} with the most {what} time; every row: job.to_dataframe(), a page of them: "
        "job.table(page=0)"
    )
    return fig.loc[sorted(keep)], said


def table(
    job: Job, page: int = 0, size: int = 50, by: str = "rank", ascending: bool = True
) -> pd.DataFrame:
    """A page of the per-rank table (``job.to_dataframe()``) sorted by ``by``."""
    df = job.to_dataframe().sort_values(by, ascending=ascending, kind="stable")
    return df.iloc[page * size : (page + 1) * size].reset_index(drop=True)


def _label(r: pd.Series, roles: dict[str, str]) -> str:
    return f"{r['label']} \u00b7 {roles[r['label']]}" if r["label"] in roles else str(r["label"])


def _skew_text(ns: int) -> str:
    """A rank's range skew: the time over the shortest range of the ranks that ran kernels ("no
    kernels" for a rank that ran none: it is no yardstick)."""
    return "no kernels" if ns < 0 else "fastest" if ns == 0 else f"+{format_ns(ns)}"


def _rank_lines(job: Job) -> list[str]:
    shown, said = excerpt(job)
    roles = {label: role for role, label in job.featured().items()}
    waits = job.waits()
    lines = [
        f"  {'Rank':<22} {'GPU':>4} {'Range':>9} {'Busy':>9} {'NCCL':>9} {'wait':>9} "
        f"{'overl.':>6}  Range skew"
    ]
    for _, r in shown.iterrows():
        skew = _skew_text(int(r["span_skew_ns"]))
        overlap = "" if pd.isna(r["overlap_share"]) else f"{r['overlap_share']:.0%}"
        lines.append(
            f"  {_label(r, roles):<22} {int(r['device']):>4} {format_ns(r['span_ns']):>9} "
            f"{format_ns(r['busy_ns']):>9} {format_ns(r['nccl_ns']):>9} "
            f"{format_ns(waits.get(r['label'], 0)):>9} "
            f"{overlap:>6}  {skew}"
        )
    return lines + ([f"  ({said})"] if said else [])


def _kernel_lines(job: Job, top: int) -> list[str]:
    s = job.kernel_spread().head(top)
    if s.empty:
        return []
    labels = _labels(s["Name"])
    total = max(int(job.kernel_spread()["Total Time (ns)"].sum()), 1)
    lines = [f"  {'Share':>6} {'Total':>9} {'Calls':>9} {'Ranks':>6}  per rank min/med/max  Kernel"]
    for _, r in s.iterrows():
        spread = "/".join(
            format_ns(r[c]) for c in ("Min rank (ns)", "Median rank (ns)", "Max rank (ns)")
        )
        lines.append(
            f"  {r['Total Time (ns)'] / total:>6.1%} {format_ns(r['Total Time (ns)']):>9} "
            f"{int(r['Instances']):>9,} {int(r['Ranks']):>6}  {spread:<21} {labels[r['Name']]}"
        )
    return lines


def _labels(names: pd.Series) -> dict[str, str]:
    from ..kernels.labels import distinct_labels

    return distinct_labels(list(names))


def text_report(job: Job) -> str:
    lines = [summary_line(job)]
    lines += [f"  {'!' if f.severity == 'warn' else '-'} {f.message}" for f in job.findings()]
    lines += ["Per rank and GPU:", *_rank_lines(job)]
    kernels = _kernel_lines(job, TOP_KERNELS)
    if kernels:
        lines += ["Kernels over every rank (spread: the per-rank totals):", *kernels]
    lines.append(_APPROX)
    return "\n".join(lines)


def _rank_table_html(job: Job) -> str:
    shown, said = excerpt(job)
    roles = {label: role for role, label in job.featured().items()}
    waits = job.waits()
    heads = ["Rank", "GPU", "Range", "Busy", "NCCL", "NCCL wait", "Overlapped", "Range skew"]
    num, word = style("num"), style("word")
    ths = "".join(f"<th {style('th')}>{esc(h)}</th>" for h in heads)
    rows = []
    for _, r in shown.iterrows():
        skew = _skew_text(int(r["span_skew_ns"]))
        overlap = "" if pd.isna(r["overlap_share"]) else f"{r['overlap_share']:.0%}"
        cells = [
            f"<td {word}>{esc(_label(r, roles))}</td>",
            f"<td {word}>{esc(r['gpu'])}</td>",
            *(f"<td {num}>{esc(format_ns(r[c]))}</td>" for c in ("span_ns", "busy_ns", "nccl_ns")),
            f"<td {num}>{esc(format_ns(waits.get(r['label'], 0)))}</td>",
            f"<td {num}>{overlap}</td>",
            f"<td {num}>{esc(skew)}</td>",
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    tail = f"<p {style('muted')}>Showing {esc(said)}.</p>" if said else ""
    return (
        f"<table class='gm-job-ranks' {style('table')}><thead><tr>{ths}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>{tail}"
    )


def _kernel_table_html(job: Job, top: int) -> str:
    s = job.kernel_spread()
    if s.empty:
        return "<p>No kernels.</p>"
    total = max(int(s["Total Time (ns)"].sum()), 1)
    shown = s.head(top)
    labels = _labels(shown["Name"])
    heads = ["Kernel", "Share", "Total", "Calls", "Ranks", "Min rank", "Median rank", "Max rank"]
    num, word = style("num"), style("word")
    ths = "".join(f"<th {style('th')}>{esc(h)}</th>" for h in heads)
    rows = []
    for _, r in shown.iterrows():
        cells = [
            f"<td {word} title='{esc(r['Name'])}'>{esc(labels[r['Name']])}</td>",
            f"<td {num}>{r['Total Time (ns)'] / total:.1%}</td>",
            f"<td {num}>{esc(format_ns(r['Total Time (ns)']))}</td>",
            f"<td {num}>{int(r['Instances']):,}</td>",
            f"<td {num}>{int(r['Ranks'])}</td>",
            *(
                f"<td {num}>{esc(format_ns(r[c]))}</td>"
                for c in ("Min rank (ns)", "Median rank (ns)", "Max rank (ns)")
            ),
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = len(s) - top
    tail = f"<p {style('muted')}>{more} more kernel name(s).</p>" if more > 0 else ""
    return (
        f"<table class='gm-job-kernels' {style('table')}><thead><tr>{ths}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>{tail}"
    )


def html_report(job: Job, mode: str = "iframe") -> str:
    """The job's HTML: ``mode`` as ``render.figure_modes.figure_html`` takes it."""
    from ..render.figure_modes import figure_html
    from ..render.rank_heatmap import rank_time_heatmap_figure

    h4 = "style='margin:10px 0 4px 0'"
    parts = [f"<div class='gm-summary' style='font-weight:600'>{esc(summary_line(job))}</div>"]
    for f in job.findings():
        color = "color:#b45309;" if f.severity == "warn" else ""
        parts.append(f"<div class='gm-finding' style='margin:2px 0;{color}'>{esc(f.message)}</div>")
    matrix, ranks, width, start = job.busy_matrix()
    if len(ranks) and matrix.size:
        fig = rank_time_heatmap_figure(matrix, ranks, width, start, job.featured())
        parts.append(figure_html(fig, mode, "gpumagic: job heatmap"))
    parts.append(f"<h4 {h4}>Per rank and GPU</h4>" + _rank_table_html(job))
    parts.append(f"<h4 {h4}>Kernels over every rank</h4>" + _kernel_table_html(job, TOP_KERNELS))
    parts.append(
        f"<p {style('muted')}>{esc(_APPROX)} A rank's timeline and kernel rows: "
        "job.report() (the featured ranks, read again from their files), job.rank(n).</p>"
    )
    return f"<div class='gm-job' style='{ROOT_STYLE}'>" + "".join(parts) + "</div>"
