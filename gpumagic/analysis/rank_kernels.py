"""Each kernel's rank, and how much of each NCCL kernel was waiting for the other ranks rather than
moving data.

A collective's kernel starts when its rank enters the collective and ends when the data has moved,
which cannot happen before the last rank has entered: so its duration is that rank's wait for the
others plus the transfer. The rank that enters last waits least, so the shortest duration of one
collective over the ranks that ran it is the estimate of its transfer time, and each rank's duration
beyond it is its wait. One collective is matched across ranks as
:func:`gpumagic.trace.collectives.collective_instances` does (its kernel name and its place among
that rank's kernels of that name). Where a collective ran on one rank only (the other ranks were not
captured), nothing is known of its wait and all of it counts as transfer.

Findings that rank kernels by time use :func:`work_durations` (waits left out: waiting is not work),
and findings about a multi-rank trace say which rank they are about (:func:`kernel_ranks`).
"""

from __future__ import annotations

import numpy as np

from ..trace import Trace, id_column
from ..trace.collectives import collective_instances
from .finding import kernel_facts
from .ranks import processes

__all__ = ["kernel_ranks", "nccl_waits", "waits_by_rank", "work_durations"]


def kernel_ranks(trace: Trace) -> tuple[np.ndarray, list[str]]:
    """(each kernel row's place in rank order, the ranks' labels): ``labels[places[i]]`` is "rank 1"
    or "process 0"."""

    def compute() -> tuple[np.ndarray, list[str]]:
        procs = processes(trace)
        place = {int(p): i for i, p in enumerate(procs["pid"])}
        pid = (
            id_column(trace.kernels["pid"])
            if not trace.kernels.empty
            else np.empty(0, dtype=np.int64)
        )
        places = np.array([place.get(int(p), -1) for p in pid], dtype=np.int64)
        return places, procs["label"].tolist()

    return trace.memo("rank_kernels.places", compute)


def nccl_waits(trace: Trace) -> np.ndarray:
    """Per kernel row, the ns its NCCL kernel spent waiting for other ranks (0 for every other
    kernel)."""

    def compute() -> np.ndarray:
        facts = kernel_facts(trace)
        waits = np.zeros(len(facts.durations), dtype=np.int64)
        nccl = facts.where(lambda d: d.family == "nccl")
        if not nccl.any():
            return waits
        k = trace.kernels
        starts = k["start"].to_numpy(dtype=np.int64)
        frame = collective_instances(id_column(k["pid"]), facts.codes, starts, nccl)
        frame["ns"] = facts.durations[frame["row"].to_numpy()]
        transfer = frame.groupby(["code", "nth"])["ns"].transform("min")
        ranks = frame.groupby(["code", "nth"])["pid"].transform("nunique")
        waits[frame["row"].to_numpy()] = np.where(ranks > 1, frame["ns"] - transfer, 0)
        return waits

    return trace.memo("rank_kernels.nccl_waits", compute)


def work_durations(trace: Trace) -> np.ndarray:
    """Per kernel row, its duration less any wait for other ranks inside it: the time it worked."""
    worked: np.ndarray = kernel_facts(trace).durations - nccl_waits(trace)
    return worked


def waits_by_rank(trace: Trace) -> dict[str, int]:
    """Rank label -> the ns its NCCL kernels spent waiting for the other ranks."""
    places, labels = kernel_ranks(trace)
    waits = nccl_waits(trace)
    return {label: int(waits[places == i].sum()) for i, label in enumerate(labels)}
