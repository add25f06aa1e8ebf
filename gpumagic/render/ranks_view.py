"""The views of a trace with several processes or GPUs: the per-rank table, the kernel table with a
rank column, the summary line, and their text forms; which ranks a view of many ranks shows first.
(The timeline groups its lanes by rank itself: ``timeline.py``; the heatmap of many ranks is
``rank_heatmap.py``.)

The kernel table keeps one table with a rank column rather than one table per rank: a kernel's rows
for every rank sit together (its name once, spanning them), so a kernel that is slower or more
frequent on one rank shows as neighbouring numbers instead of a scroll between tables; ``--top``
counts kernel names, not rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from ..analysis.communication import straggler
from ..analysis.finding import Finding
from ..analysis.ranks import kernel_summary_by_rank, processes, rank_figures
from ..kernels import decode
from ..trace import WINDOW_TEXT, Trace
from ..units import format_ns
from .options import MANY_RANKS, RANK_TABLE_EDGE, RANK_TABLE_ROWS
from .tables import (
    DECODED_COLUMNS,
    NAME_COLUMN,
    esc,
    header_cells,
    kernel_name_cell,
    kernels_left_out,
    ns_title,
    style,
    table_html,
    yes_no,
)

__all__ = [
    "decoded_by_rank",
    "featured_of",
    "featured_ranks",
    "many_ranks",
    "rank_kernel_table_html",
    "rank_kernel_text_lines",
    "rank_summary_line",
    "rank_table_html",
    "rank_text_lines",
]

_DOT = " \u00b7 "


def times(multiple: float) -> str:
    """A multiple as a reader says it: "3.4×", "43×", "1,950×"."""
    return f"{multiple:.1f}×" if multiple < 10 else f"{multiple:,.0f}×"


def _skew(ns: int, share: float) -> str:
    """A skew as time and share of the shortest; past 100% as a multiple of it ("+37 ms, 34× the
    shortest"): no share of a span above 100%."""
    if ns < 0:
        return "no kernels"
    if ns == 0:
        return "fastest"
    if share > 1:
        return f"+{format_ns(ns)} ({times(share + 1)} the shortest)"
    return f"+{format_ns(ns)} ({share:.0%})"


def _share(x: float) -> str:
    return "" if pd.isna(x) else f"{x:.0%}"


def _gpu(r: pd.Series, named: bool) -> str:
    where = f"GPU {int(r['device'])}" if int(r["device"]) >= 0 else "GPU"
    return f"{where} {r['gpu']}" if named and r["gpu"] else where


def _who(trace: Trace) -> str:
    """'ranks' or 'processes': what the rows are, as honestly as the trace says."""
    return "ranks" if processes(trace)["label"].str.startswith("rank").all() else "processes"


def many_ranks(trace: Trace) -> bool:
    """More than :data:`~.options.MANY_RANKS` processes: the heatmap, the short table and the chosen
    lanes apply."""
    return len(processes(trace)) > MANY_RANKS


def featured_ranks(trace: Trace, found: Iterable[Finding] | None = None) -> dict[str, str]:
    """The ranks a view of many ranks shows first, role -> label: the "straggler" where the
    straggler finding names one (``found``: the findings already made, else it is asked), else the
    "slowest" (the least NCCL time: the one the others waited for, or the longest range without
    NCCL); and the "fastest" (the most NCCL time: it reached the collectives first and waited
    longest; without NCCL, the shortest range). One entry where they are one rank."""
    return featured_of(rank_figures(trace), straggler(trace) if found is None else found)


def featured_of(fig: pd.DataFrame, found: Iterable[Finding]) -> dict[str, str]:
    """:func:`featured_ranks` from the per-rank figures (``rank_figures``' columns) and the findings
    made of them: one rule for a Trace and for a job read rank by rank (``gpumagic.job``)."""
    per = fig.groupby("label", sort=False).agg(
        nccl_ns=("nccl_ns", "sum"), span_ns=("span_ns", "first")
    )
    if per.empty:
        return {}
    named = next((f.numbers["rank"] for f in found if f.kind == "straggler"), None)
    by, slow_first = ("nccl_ns", True) if per["nccl_ns"].gt(0).any() else ("span_ns", False)
    slow = named if named in per.index else (per[by].idxmin() if slow_first else per[by].idxmax())
    fast = per[by].idxmax() if slow_first else per[by].idxmin()
    out = {"straggler" if slow == named else "slowest": str(slow)}
    if fast != slow:
        out["fastest"] = str(fast)
    return out


def _excerpt(fig: pd.DataFrame, featured: Mapping[str, str]) -> tuple[pd.DataFrame, str]:
    """Past :data:`RANK_TABLE_ROWS` rows: the featured ranks and the :data:`RANK_TABLE_EDGE` at
    either end by NCCL time (busy time without NCCL), in rank order, and a sentence saying what was
    left out; else every row."""
    if len(fig) <= RANK_TABLE_ROWS:
        return fig, ""
    by = "nccl_ns" if fig["nccl_ns"].gt(0).any() else "busy_ns"
    ranked = fig.sort_values(by, kind="stable").index
    keep = set(ranked[:RANK_TABLE_EDGE]) | set(ranked[-RANK_TABLE_EDGE:])
    keep |= set(fig.index[fig["label"].isin(list(featured.values()))])
    roles = ", ".join(f"the {role} ({label})" for role, label in featured.items())
    what = "NCCL" if by == "nccl_ns" else "busy"
    said = (
        f"{len(keep)} of {len(fig)} rows: {roles + ', and ' if roles else ''}the "
        f"{RANK_TABLE_EDGE} with the least and "
        f"the {RANK_TABLE_EDGE} with the most {what} time; {len(fig) - len(keep)} left out. "
        f"Every row: "
        "rep.rank_figures() (a DataFrame)."
    )
    return fig.loc[sorted(keep)], said


def _with_role(labels: pd.Series, featured: Mapping[str, str]) -> list[str]:
    """Each label, a featured rank's with its role ("rank 17 \u00b7 straggler")."""
    roles = {label: role for role, label in featured.items()}
    return [f"{x} \u00b7 {roles[x]}" if x in roles else x for x in labels]


def _gpus(fig: pd.DataFrame) -> str:
    names = fig.drop_duplicates(["pid", "device"])["gpu"].replace("", "GPU")
    counts = names.value_counts(sort=False)
    return " + ".join(f"{n} \u00d7 {name}" if n > 1 else str(name) for name, n in counts.items())


def rank_summary_line(trace: Trace) -> str:
    """The report's first line for several processes or GPUs: who ran where, each rank's range and
    busy time as a span from the least to the most, never one busy figure over all GPUs."""
    fig = rank_figures(trace)
    meta = trace.meta
    per = fig.drop_duplicates("pid")
    who = _who(trace)
    kinds = {WINDOW_TEXT[k] for k in fig["window"]}
    window = kinds.pop() if len(kinds) == 1 else "each process's range"
    low, high = int(per["span_ns"].min()), int(per["span_ns"].max())
    busy = fig.groupby("pid")["busy_ns"].sum()
    one = "rank" if who == "ranks" else "process"
    parts = [f"{len(per)} {who if len(per) > 1 else one} on {_gpus(fig)}"]
    span = format_ns(low) if low == high else f"{format_ns(low)} to {format_ns(high)}"
    parts.append(f"{window} per {one}: {span}")
    b0, b1 = int(busy.min()), int(busy.max())
    gpus = int(fig.groupby("pid")["device"].nunique().max())
    summed = ""
    if gpus > 1:  # a process's busy time over its GPUs: a sum, said as one
        whose = "its" if len(per) == 1 else f"each {one}'s"
        summed = f" (summed over {whose} GPUs)"
    parts.append(
        f"GPU busy {format_ns(b0) if b0 == b1 else f'{format_ns(b0)} to {format_ns(b1)}'}{summed}"
    )
    f = trace.figures()
    counts = f"{f['kernels']} kernel{'s' * (f['kernels'] != 1)}"
    parts.append(
        counts + (f", {f['memops']} memory op{'s' * (f['memops'] != 1)}" if f["memops"] else "")
    )
    parts.append(
        f"{meta.get('backend', '?')} {meta.get('torch') or meta.get('nsys_version') or ''}".strip()
    )
    return _DOT.join(parts)


def _rank_columns(fig: pd.DataFrame) -> list[tuple[str, str, str, Any]]:
    """(header, tooltip, role, cell) of the per-rank table; columns nothing in it fills are left out
    (no process ids in a torch.profiler trace, no NCCL kernels, no skew with one process)."""
    named = fig["gpu"].nunique() > 1
    num, word = style("num"), style("word")
    cols: list[tuple[str, str, str, Any]] = [
        (
            "Rank" if fig["label"].str.startswith("rank").all() else "Process",
            "the torch.distributed rank (from the launcher's mark), or the process's place "
            "by first GPU activity",
            "th-name",
            lambda r: f"<td {word}>{esc(r['label'])}</td>",
        ),
        ("PID", "process id", "th-name", lambda r: f"<td {word}>{int(r['pid'])}</td>"),
        (
            "GPU",
            "the GPU its kernels ran on",
            "th-name",
            lambda r: f"<td {word} title='{esc(r['gpu'])}'>{esc(_gpu(r, named))}</td>",
        ),
        (
            "Range",
            "the cell's range in this process, to the end of the GPU work launched in it",
            "th",
            lambda r: f"<td {num}{ns_title(r['span_ns'])}>{esc(format_ns(r['span_ns']))}</td>",
        ),
        (
            "Busy",
            "kernels and memory operations on this GPU inside the range, overlaps once",
            "th",
            lambda r: f"<td {num}{ns_title(r['busy_ns'])}>{esc(format_ns(r['busy_ns']))}</td>",
        ),
        (
            "NCCL",
            "NCCL kernels on this GPU inside the range, overlaps once",
            "th",
            lambda r: (
                f"<td {num}{ns_title(r['nccl_ns'])}>"
                f"{esc(format_ns(r['nccl_ns']) if r['nccl_kernels'] else '')}</td>"
            ),
        ),
        (
            "NCCL share",
            "NCCL time as a share of busy time",
            "th",
            lambda r: f"<td {num}>{_share(r['nccl_share']) if r['nccl_kernels'] else ''}</td>",
        ),
        (
            "Overlapped",
            "share of the NCCL time during which a non-NCCL kernel ran on the same GPU",
            "th",
            lambda r: f"<td {num}>{_share(r['overlap_share'])}</td>",
        ),
        (
            "Range skew",
            "this range minus the shortest rank's range (share of the shortest)",
            "th",
            lambda r: f"<td {num}>{esc(_skew(int(r['span_skew_ns']), r['span_skew']))}</td>",
        ),
        (
            "Busy skew",
            "this busy time minus the least busy rank's (share of the least)",
            "th",
            lambda r: f"<td {num}>{esc(_skew(int(r['busy_skew_ns']), r['busy_skew']))}</td>",
        ),
    ]
    drop = set()
    if (fig["pid"] < 0).all():
        drop.add("PID")
    if not fig["nccl_kernels"].any():
        drop |= {"NCCL", "NCCL share", "Overlapped"}
    if fig["pid"].nunique() < 2:  # skew is between processes
        drop |= {"Range skew", "Busy skew"}
    return [c for c in cols if c[0] not in drop]


def rank_table_html(trace: Trace, featured: Mapping[str, str] | None = None) -> str:
    """One row per rank and GPU: range, busy, NCCL time and share, overlap with compute, skew by
    range and busy; a sentence instead where the capture did not record what busy time is made of
    (no figure from an absent table). Past :data:`RANK_TABLE_ROWS` rows, an excerpt (the
    ``featured`` ranks, named by role, and either end by NCCL time) and a line saying how many rows
    it leaves out."""
    unrecorded = trace.figures()["unrecorded"]
    if unrecorded:
        said = trace.not_recorded(unrecorded[0]) or f"{unrecorded[0]} were not recorded"
        return f"<p {style('muted')}>No per-rank GPU busy figures: {esc(said)}</p>"
    fig = rank_figures(trace)
    cols = _rank_columns(fig)
    featured = featured or {}
    shown, said = _excerpt(fig, featured)
    ths = "".join(f"<th {style(role)} title='{esc(tip)}'>{esc(h)}</th>" for h, tip, role, _ in cols)
    rows = [
        "<tr>" + "".join(cell(r) for *_, cell in cols) + "</tr>"
        for _, r in shown.assign(label=_with_role(shown["label"], featured)).iterrows()
    ]
    tail = f"<p class='gm-ranks-left-out' {style('muted')}>Showing {esc(said)}</p>" if said else ""
    return table_html(ths, rows, "gm-ranks") + tail


def rank_text_lines(trace: Trace, featured: Mapping[str, str] | None = None) -> list[str]:
    """The per-rank table as text lines (the terminal report), with the HTML table's columns and its
    excerpt."""
    full = rank_figures(trace)
    heads = [h for h, *_ in _rank_columns(full)]
    featured = featured or {}
    fig, said = _excerpt(full, featured)
    fig = fig.assign(label=_with_role(fig["label"], featured))
    nccl, skew = "NCCL" in heads, "Range skew" in heads
    wide = max(10, int(fig["label"].str.len().max()))
    head = f"  {'':<{wide}} {'GPU':>4} {'Range':>9} {'Busy':>9}"
    head += f" {'NCCL':>9} {'share':>5} {'overl.':>6}" if nccl else ""
    lines = [head + ("  Range skew" if skew else "")]
    for _, r in fig.iterrows():
        line = (
            f"  {r['label']:<{wide}} {int(r['device']):>4} "
            f"{format_ns(r['span_ns']):>9} {format_ns(r['busy_ns']):>9}"
        )
        if nccl:
            has = bool(r["nccl_kernels"])
            nccl_time = format_ns(r["nccl_ns"]) if has else ""
            nccl_share = _share(r["nccl_share"]) if has else ""
            line += f" {nccl_time:>9} {nccl_share:>5}"
            line += f" {_share(r['overlap_share']):>6}"
        lines.append(line + (f"  {_skew(int(r['span_skew_ns']), r['span_skew'])}" if skew else ""))
    return lines + ([f"  ({said})"] if said else [])


_KERNEL_COLUMNS = [
    NAME_COLUMN,
    ("Rank", "", "th-name"),
    ("Time", "share of this rank's kernel time", "th"),
    ("Total", "total GPU time of this kernel on this rank", "th"),
    ("Calls", "instances", "th"),
    ("Avg", "average per call (hover: Med, Min, Max, StdDev)", "th"),
    *DECODED_COLUMNS,
]


def _stats_title(r: pd.Series) -> str:
    parts = [
        f"{k} {format_ns(r[c])}"
        for k, c in (("Med", "Med (ns)"), ("Min", "Min (ns)"), ("Max", "Max (ns)"))
    ]
    parts.append(f"StdDev {format_ns(r['StdDev (ns)'])}")
    return f" title='{esc(_DOT.join(parts))}'"


def _kernel_rows(group: pd.DataFrame, featured: Mapping[str, str]) -> tuple[pd.DataFrame, str]:
    """A kernel's rows, one per rank; with ``featured`` ranks (many ranks), only theirs and the
    ranks with the least and the most total time in it, and a line for the others: how many, and
    their least and most total time."""
    if not featured:
        return group, ""
    keep = set(group.index[group["rank_label"].isin(list(featured.values()))])
    total = group["Total Time (ns)"]
    keep |= {total.idxmin(), total.idxmax()}
    rest = total.drop(index=list(keep))
    if len(rest) < 2:
        return group, ""
    kept = group.loc[sorted(keep)]
    kept = kept.assign(rank_label=_with_role(kept["rank_label"], featured))
    return (
        kept,
        f"{len(rest)} other ranks: {format_ns(rest.min())} to {format_ns(rest.max())} in all",
    )


def rank_kernel_table_html(
    trace: Trace, top: int, labels: Mapping[str, str], featured: Mapping[str, str] | None = None
) -> str:
    """The kernels by total time over every rank, each with one row per rank that ran it; with
    ``featured`` ranks (many ranks), the rows of those and of the ranks with the least and the most
    time in it, and one for the rest."""
    s = kernel_summary_by_rank(trace)
    if s.empty:
        return "<p>No kernels.</p>"
    order = (
        s.groupby("Name", sort=False)["Total Time (ns)"]
        .sum()
        .sort_values(ascending=False, kind="stable")
    )
    rows = []
    for name in order.index[:top]:
        group, others = _kernel_rows(s[s["Name"] == name], featured or {})
        k = decode(name)
        n = len(group) + bool(others)
        span = f" rowspan='{n}'" if n > 1 else ""
        for i, (_, r) in enumerate(group.iterrows()):
            cells = []
            if i == 0:
                cell = kernel_name_cell(r, labels[name], stats=False)
                cells.append(cell.replace("<td ", f"<td{span} ", 1))
            cells += [
                f"<td {style('word')}>{esc(r['rank_label'])}</td>",
                f"<td {style('num')}>{float(r['Time (%)']):.1f}%</td>",
                f"<td {style('num')}{ns_title(r['Total Time (ns)'])}>"
                f"{esc(format_ns(r['Total Time (ns)']))}</td>",
                f"<td {style('num')}>{int(r['Instances'])}</td>",
                f"<td {style('num')}{_stats_title(r)}>{esc(format_ns(r['Avg (ns)']))}</td>",
            ]
            if i == 0:
                words = (k.library, k.op, yes_no(k.tensor_cores), k.precision or "")
                cells += [f"<td{span} {style('word')}>{esc(v)}</td>" for v in words]
            rows.append("<tr>" + "".join(cells) + "</tr>")
        if others:
            rows.append(f"<tr><td colspan='5' {style('muted')}>{esc(others)}</td></tr>")
    table = table_html(header_cells(_KERNEL_COLUMNS), rows, "gm-kernels gm-kernels-by-rank")
    return table + kernels_left_out(len(order) - top)


def rank_kernel_text_lines(
    trace: Trace, top: int, labels: Mapping[str, str], featured: Mapping[str, str] | None = None
) -> list[str]:
    s = kernel_summary_by_rank(trace)
    if s.empty:
        return []
    order = (
        s.groupby("Name", sort=False)["Total Time (ns)"]
        .sum()
        .sort_values(ascending=False, kind="stable")
    )
    wide = 10 + max((len(role) + 3 for role in (featured or {})), default=0)
    lines = [f"  {'Rank':<{wide}} {'Time %':>6}  {'Total':>9}  {'Calls':>5}  {'Avg':>9}  Kernel"]
    for name in order.index[:top]:
        group, others = _kernel_rows(s[s["Name"] == name], featured or {})
        for i, (_, r) in enumerate(group.iterrows()):
            lines.append(
                f"  {r['rank_label']:<{wide}} {r['Time (%)']:6.1f}  "
                f"{format_ns(r['Total Time (ns)']):>9}  "
                f"{int(r['Instances']):>5}  {format_ns(r['Avg (ns)']):>9}  "
                f"{labels[name] if i == 0 else ''}".rstrip()
            )
        lines += [f"  ({others})"] if others else []
    return lines


def decoded_by_rank(trace: Trace, labels: Mapping[str, str]) -> pd.DataFrame:
    """:func:`kernel_summary_by_rank` plus the decoded name, as ``ProfileReport.kernel_summary``
    gives it."""
    s = kernel_summary_by_rank(trace)
    dec = s["Name"].map(decode)
    extra: dict[str, Any] = {
        "Short": s["Name"].map(labels),
        "Family": dec.map(lambda d: d.family),
        "Library": dec.map(lambda d: d.library),
        "Op": dec.map(lambda d: d.op),
        "Tensor cores": dec.map(lambda d: d.tensor_cores),
        "Precision": dec.map(lambda d: d.precision),
    }
    return s.assign(**extra)
