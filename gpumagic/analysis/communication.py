"""Findings of a multi-rank trace: communication that compute does not hide, and the rank the others
wait for.

Both read :func:`~gpumagic.analysis.ranks.rank_figures` (per process and GPU, over that process's
range) and say nothing about a single-process, single-GPU trace.

What an NCCL kernel's *name* can tell, and why no finding here reads a protocol or a transport from
it: NCCL (2.19 on, names ``ncclDevKernel_*``) compiles one kernel per collective and data type and
runs every algorithm and protocol through it. Its build script (``src/device/generate.py``,
``best_kernel``) names AllGather, AllGatherV and Broadcast kernels ``<coll>_RING_LL`` and reductions
``<coll>_Sum_<type>_{TREE|RING}_LL`` whatever runs: the name always ends in ``LL`` (the protocol run
may be LL, LL128 or Simple), says ``Sum`` for every reduction operator, and says ``RING`` for every
algorithm other than the tree (NVLS, CollNet, PAT included). NCCL's maintainers say the same
(NVIDIA/nccl #1246, #1595, #2196). Older NCCL (``ncclKernel_*``, before 2.19) instantiated its
kernels for the LL protocol only, likewise dispatching to the others. The transport (NVLink P2P,
shared memory, PCIe, network) is in no kernel name. So a name tells the collective, the data type,
and whether the tree algorithm ran; it cannot tell a slow protocol or a fallback transport, and
nothing here claims one (``NCCL_DEBUG=INFO`` with ``NCCL_DEBUG_SUBSYS=INIT,TUNING`` prints both).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..trace import Trace
from .finding import Finding, t
from .rank_kernels import waits_by_rank
from .rank_lists import LIST_RANKS, listed, on_ranks
from .ranks import is_multi, rank_figures

__all__ = [
    "COMM_MIN_NS",
    "COMM_SHARE",
    "HOST_SHARE_OF_WAIT",
    "LIST_RANKS",
    "OVERLAP_LOW",
    "STRAGGLER_MIN_NS",
    "WAIT_SHARE",
    "WORK_SHARE_OF_WAIT",
    "comm_exposed",
    "comm_exposed_of",
    "straggler",
    "straggler_of",
]

#: Communication worth a word: at least this share of a GPU's busy time (below it, hiding it gains
#: little)...
COMM_SHARE = 0.10
#: ... and at least this long (a short cell's single small all-reduce is not worth restructuring a
#: step for).
COMM_MIN_NS = 200_000
#: Communication counts as not overlapped when less than this share of it runs beside compute
#: kernels: DDP's bucketed all-reduce overlaps most of the backward pass when it works; under half
#: means the ranks mostly wait.
OVERLAP_LOW = 0.5
#: A straggler: the other ranks spend at least this share of their range more inside collectives
#: than it does. A collective kernel runs from when its rank enters it until the last rank has
#: entered (then the transfer), so the rank the others wait for has the least NCCL time; 5% of every
#: step lost waiting for one rank is worth fixing...
WAIT_SHARE = 0.05
#: ... and at least this long, so that microseconds of jitter entering a collective are not called a
#: straggler.
STRAGGLER_MIN_NS = 500_000
#: Where the straggler's extra GPU work (its work less the busiest other rank's) is at least this
#: share of the time that rank waits for it, the work explains most of the gap: uneven work. Work
#: against work, and against the wait it is to explain: never against the range, which holds host
#: time, start-up and idle stretches of any length.
WORK_SHARE_OF_WAIT = 0.5
#: Under this share, the extra GPU work explains little of the wait: the straggler is late on the
#: host.
HOST_SHARE_OF_WAIT = 0.2


def _who(row: pd.Series) -> str:
    return (
        f"{row['label']} (GPU {int(row['device'])})"
        if int(row["device"]) >= 0
        else str(row["label"])
    )


def comm_exposed(trace: Trace) -> list[Finding]:
    """Per rank and GPU: NCCL time moving data that is a real share of its GPU work and mostly does
    not overlap compute. Time an NCCL kernel spends waiting for a late rank is left out (the
    straggler finding tells it)."""
    if not is_multi(trace):
        return []
    return comm_exposed_of(rank_figures(trace), waits_by_rank(trace))


def comm_exposed_of(fig: pd.DataFrame, waits: Mapping[str, int]) -> list[Finding]:
    """:func:`comm_exposed` from the per-rank figures (``rank_figures``' columns) and each rank's
    NCCL wait: one rule for a Trace and for a job read rank by rank (``gpumagic.job``)."""
    wait = fig["label"].map(waits).fillna(0).clip(upper=fig["nccl_ns"])
    moving = fig["nccl_ns"] - wait
    share = moving / (fig["busy_ns"] - wait).clip(lower=1)
    # a GPU with no compute of its own (an NCCL-only trace, a rank that only waited) has nothing
    # to hide its communication behind: nothing to say of it
    computes = fig["work_ns"] > 0
    hit = (
        (moving >= COMM_MIN_NS)
        & (share >= COMM_SHARE)
        & (fig["overlap_share"] < OVERLAP_LOW)
        & computes
    )
    if not hit.any():
        return []
    parts = []
    shown = fig.index[hit]
    if (
        len(shown) > LIST_RANKS
    ):  # many ranks: the most exposed first (listed() keeps a few, then how many more)
        shown = moving[hit].sort_values(ascending=False, kind="stable").index
    for i in shown:
        r = fig.loc[i]
        waited = f"; it also waited {t(wait[i])} for other ranks" if wait[i] >= COMM_MIN_NS else ""
        parts.append(
            f"{_who(r)}: {t(moving[i])} of NCCL moving data ({share[i]:.0%} of its GPU busy "
            f"time, waits left out), "
            f"{r['overlap_share']:.0%} overlapped with compute{waited}"
        )
    where = on_ranks(fig.loc[hit, "label"].nunique(), fig["label"].nunique(), fig["label"].tolist())
    return [
        Finding(
            "comm_exposed",
            "warn",
            f"Communication is not hidden behind compute {where}: {listed(parts)}. While an "
            f"NCCL kernel runs alone the "
            "GPU waits on the other ranks: DDP overlaps its gradient all-reduce with the "
            "backward pass bucket by "
            "bucket (bucket_cap_mb sets how soon the first one starts); FSDP's "
            "backward_prefetch and "
            "forward_prefetch start the next all-gather early; a value read on the host "
            "(loss.item()) right after "
            "a collective makes the step wait for it.",
            {
                "ranks": fig.loc[hit, "label"].tolist(),
                "nccl_ns": moving[hit].astype(int).tolist(),
                "wait_ns": wait[hit].astype(int).tolist(),
                "nccl_share": share[hit].tolist(),
                "overlap_share": fig.loc[hit, "overlap_share"].tolist(),
            },
        )
    ]


def _spend(wait: pd.Series, share: pd.Series) -> str:
    if len(wait) == 1:
        return (
            f"{wait.index[0]} spends {t(wait.iloc[0])} more inside NCCL "
            f"({share.iloc[0]:.0%} of its range)"
        )
    if t(wait.min()) == t(wait.max()) and f"{share.min():.0%}" == f"{share.max():.0%}":
        each = f"{t(wait.min())} more inside NCCL ({share.min():.0%} of their range)"
        return f"the other {len(wait)} ranks each spend {each}"
    return (
        f"the other ranks spend {t(wait.min())} to {t(wait.max())} more inside NCCL "
        f"({share.min():.0%} to "
        f"{share.max():.0%} of their range)"
    )


def straggler(trace: Trace) -> list[Finding]:
    """The rank the others wait for: every other rank spends at least :data:`WAIT_SHARE` of its
    range and :data:`STRAGGLER_MIN_NS` more inside NCCL than it does. Whether its GPU work is uneven
    says where to look."""
    if not is_multi(trace):
        return []
    return straggler_of(rank_figures(trace))


def straggler_of(fig: pd.DataFrame) -> list[Finding]:
    """:func:`straggler` from the per-rank figures (``rank_figures``' columns): one rule for a
    Trace and for a job read rank by rank (``gpumagic.job``)."""
    per = fig.groupby("label", sort=False).agg(
        nccl_ns=("nccl_ns", "sum"),
        span_ns=("span_ns", "first"),
        work_ns=("work_ns", "sum"),
    )
    if len(per) < 2 or not per["nccl_ns"].gt(0).all():
        return []
    slow = per["nccl_ns"].idxmin()
    others = per.drop(index=slow)
    wait = others["nccl_ns"] - per.loc[slow, "nccl_ns"]
    share = wait / others["span_ns"].clip(lower=1)
    if wait.min() < STRAGGLER_MIN_NS or share.min() < WAIT_SHARE:
        return []
    row = per.loc[slow]
    if len(per) <= LIST_RANKS:
        nccl = ", ".join(f"{label} {t(ns)}" for label, ns in per["nccl_ns"].items())
    else:  # many ranks: the straggler's and the range of the others', not a figure per rank
        nccl = (
            f"{slow} {t(per.loc[slow, 'nccl_ns'])}, the other {len(others)} ranks "
            f"{t(others['nccl_ns'].min())} to "
        )
        nccl += t(others["nccl_ns"].max())
    busiest = others["work_ns"].idxmax()
    extra = int(
        row["work_ns"] - others.loc[busiest, "work_ns"]
    )  # more GPU work than every other rank: like with like
    gap = int(
        wait[busiest]
    )  # how long that rank waits for the straggler: what the extra work is to explain
    cause = _cause(
        int(row["work_ns"]), busiest, int(others.loc[busiest, "work_ns"]), extra, gap, len(others)
    )
    return [
        Finding(
            "straggler",
            "warn",
            f"{slow} is the straggler: {_spend(wait, share)}, waiting for it to reach each "
            f"collective "
            f"(NCCL time: {nccl}). {cause}",
            {
                "rank": slow,
                "wait_ns": [int(w) for w in wait],
                "wait_share": [float(x) for x in share],
                "extra_work_ns": extra,
                "extra_share_of_wait": extra / max(gap, 1),
            },
        )
    ]


def _cause(work: int, busiest: str, their_work: int, extra: int, gap: int, others: int) -> str:
    """Where the straggler's lateness comes from, by its GPU work against the busiest other rank's,
    as a share of how long that rank waits for it: most of the wait (uneven work), little or none of
    it (the host), or a part."""
    most = ", the most among the other ranks" if others > 1 else ""
    compared = (
        f"Its GPU work (kernels other than NCCL, and copies) is {t(work)} against "
        f"{busiest}'s {t(their_work)}{most}"
    )
    share = extra / max(gap, 1)
    if extra > 0 and share >= WORK_SHARE_OF_WAIT:
        return (
            f"{compared}: {t(extra)} more, {min(share, 1):.0%} of the {t(gap)} {busiest} "
            f"waits for it. Uneven work "
            "per rank (inputs of different lengths, work done on one rank only) or a slower GPU."
        )
    host = "data loading, Python work on that rank only (logging, a checkpoint), or a busier CPU."
    if extra > 0 and share >= HOST_SHARE_OF_WAIT:
        return (
            f"{compared}: {t(extra)} more, {share:.0%} of the {t(gap)} {busiest} waits for "
            f"it. Uneven work explains "
            f"that part; for the other {t(gap - extra)} it is late on the host: {host}"
        )
    more = (
        f"only {t(extra)} more"
        if extra > 0
        else ("the same" if extra == 0 else f"{t(-extra)} less")
    )
    return (
        f"{compared}: {more}, against the {t(gap)} {busiest} waits for it. So it is late on "
        f"the host, not on the "
        f"GPU: {host}"
    )
