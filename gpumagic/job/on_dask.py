"""A job on a Dask cluster: the map and the first level of the reduce as tasks of the cluster.

Each rank is read and reduced to its summary by a task (``read._guarded``), a bounded number in
flight (so a worker holds one rank's tables, not a queue of them). The summaries are folded where
they are: every :data:`FOLD_RANKS` finished ranks are folded by one task into a
:class:`~.fold.Fold` of those ranks (their per-name statistics merged, the rest kept in a few
arrays). The client takes each such fold as it is done, merges it into the job's fold
(:meth:`Fold.merge`) and lets it go on the cluster, then makes the cross-rank facts
(:meth:`Fold.finish`: they need what the folds keep of every rank, the NCCL kernels above all).
A reduction of two levels, the wide one on the cluster: the client merges one part per
``FOLD_RANKS`` ranks, not a summary per rank. A level of merges between them on the cluster was
tried and left out: it holds its ranks' folds twice (its parts and its result) on one worker,
+17 MB at 8 parts of 16 ranks against +22 MB for a rank's read, and spares the client only
merges, not bytes. The client lets each summary go the moment the fold that takes it is submitted
(the cluster drops it once that fold has run).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable

from ..edges import DaskClient
from .fold import Fold
from .rank_summary import RankSummary

__all__ = ["FOLD_RANKS", "read_on_dask"]

#: Ranks folded by one task on the cluster.
FOLD_RANKS = 16


def read_on_dask(
    client: DaskClient,
    files: list[str],
    read: Callable[[str], RankSummary | str],
    in_flight: int,
    report: Callable[[int, int], None],
) -> Fold:
    """The job's :class:`~.fold.Fold` of ``files``, read by ``read`` (a path to its summary, or why
    it could not be read) on the cluster of ``client``, ``in_flight`` reads per worker thread."""
    from distributed import as_completed

    info = client.scheduler_info()
    workers = max(len(info.get("workers", {})), 1)
    threads = sum(w.get("nthreads", 1) for w in info.get("workers", {}).values())
    limit = in_flight * max(threads, workers)
    tag = uuid.uuid4().hex[:12]
    todo = iter(range(len(files)))
    index_of: dict[str, int] = {}
    fold = Fold(files)
    parts = as_completed([], with_results=False)  # the folds of ranks, taken here as they are done

    def submit(index: int) -> DaskClient:
        fut = client.submit(read, files[index], pure=False, key=f"gpumagic-rank-{index}-{tag}")
        index_of[fut.key] = index
        return fut

    def take(part: DaskClient) -> None:
        fold.merge(part.result())
        part.release()

    queue = as_completed([submit(i) for i in itertools.islice(todo, limit)], with_results=False)
    batch: list[tuple[int, DaskClient]] = []
    for done, fut in enumerate(queue, start=1):
        for i in todo:  # the next read first: the worker never waits on the fold
            queue.add(submit(i))
            break
        batch.append((index_of.pop(fut.key), fut))
        if len(batch) >= FOLD_RANKS or done == len(files):
            paths, indices = [files[i] for i, _ in batch], [i for i, _ in batch]
            key = f"gpumagic-fold-{done}-{tag}"
            parts.add(
                client.submit(
                    _fold_ranks, paths, indices, *[f for _, f in batch], pure=False, key=key
                )
            )
            batch = []
        while parts.has_ready():
            for part in parts.next_batch(block=False):
                take(part)
        report(done, len(files))
    for part in parts:
        take(part)
    return fold


def _fold_ranks(paths: list[str], indices: list[int], *outcomes: RankSummary | str) -> Fold:
    """A fold of some ranks' summaries (runs on a worker)."""
    fold = Fold([])
    for path, index, outcome in zip(paths, indices, outcomes):
        if isinstance(outcome, str):
            fold.unreadable.append((path, outcome))
        else:
            fold.add(index, outcome)
    return fold
