"""The reduce of a job: rank summaries folded as they finish, each released once folded, into the
job's tables.

:class:`Fold` takes each :class:`~.rank_summary.RankSummary` the moment its rank is read (in any
order): the per-name statistics go into the job's merged tables at once (``stats.py``), and of the
rest it keeps what the cross-rank facts need, a few KB a rank: the per-GPU figures, the findings'
inputs, the NCCL arrays and the binned busy time. :meth:`Fold.finish` then makes the cross-rank
facts as ``job.reports`` and ``analysis`` make them of a stacked Trace (the same functions where
they take figures): which rank each file is and by what rule, whether the files can be one job, the
clock alignment, the skews, the NCCL waits, the heatmap's grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.ranks import FIGURE_COLUMNS, with_skews
from .busy_bins import job_grid, rebin
from .collectives import alignment, nccl_frame, waits_by_pid
from .identity import mismatch
from .rank_summary import RankSummary
from .reports import PID_SPAN, rank_rule
from .stats import TABLES, NameTable

__all__ = ["HEAT_COLUMNS", "Fold", "JobData"]

#: The heatmap's time bins across the job (at most).
HEAT_COLUMNS = 240
_META = ("backend", "device", "sm_count", "compute_capability", "nsys_version")


@dataclass
class JobData:
    """A job's folded tables (what :class:`~.model.Job` shows and saves)."""

    figures: pd.DataFrame  # rank_figures' columns, one row per rank and GPU
    ranks: pd.DataFrame  # one row per rank: its file, host, NCCL wait, the findings' inputs
    summaries: dict[str, pd.DataFrame]  # nsys stats' tables over the job (Med approximate)
    rank_kernels: pd.DataFrame  # per rank and kernel name: Instances, Total, Min, Max (exact)
    busy: pd.DataFrame  # per rank (rows, in rank order), busy share per job time bin
    meta: dict[str, Any]


@dataclass
class _Kept:
    """What the fold keeps of one rank (its summary itself is released)."""

    summary: RankSummary  # with its statistics dropped
    nccl_codes: np.ndarray
    kernel_codes: np.ndarray
    kernel_arrays: dict[str, np.ndarray]


