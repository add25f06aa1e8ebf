"""A job's findings, made of its summaries: the same rules as a Trace's where a rule takes figures
(the reading of the files, the straggler, exposed communication: ``analysis``' ``*_of``
functions), and per group of ranks where a Trace's would name every rank.

A group is a host where the job ran on several (its ranks share a node's CPUs, network and power),
else a block of consecutive ranks; a finding about many ranks says how many of each group it is
about, not a figure per rank. A slow node is a host whose every rank the others wait for: its
ranks' median NCCL time is below every other host's by at least the straggler's threshold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..analysis.communication import (
    STRAGGLER_MIN_NS,
    WAIT_SHARE,
    comm_exposed_of,
    straggler_of,
)
from ..analysis.finding import Finding, t
from ..analysis.job_files import job_files_of
from ..analysis.rank_lists import LIST_RANKS, on_ranks
from ..analysis.transfers import SYNC_SHARE
from ..units import plural

if TYPE_CHECKING:  # named through the package: Job's own module imports this one (lazily)
    from . import Job

__all__ = ["IDLE_SHARE", "groups", "job_findings"]

#: A GPU busy under this share of its rank's range is idle most of it (as ``analysis.pace``).
IDLE_SHARE = 0.5
#: Blocks of consecutive ranks hold at most this many ranks when the job ran on one host.
BLOCK = 64


def groups(ranks: pd.DataFrame) -> pd.Series:
    """Each rank's group (indexed like ``ranks``): its host where there are several, else its block
    of :data:`BLOCK` consecutive ranks ("ranks 0-63")."""
    hosts = ranks["host"].replace("", np.nan)
    if hosts.notna().all() and hosts.nunique() > 1:
        return ranks["host"].astype(str)
    block = ranks["rank"] // BLOCK
    return block.map(lambda b: f"ranks {b * BLOCK}-{b * BLOCK + BLOCK - 1}")


def _by_group(hit: pd.Series, group: pd.Series) -> str:
    """ "8 on node-3, 4 on node-7" of the ranks ``hit`` (booleans), the groups with most first."""
    counts = group[hit].value_counts()
    total = group.value_counts()
    parts = [f"{n} of {total[g]} on {g}" for g, n in counts.items()]
    more = f", and {len(parts) - LIST_RANKS} more groups" if len(parts) > LIST_RANKS else ""
    return "; ".join(parts[:LIST_RANKS]) + more


def job_findings(job: Job) -> list[Finding]:
    """Every finding about ``job`` (a :class:`~.model.Job`), the reading of its files first."""
    fig, ranks = job.data.figures, job.data.ranks
    out = list(job_files_of(job.meta))
    out += _missing(ranks)
    out += _idle(fig, ranks)
    out += straggler_of(fig) if len(fig) > 1 else []
    out += _slow_node(fig, ranks)
    out += comm_exposed_of(fig, job.waits()) if len(fig) > 1 else []
    out += _syncs(fig, ranks)
    out += _top(job)
    return out


def _missing(ranks: pd.DataFrame) -> list[Finding]:
    launched, missing = int(ranks["launches"].sum()), int(ranks["missing"].sum())
    after = int(ranks["after_capture"].sum()) if "after_capture" in ranks else 0
    if not (missing or after) or ranks["graph"].any():
        return []
    out = []
    if missing:
        hit = ranks["missing"] > 0
        out.append(
            Finding(
                "kernels_missing",
                "warn",
                f"{missing} of {launched} kernel launches have no kernel in the capture "
                f"({on_ranks(int(hit.sum()), len(ranks))}: {_by_group(hit, groups(ranks))}): the "
                "profiler lost them, so GPU time is under-reported.",
                {"missing": missing, "launches": launched},
            )
        )
    if after:
        hit = ranks["after_capture"] > 0
        out.append(
            Finding(
                "launches_after_capture",
                "info",
                f"{after} kernel launches came after the capture "
                f"({on_ranks(int(hit.sum()), len(ranks))}: {_by_group(hit, groups(ranks))}): "
                "issued after the last launch whose kernel it recorded, their kernels ran once it "
                "had ended (not lost).",
                {"after_capture": after, "launches": launched},
            )
        )
    return out


def _idle(fig: pd.DataFrame, ranks: pd.DataFrame) -> list[Finding]:
    share = fig["busy_ns"] / fig["span_ns"].clip(lower=1)
    idle = fig[(share < IDLE_SHARE) & (fig["span_ns"] > 0)]
    if idle.empty:
        return []
    hit = ranks["label"].isin(set(idle["label"]))
    worst = share[idle.index].idxmin()
    busy = share.drop(index=idle.index)
    others = f"; the other ranks busy {busy.min():.0%} to {busy.max():.0%}" if len(busy) else ""
    return [
        Finding(
            "gpu_idle",
            "warn",
            f"GPUs idle most of each rank's range {on_ranks(int(hit.sum()), len(ranks))} "
            f"({_by_group(hit, groups(ranks))}): the most idle {fig.loc[worst, 'label']}, busy "
            f"{share[worst]:.0%} of {t(fig.loc[worst, 'span_ns'])}{others}.",
            {"ranks": idle["label"].tolist(), "busy_share": share[idle.index].tolist()},
        )
    ]


def _slow_node(fig: pd.DataFrame, ranks: pd.DataFrame) -> list[Finding]:
    hosts = ranks.set_index("label")["host"]
    if (hosts == "").any() or hosts.nunique() < 2:
        return []
    per = fig.groupby("label", sort=False).agg(
        nccl_ns=("nccl_ns", "sum"), span_ns=("span_ns", "first")
    )
    per["host"] = hosts.reindex(per.index)
    by_host = per.groupby("host").agg(
        nccl_ns=("nccl_ns", "median"), span_ns=("span_ns", "median"), ranks=("nccl_ns", "size")
    )
    if not per["nccl_ns"].gt(0).all():
        return []
    slow = by_host["nccl_ns"].idxmin()
    others = by_host.drop(index=slow)
    wait = others["nccl_ns"] - by_host.loc[slow, "nccl_ns"]
    if by_host.loc[slow, "ranks"] < 2 or wait.min() < STRAGGLER_MIN_NS:
        return []
    share = wait / others["span_ns"].clip(lower=1)
    if share.min() < WAIT_SHARE:
        return []
    n = int(by_host.loc[slow, "ranks"])
    return [
        Finding(
            "slow_node",
            "warn",
            f"{slow} is a slow node: the ranks of the other {len(others)} hosts spend a median "
            f"{t(wait.min())} to {t(wait.max())} more inside NCCL ({share.min():.0%} to "
            f"{share.max():.0%} of their range) than its {n} ranks, waiting for them. Every rank "
            "of one host late: its CPUs, its network link, its GPUs' clocks (power, heat) or "
            "work placed on that host.",
            {"host": slow, "ranks": n, "wait_ns": [int(w) for w in wait]},
        )
    ]


def _syncs(fig: pd.DataFrame, ranks: pd.DataFrame) -> list[Finding]:
    span = fig.drop_duplicates("rank").set_index("rank")["span_ns"]
    r = ranks.set_index("rank")
    share = r["sync_ns"] / span.reindex(r.index).clip(lower=1)
    hit = (share >= SYNC_SHARE) & (r["sync_calls"] > 0)
    if not hit.any():
        return []
    worst = share[hit].idxmax()
    mask = ranks["rank"].isin(hit[hit].index)
    return [
        Finding(
            "host_sync",
            "warn",
            f"The host waited for the GPU inside the window {on_ranks(int(hit.sum()), len(r))} "
            f"({_by_group(mask, groups(ranks))}): most on rank {worst}, "
            f"{plural(int(r.loc[worst, 'sync_calls']), 'time')}, {t(r.loc[worst, 'sync_ns'])}, "
            f"{share[worst]:.0%} of its range. .item(), .cpu(), printing a tensor and "
            "data-dependent shapes each wait for the GPU; keep values on the GPU, or read them "
            "once at the end.",
            {
                "ranks": [f"rank {x}" for x in hit[hit].index],
                "ns": r.loc[hit, "sync_ns"].astype(int).tolist(),
                "calls": r.loc[hit, "sync_calls"].astype(int).tolist(),
            },
        )
    ]


def _top(job: Job, top: int = 3) -> list[Finding]:
    spread = job.kernel_spread()
    if spread.empty:
        return []
    from ..kernels import decode

    total = int(spread["Total Time (ns)"].sum())
    parts = [
        f"{decode(r['Name']).short or r['Name'][:60]} {r['Total Time (ns)'] / total:.0%} "
        f"(per rank {t(r['Min rank (ns)'])} to {t(r['Max rank (ns)'])})"
        for _, r in spread.head(top).iterrows()
    ]
    return [
        Finding(
            "top_kernels",
            "info",
            f"Top kernels over the job, by share of its kernel time: {'; '.join(parts)}.",
            {"names": spread["Name"].head(top).tolist()},
        )
    ]
