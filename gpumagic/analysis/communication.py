"""Findings of a multi-rank trace: communication that compute does not hide, and the rank the others wait for.

Both read :func:`~gpumagic.analysis.ranks.rank_figures` (per process and GPU, over that process's range) and say
nothing about a single-process, single-GPU trace.

What an NCCL kernel's *name* can tell, and why no finding here reads a protocol or a transport from it: NCCL
(2.19 on, names ``ncclDevKernel_*``) compiles one kernel per collective and data type and runs every algorithm and
protocol through it. Its build script (``src/device/generate.py``, ``best_kernel``) names AllGather, AllGatherV and
Broadcast kernels ``<coll>_RING_LL`` and reductions ``<coll>_Sum_<type>_{TREE|RING}_LL`` whatever runs: the name
always ends in ``LL`` (the protocol run may be LL, LL128 or Simple), says ``Sum`` for every reduction operator, and
says ``RING`` for every algorithm other than the tree (NVLS, CollNet, PAT included). NCCL's maintainers say the same
(NVIDIA/nccl #1246, #1595, #2196). Older NCCL (``ncclKernel_*``, before 2.19) instantiated its kernels for the LL
protocol only, likewise dispatching to the others. The transport (NVLink P2P, shared memory, PCIe, network) is in no
kernel name. So a name tells the collective, the data type, and whether the tree algorithm ran; it cannot tell a
slow protocol or a fallback transport, and nothing here claims one (``NCCL_DEBUG=INFO`` with
``NCCL_DEBUG_SUBSYS=INIT,TUNING`` prints both).
"""

from __future__ import annotations

import pandas as pd

from ..trace import Trace
from .finding import Finding, t
from .rank_kernels import waits_by_rank
from .ranks import is_multi, rank_figures

__all__ = [
    "COMM_MIN_NS",
    "COMM_SHARE",
    "LIST_RANKS",
    "OVERLAP_LOW",
    "STRAGGLER_MIN_NS",
    "WAIT_SHARE",
    "WORK_SKEW",
    "comm_exposed",
    "straggler",
]

#: Past this many ranks a finding gives the extremes of a figure, not a figure per rank (it would not be read).
LIST_RANKS = 8
#: Communication worth a word: at least this share of a GPU's busy time (below it, hiding it gains little)...
COMM_SHARE = 0.10
#: ... and at least this long (a short cell's single small all-reduce is not worth restructuring a step for).
COMM_MIN_NS = 200_000
#: Communication counts as not overlapped when less than this share of it runs beside compute kernels: DDP's
#: bucketed all-reduce overlaps most of the backward pass when it works; under half means the ranks mostly wait.
OVERLAP_LOW = 0.5
#: A straggler: the other ranks spend at least this share of their range more inside collectives than it does. A
#: collective kernel runs from when its rank enters it until the last rank has entered (then the transfer), so the
#: rank the others wait for has the least NCCL time; 5% of every step lost waiting for one rank is worth fixing...
WAIT_SHARE = 0.05
#: ... and at least this long, so that microseconds of jitter entering a collective are not called a straggler.
STRAGGLER_MIN_NS = 500_000
#: Where the straggler's GPU works longer than every other rank's by this share of its own range, the cause is on the
#: GPU (uneven work); identical ranks differ by a few percent run to run (clock boost, launch jitter), so 10% is past
#: that noise. (A share of the straggler's range, a whole: never of another rank's work, which may be near zero.)
WORK_SKEW = 0.10


def _who(row: pd.Series) -> str:
    return f"{row['label']} (GPU {int(row['device'])})" if int(row["device"]) >= 0 else str(row["label"])