@dataclass
class Fold:
    """Rank summaries folded as they come; :meth:`finish` gives the :class:`JobData`."""

    files: list[str]
    tables: dict[str, NameTable] = field(default_factory=lambda: {t: NameTable() for t in TABLES})
    nccl_names: NameTable = field(default_factory=NameTable)
    kept: dict[int, _Kept] = field(default_factory=dict)
    unreadable: list[tuple[str, str]] = field(default_factory=list)

    def add(self, index: int, summary: RankSummary) -> None:
        """Fold the summary of ``files[index]``."""
        codes = {t: self.tables[t].add(summary.stats[t]) for t in TABLES}
        k = summary.stats["kernels"]
        arrays = {a: np.asarray(k.arrays[a]) for a in ("count", "total", "min", "max")}
        nccl = self.nccl_names.codes(summary.nccl_names)
        summary.stats = {}
        summary.units = summary.units.to_dict("list")  # plain lists: a frame a rank costs KBs
        self.kept[index] = _Kept(summary, nccl, codes["kernels"], arrays)

    def merge(self, other: Fold) -> Fold:
        """Take in ``other`` (ranks of the same files folded elsewhere, none of them here): its
        merged statistics as one part each, its kept ranks with their names renumbered into this
        fold's. Folds merge in any order and grouping (a tree of merges on a cluster)."""
        codes = {t: self.tables[t].merge(other.tables[t]) for t in TABLES}
        nccl = self.nccl_names.codes(list(other.nccl_names.index))
        for index, k in other.kept.items():  # ``other`` itself unchanged
            self.kept[index] = replace(
                k, nccl_codes=nccl[k.nccl_codes], kernel_codes=codes["kernels"][k.kernel_codes]
            )
        self.unreadable.extend(other.unreadable)
        return self

    def fail(self, index: int, reason: str) -> None:
        self.unreadable.append((self.files[index], reason))

    @property
    def done(self) -> int:
        return len(self.kept) + len(self.unreadable)

    def finish(self, align: str = "auto") -> JobData:
        order = sorted(self.kept)
        kept = [self.kept[i] for i in order]
        summaries = [k.summary for k in kept]
        ranks, rule = rank_rule(summaries)
        offsets = _offsets(summaries)
        reasons = mismatch(summaries, ranks)
        frame = nccl_frame(
            [(s.nccl, k.nccl_codes, off) for s, k, off in zip(summaries, kept, offsets)]
        )
        rank_of = {p + off: r for s, r, off in zip(summaries, ranks, offsets) for p in s.pids}
        clock = self._clock(summaries, frame, rank_of, offsets, align)
        shifts = clock.get("shifts_ns") or {}
        figures = _figures(summaries, ranks, offsets, shifts)
        waits = waits_by_pid(frame)
        meta = _meta(summaries, self.files, self.unreadable, rule, reasons, clock)
        return JobData(
            figures=figures,
            ranks=_rank_rows(summaries, ranks, offsets, waits),
            summaries={t: self.tables[t].frame(t) for t in TABLES},
            rank_kernels=self._rank_kernels(kept, ranks),
            busy=_busy(summaries, ranks, offsets, shifts, figures),
            meta=meta,
        )

    def _clock(
        self,
        summaries: list[RankSummary],
        frame: dict[str, np.ndarray],
        rank_of: dict[int, int],
        offsets: list[int],
        align: str,
    ) -> dict[str, Any]:
        hosts = [s.host for s in summaries]
        same_host = len(set(hosts)) == 1 and hosts[0] is not None
        if align == "collective" or (align == "auto" and not same_host and len(summaries) > 1):
            pids = [p + off for s, off in zip(summaries, offsets) for p in s.facts["kernel_pids"]]
            if not pids:
                return {"method": "none: no kernels to align on"}
            return alignment(frame, pids, rank_of, list(self.nccl_names.index))
        return {
            "method": "none" if align == "none" else "one host: clocks shared",
            "host": hosts[0] if hosts else None,
        }

    def _rank_kernels(self, kept: list[_Kept], ranks: list[int]) -> pd.DataFrame:
        names = np.asarray(list(self.tables["kernels"].index), dtype=object)
        cols = ["rank", "Name", "Instances", "Total Time (ns)", "Min (ns)", "Max (ns)"]
        if not kept or not sum(len(k.kernel_codes) for k in kept):
            return pd.DataFrame(columns=cols)

        def joined(key: str) -> np.ndarray:
            return np.concatenate([k.kernel_arrays[key] for k in kept]).astype(np.int64)

        codes = np.concatenate([k.kernel_codes for k in kept])
        df = pd.DataFrame(
            {
                "rank": np.repeat(np.asarray(ranks, np.int64), [len(k.kernel_codes) for k in kept]),
                "Name": pd.Categorical.from_codes(codes, categories=names),
                "Instances": joined("count"),
                "Total Time (ns)": joined("total"),
                "Min (ns)": joined("min"),
                "Max (ns)": joined("max"),
            }
        )
        return df.sort_values(["rank", "Total Time (ns)"], ascending=[True, False]).reset_index(
            drop=True
        )


def _offsets(summaries: list[RankSummary]) -> list[int]:
    """Each file's pid offset, as ``job.reports`` stacks them (pids of another host that
    collide)."""
    seen: set[int] = set()
    out = []
    for i, s in enumerate(summaries):
        offset = PID_SPAN * (i + 1) if seen & set(s.pids) else 0
        seen |= {p + offset for p in s.pids}
        out.append(offset)
    return out


