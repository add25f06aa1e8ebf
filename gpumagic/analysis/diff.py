"""Two runs compared: where the GPU time went, kernel by kernel and op by op, and the figures side
by side.

:func:`diff_summaries` takes two :class:`~gpumagic.analysis.profile_summary.ProfileSummary` (one per
run) and returns a :class:`DiffData`: pure numbers and sentences, no drawing
(``render/diff_view.py`` shows it).

- Ranks are compared rank by rank: "rank 1" of A with "rank 1" of B; two runs of one process each
  are compared whatever their labels; a rank only one run has is compared with nothing (all its
  kernels new or vanished).
- Within a rank, kernels are matched by what they are (``diff_match.py``).
- **The rows reconcile.** ``rows`` holds every kernel, memory-operation kind and, per rank, the
  overlap that GPU busy counts once (``ProfileSummary``'s ``overlap_ns``): their deltas add up
  exactly to B's GPU busy less A's.
- ``figures``: GPU busy and idle, the window, host synchronisations, copies, NCCL time split into
  waiting for other ranks and moving data (where both runs captured several ranks), side by side per
  rank.
- ``environment``: what differs between the runs' devices, driver, CUDA, torch, capture, and their
  GEMM precision, stated before anything else; ``changes``: the largest changes, a sentence each
  (``diff_text.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .diff_match import MATCH_COLUMNS, PAIR_COLUMNS, match_kernels
from .diff_text import change_sentences, environment
from .profile_summary import ProfileSummary

__all__ = ["DiffData", "diff_summaries", "module_diff"]

#: A diff row's columns: the rank and kind, both sides (:data:`.diff_match.PAIR_COLUMNS`), the
#: change, and how the kernels were matched (:data:`.diff_match.MATCH_COLUMNS`).
_ROW_COLS = ["rank", "kind", *PAIR_COLUMNS, "delta_ns", "ratio", *MATCH_COLUMNS]


@dataclass
class DiffData:
    """Run A against run B. ``rows``: one per kernel (or pair of matched kernels), memory-operation
    kind and rank overlap: ``rank``, ``kind`` ("kernel", "memop", "overlap"), ``name_a``,
    ``name_b``, ``calls_a``, ``calls_b``, ``ns_a``, ``ns_b``, ``delta_ns`` (B - A), ``ratio`` (B /
    A; NaN where A is 0), ``match`` ("same", "loose", "new", "vanished"; "" for memory operations
    and overlap), ``how`` (a loose match's stage), ``op`` and ``shapes`` (the launching op where
    known), ``first``; sorted by rank then the size of the change. ``ops``: per rank and launching
    op, ``calls_a``/``calls_b``, ``ns_a``/``ns_b``, ``delta_ns``, ``ratio`` (empty where neither run
    recorded ops). ``figures``: rank, figure, a, b, unit. ``ranks``: the rank pairs (label, A's
    label, B's label)."""

    a: ProfileSummary
    b: ProfileSummary
    rows: pd.DataFrame
    ops: pd.DataFrame
    figures: pd.DataFrame
    ranks: list[tuple[str, str | None, str | None]]
    environment: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    #: Per module (:func:`module_diff`): ``module``, ``depth``, ``fwd_ns_a``, ``bwd_ns_a``,
    #: ``fwd_ns_b``, ``bwd_ns_b``, ``delta_ns``; empty where a run has no module rows.
    modules: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def busy_a(self) -> int:
        return self.a.busy_ns

    @property
    def busy_b(self) -> int:
        return self.b.busy_ns

    @property
    def delta_ns(self) -> int:
        return self.busy_b - self.busy_a

    @property
    def ratio(self) -> float:
        """B's GPU busy time over A's (NaN where A's is 0)."""
        return self.busy_b / self.busy_a if self.busy_a else float("nan")

    @property
    def kernels(self) -> pd.DataFrame:
        return self.rows[self.rows["kind"] == "kernel"].reset_index(drop=True)

    def slower_beyond(self, share: float) -> bool:
        """Whether B's GPU busy time exceeds A's by more than ``share`` (0.05: 5%)."""
        return self.busy_b > self.busy_a * (1 + share)


def pair_ranks(a: ProfileSummary, b: ProfileSummary) -> list[tuple[str, str | None, str | None]]:
    """(the label shown, A's rank, B's rank): by label, or the one rank of each run together."""
    ra, rb = list(a.ranks["rank"]), list(b.ranks["rank"])
    if len(ra) == 1 and len(rb) == 1:
        return [(ra[0] if ra[0] == rb[0] else (ra[0] or rb[0]), ra[0], rb[0])]
    pairs: list[tuple[str, str | None, str | None]] = [(r, r, r if r in rb else None) for r in ra]
    return pairs + [(r, None, r) for r in rb if r not in ra]


def diff_summaries(a: ProfileSummary, b: ProfileSummary) -> DiffData:
    """A against B (see the module's docstring)."""
    ranks = pair_ranks(a, b)
    parts, ops = [], []
    for shown, ra, rb in ranks:
        ka = a.kernels[a.kernels["rank"] == ra] if ra is not None else a.kernels.iloc[0:0]
        kb = b.kernels[b.kernels["rank"] == rb] if rb is not None else b.kernels.iloc[0:0]
        k = match_kernels(ka, kb).assign(rank=shown, kind="kernel")
        parts += [k, _memop_rows(a, b, shown, ra, rb), _overlap_row(a, b, shown, ra, rb)]
        if a.ops_known and b.ops_known:  # an op one run did not record is unknown there, not gone
            ops.append(_op_rows(a, b, shown, ra, rb))
    rows = (
        pd.concat([p for p in parts if len(p)], ignore_index=True)
        if any(len(p) for p in parts)
        else None
    )
    rows = _finish(rows if rows is not None else pd.DataFrame(columns=_ROW_COLS))
    op_cols = ["rank", "op", "calls_a", "ns_a", "calls_b", "ns_b", "delta_ns", "ratio"]
    op_rows = pd.concat(ops, ignore_index=True) if ops else pd.DataFrame(columns=op_cols)
    data = DiffData(a, b, rows, op_rows, _figures(a, b, ranks), ranks)
    data.environment = environment(a, b, len(ranks))
    data.changes = change_sentences(data.rows, multi=len(ranks) > 1)
    data.modules = module_diff(a, b)
    return data


def module_diff(a: ProfileSummary, b: ProfileSummary) -> pd.DataFrame:
    """The two runs' module rows side by side, by module name (B's tree order, then A's modules
    that B lacks): forward and backward GPU time in each, and ``delta_ns`` (B - A of both). A
    module one run did not run shows 0 there. Empty unless both runs have module rows (a trace
    recorded without module information has none: it is not a module that vanished)."""
    ma, mb = a.modules, b.modules
    if ma.empty or mb.empty:
        return pd.DataFrame()
    left = ma[["module", "depth", "fwd_ns", "bwd_ns"]].rename(
        columns={"fwd_ns": "fwd_ns_a", "bwd_ns": "bwd_ns_a", "depth": "depth_a"}
    )
    right = mb[["module", "depth", "fwd_ns", "bwd_ns"]].rename(
        columns={"fwd_ns": "fwd_ns_b", "bwd_ns": "bwd_ns_b"}
    )
    rows = pd.concat(
        [right.merge(left, on="module", how="left"), left[~left["module"].isin(right["module"])]],
        ignore_index=True,
    )
    rows["depth"] = rows["depth"].fillna(rows["depth_a"]).astype(np.int64)
    for c in ("fwd_ns_a", "bwd_ns_a", "fwd_ns_b", "bwd_ns_b"):
        rows[c] = pd.to_numeric(rows[c], errors="coerce").fillna(0).astype(np.int64)
    rows["delta_ns"] = rows["fwd_ns_b"] + rows["bwd_ns_b"] - rows["fwd_ns_a"] - rows["bwd_ns_a"]
    cols = ["module", "depth", "fwd_ns_a", "bwd_ns_a", "fwd_ns_b", "bwd_ns_b", "delta_ns"]
    return rows[cols].reset_index(drop=True)


def _finish(rows: pd.DataFrame) -> pd.DataFrame:
    for c in ("calls_a", "calls_b", "ns_a", "ns_b", "first"):
        rows[c] = pd.to_numeric(rows[c], errors="coerce").fillna(0).astype(np.int64)
    rows["delta_ns"] = rows["ns_b"] - rows["ns_a"]
    rows["ratio"] = np.where(rows["ns_a"] > 0, rows["ns_b"] / rows["ns_a"].clip(lower=1), np.nan)
    for c in ("match", "how", "op", "shapes"):
        rows[c] = rows[c].fillna("")
    order = rows.assign(
        _size=-rows["delta_ns"].abs(), _kind=rows["kind"].map({"kernel": 0, "memop": 1}).fillna(2)
    )
    order = order.sort_values(["rank", "_kind", "_size", "first"], kind="stable")
    return order[_ROW_COLS].reset_index(drop=True)


def _side(df: pd.DataFrame, rank: str | None) -> pd.DataFrame:
    return df[df["rank"] == rank] if rank is not None else df.iloc[0:0]


def _memop_rows(
    a: ProfileSummary, b: ProfileSummary, shown: str, ra: str | None, rb: str | None
) -> pd.DataFrame:
    ma = _side(a.memops, ra).set_index("kind")
    mb = _side(b.memops, rb).set_index("kind")
    kinds = list(dict.fromkeys([*ma.index, *mb.index]))
    rows = []
    for kind in kinds:
        ca, cb = (int(m["count"].get(kind, 0)) for m in (ma, mb))
        rows.append(
            {
                "rank": shown,
                "kind": "memop",
                "name_a": kind if kind in ma.index else None,
                "name_b": kind if kind in mb.index else None,
                "calls_a": ca,
                "calls_b": cb,
                "ns_a": int(ma["ns"].get(kind, 0)),
                "ns_b": int(mb["ns"].get(kind, 0)),
                "match": "same" if ca and cb else ("new" if cb else "vanished"),
            }
        )
    return pd.DataFrame(rows)


def _overlap_row(
    a: ProfileSummary, b: ProfileSummary, shown: str, ra: str | None, rb: str | None
) -> pd.DataFrame:
    """GPU busy counts concurrent work once: the kernels' and copies' summed time less the
    overlap."""
    oa = int(_side(a.ranks, ra)["overlap_ns"].sum())
    ob = int(_side(b.ranks, rb)["overlap_ns"].sum())
    if not oa and not ob:
        return pd.DataFrame()
    name = "overlap (concurrent work, counted once in GPU busy)"
    return pd.DataFrame(
        [{"rank": shown, "kind": "overlap", "name_a": name, "name_b": name, "ns_a": oa, "ns_b": ob}]
    )


def _op_rows(
    a: ProfileSummary, b: ProfileSummary, shown: str, ra: str | None, rb: str | None
) -> pd.DataFrame:
    oa, ob = _side(a.ops, ra), _side(b.ops, rb)
    if oa.empty and ob.empty:
        return pd.DataFrame()
    m = oa[["op", "calls", "ns"]].merge(
        ob[["op", "calls", "ns"]], on="op", how="outer", suffixes=("_a", "_b")
    )
    for c in ("calls_a", "calls_b", "ns_a", "ns_b"):
        m[c] = m[c].fillna(0).astype(np.int64)
    m["delta_ns"] = m["ns_b"] - m["ns_a"]
    m["ratio"] = np.where(m["ns_a"] > 0, m["ns_b"] / m["ns_a"].clip(lower=1), np.nan)
    m.insert(0, "rank", shown)
    return (
        m.assign(_size=-m["delta_ns"].abs())
        .sort_values("_size", kind="stable")
        .drop(columns="_size")
    )


def _figures(
    a: ProfileSummary, b: ProfileSummary, ranks: list[tuple[str, str | None, str | None]]
) -> pd.DataFrame:
    """Side by side per rank: the figures a run is judged by."""
    out = []
    for shown, ra, rb in ranks:
        fa, fb = _rank_figures(a, ra), _rank_figures(b, rb)
        for name, unit in _FIGURES:
            va, vb = fa.get(name), fb.get(name)
            if va is None and vb is None:
                continue
            out.append({"rank": shown, "figure": name, "a": va, "b": vb, "unit": unit})
    return pd.DataFrame(out, columns=["rank", "figure", "a", "b", "unit"])


_FIGURES = [
    ("GPU busy", "ns"),
    ("window", "ns"),
    ("GPU idle", "ns"),
    ("GPU idle share", "share"),
    ("kernels", "count"),
    ("kernel time", "ns"),
    ("host syncs", "count"),
    ("host sync time", "ns"),
    ("HtoD copies", "ns"),
    ("DtoH copies", "ns"),
    ("DtoD copies", "ns"),
    ("copied", "bytes"),
    ("NCCL", "ns"),
    ("NCCL wait", "ns"),
    ("NCCL transfer", "ns"),
]


def _rank_figures(s: ProfileSummary, rank: str | None) -> dict[str, float | None]:
    if rank is None:
        return {}
    r = s.ranks[s.ranks["rank"] == rank]
    if r.empty:
        return {}
    r = r.iloc[0]
    busy, wall = int(r["busy_ns"]), int(r["wall_ns"])
    idle = max(wall - busy, 0)
    f: dict[str, float | None] = {
        "GPU busy": busy,
        "window": wall,
        "GPU idle": idle,
        "GPU idle share": idle / wall if wall else None,
        "kernels": int(r["kernels"]),
        "kernel time": int(r["kernel_ns"]),
    }
    if "api" in s.recorded:
        f["host syncs"], f["host sync time"] = int(r["sync_calls"]), int(r["sync_ns"])
    m = s.memops[s.memops["rank"] == rank]
    for kind in ("HtoD", "DtoH", "DtoD"):
        mine = m[m["kind"] == kind]
        if len(mine):
            f[f"{kind} copies"] = int(mine["ns"].sum())
    if len(m):
        f["copied"] = int(m[m["kind"] != "memset"]["bytes"].sum())
    if int(r["nccl_ns"]):
        f["NCCL"] = int(r["nccl_ns"])
        if int(r["nccl_wait_ns"]) >= 0:
            f["NCCL wait"] = int(r["nccl_wait_ns"])
            f["NCCL transfer"] = int(r["nccl_ns"]) - int(r["nccl_wait_ns"])
    return f