def comm_exposed(trace: Trace) -> list[Finding]:
    """Per rank and GPU: NCCL time moving data that is a real share of its GPU work and mostly does not overlap
    compute. Time an NCCL kernel spends waiting for a late rank is left out (the straggler finding tells it)."""
    if not is_multi(trace):
        return []
    fig = rank_figures(trace)
    waits = waits_by_rank(trace)
    wait = fig["label"].map(waits).fillna(0).clip(upper=fig["nccl_ns"])
    moving = fig["nccl_ns"] - wait
    share = moving / (fig["busy_ns"] - wait).clip(lower=1)
    hit = (moving >= COMM_MIN_NS) & (share >= COMM_SHARE) & (fig["overlap_share"] < OVERLAP_LOW)
    if not hit.any():
        return []
    parts = []
    shown = fig.index[hit]
    if len(shown) > LIST_RANKS:  # many ranks: the most exposed few, then how many more
        shown = moving[hit].sort_values(ascending=False).index[:3]
    for i in shown:
        r = fig.loc[i]
        waited = f"; it also waited {t(wait[i])} for other ranks" if wait[i] >= COMM_MIN_NS else ""
        parts.append(
            f"{_who(r)}: {t(moving[i])} of NCCL moving data ({share[i]:.0%} of its GPU busy time, waits left out), "
            f"{r['overlap_share']:.0%} overlapped with compute{waited}"
        )
    return [
        Finding(
            "comm_exposed",
            "warn",
            f"Communication is not hidden behind compute: {'; '.join(parts)}"
            f"{f' (and {int(hit.sum()) - len(shown)} other ranks)' if int(hit.sum()) > len(shown) else ''}. "
            "While an NCCL kernel runs alone the "
            "GPU waits on the other ranks: DDP overlaps its gradient all-reduce with the backward pass bucket by "
            "bucket (bucket_cap_mb sets how soon the first one starts); FSDP's backward_prefetch and "
            "forward_prefetch start the next all-gather early; a value read on the host (loss.item()) right after "
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
        return f"{wait.index[0]} spends {t(wait.iloc[0])} more inside NCCL ({share.iloc[0]:.0%} of its range)"
    return (
        f"the other ranks spend {t(wait.min())} to {t(wait.max())} more inside NCCL ({share.min():.0%} to "
        f"{share.max():.0%} of their range)"
    )


def straggler(trace: Trace) -> list[Finding]:
    """The rank the others wait for: every other rank spends at least :data:`WAIT_SHARE` of its range and
    :data:`STRAGGLER_MIN_NS` more inside NCCL than it does. Whether its GPU work is uneven says where to look."""
    if not is_multi(trace):
        return []
    fig = rank_figures(trace)
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
        nccl = f"{slow} {t(per.loc[slow, 'nccl_ns'])}, the other {len(others)} ranks {t(others['nccl_ns'].min())} to "
        nccl += t(others["nccl_ns"].max())
    busiest = others["work_ns"].idxmax()
    extra = int(row["work_ns"] - others["work_ns"].max())  # more GPU work than every other rank: like with like
    if extra >= STRAGGLER_MIN_NS and extra >= WORK_SKEW * row["span_ns"]:
        cause = (
            f"Its GPU works {t(row['work_ns'])} of its {t(row['span_ns'])} range (kernels other than NCCL, and "
            f"copies) against {busiest}'s {t(others.loc[busiest, 'work_ns'])}: {t(extra)} more, "
            f"{extra / max(row['span_ns'], 1):.0%} of its range. Uneven work per rank (inputs of different lengths, "
            "work done on one rank only) or a slower GPU."
        )
    else:
        cause = (
            f"Its GPU work ({t(row['work_ns'])}) is within {t(max(extra, 0))} of the other ranks' (at most "
            f"{t(others['work_ns'].max())}), so it is late on the host: data loading, Python work on that rank only "
            "(logging, a checkpoint), or a busier CPU."
        )
    return [
        Finding(
            "straggler",
            "warn",
            f"{slow} is the straggler: {_spend(wait, share)}, waiting for it to reach each collective "
            f"(NCCL time: {nccl}). {cause}",
            {
                "rank": slow,
                "wait_ns": [int(w) for w in wait],
                "wait_share": [float(x) for x in share],
                "extra_work_ns": extra,
            },
        )
    ]