def _figures(
    summaries: list[RankSummary], ranks: list[int], offsets: list[int], shifts: dict[int, int]
) -> pd.DataFrame:
    """Every rank's per-GPU rows in one frame, built once from the ranks' lists (a frame per rank
    costs tens of KB each)."""
    cols: dict[str, list[Any]] = {c: [] for c in ("rank", "label", *summaries[0].units)}
    for s, r, off in zip(summaries, ranks, offsets):
        n = len(s.units["pid"])
        for c, values in s.units.items():
            if c == "pid":
                values = [int(p) + off for p in values]
            elif c in ("start", "end"):
                values = [
                    int(v) + shifts.get(int(p) + off, 0) for v, p in zip(values, s.units["pid"])
                ]
            cols[c].extend(values)
        cols["rank"].extend([r] * n)
        cols["label"].extend([f"rank {r}"] * n)
    df = pd.DataFrame(cols)
    df = df.sort_values(["rank", "pid", "device"], kind="stable").reset_index(drop=True)
    df = with_skews(df, df["pid"].to_numpy())
    return df[FIGURE_COLUMNS]


def _rank_rows(
    summaries: list[RankSummary], ranks: list[int], offsets: list[int], waits: dict[int, int]
) -> pd.DataFrame:
    rows = []
    for s, r, off in zip(summaries, ranks, offsets):
        syncs = s.facts["syncs"].values()
        rows.append(
            {
                "rank": r,
                "label": f"rank {r}",
                "path": s.path,
                "host": s.host or "",
                "pids": ",".join(str(p + off) for p in s.pids),
                "nccl_wait_ns": sum(waits.get(int(p) + off, 0) for p in set(s.units["pid"])),
                "sync_calls": sum(x["calls"] for x in syncs),
                "sync_ns": sum(x["ns"] for x in syncs),
                "sync_by_name": ";".join(
                    f"{k}={v}" for x in syncs for k, v in x["by_name"].items()
                ),
                "launches": s.facts["launches"],
                "missing": s.facts["missing"],
                "after_capture": s.facts.get("after", 0),
                "graph": bool(s.facts["graph"]),
                "kernel_ns": s.facts["kernel_ns"],
                "read_s": s.seconds,
            }
        )
    return pd.DataFrame(rows).sort_values("rank", kind="stable").reset_index(drop=True)


def _busy(
    summaries: list[RankSummary],
    ranks: list[int],
    offsets: list[int],
    shifts: dict[int, int],
    figures: pd.DataFrame,
) -> pd.DataFrame:
    """Each rank's busy share per bin of the job's time axis (rows in rank order); the grid in the
    frame's ``attrs`` (``shift``, ``first``: bin ``i`` starts at ``(first + i) << shift`` ns)."""
    with_bins = [
        (r, s.bins, shifts.get(int(s.units["pid"][0]) + off, 0))
        for s, r, off in zip(summaries, ranks, offsets)
        if s.bins is not None and len(s.units["pid"])
    ]
    if not with_bins or figures.empty:
        return pd.DataFrame()
    lo, hi = int(figures["start"].min()), int(figures["end"].max())
    finest = max(b.shift for _, b, _ in with_bins)
    shift, first, n = job_grid(lo, hi, finest, HEAT_COLUMNS)
    rows = {r: rebin(b, move, shift, first, n) for r, b, move in with_bins}
    order = sorted(rows)
    df = pd.DataFrame(np.stack([rows[r] for r in order]), index=pd.Index(order, name="rank"))
    df.columns = [str(c) for c in df.columns]
    df.attrs.update(shift=shift, first=first)
    return df


def _meta(
    summaries: list[RankSummary],
    files: list[str],
    unreadable: list[tuple[str, str]],
    rule: str,
    reasons: list[str],
    clock: dict[str, Any],
) -> dict[str, Any]:
    first = summaries[0].meta if summaries else {}
    meta = {k: first[k] for k in _META if k in first}
    recorded = [set(s.meta["recorded"]) for s in summaries if s.meta.get("recorded") is not None]
    if recorded:
        meta["recorded"] = sorted(set.intersection(*recorded))
    meta.update(
        source=[s.path for s in summaries],
        files=len(files),
        rank_rule=rule,
        job_mismatch=reasons,
        clock_alignment=clock,
        unreadable=[{"path": p, "reason": why} for p, why in unreadable],
        hosts=[s.host for s in summaries],
        gpus=sorted({str(g.get("name")) for s in summaries for g in s.meta.get("gpus") or []}),
    )
    return meta
