"""A job on a Dask cluster: the map and most of the reduce as tasks of the cluster.

Each rank is read and reduced to its summary by a task (``read._guarded``), a bounded number in
flight (so a worker holds one rank's tables, not a queue of them). The summaries are folded where
they are: every :data:`FOLD_RANKS` finished ranks are folded by one task into a :class:`~.fold.Fold`
of those ranks (their per-name statistics merged), and every :data:`MERGE_FAN` such folds merged by
another (:meth:`Fold.merge`): a tree of fold tasks of two levels. The client takes each merged fold
as it is done (one for every ``FOLD_RANKS * MERGE_FAN`` ranks), merges it into the job's fold and
lets it go on the cluster, then makes the cross-rank facts (:meth:`Fold.finish`: they need what the
folds keep of every rank, the NCCL kernels above all). A worker thus never holds more than one
merge's ranks (a few MB) beside one rank's tables, and the client folds a part per 128 ranks, not a
summary per rank. The client lets each summary go the moment the fold that takes it is submitted
(the cluster drops it once that fold has run).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from typing import Any

from .fold import Fold
from .rank_summary import RankSummary

__all__ = ["FOLD_RANKS", "MERGE_FAN", "read_on_dask"]

#: Ranks folded by one task (the leaves of the tree of folds).
FOLD_RANKS = 16
#: Leaf folds merged by one task (the level above the leaves, the last on the cluster).
MERGE_FAN = 8


def read_on_dask(
    client: Any,
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
    parts = as_completed([], with_results=False)  # the merged folds, taken here as they are done
    leaves: list[Any] = []
    count = itertools.count()

    def task(fn: Callable[..., Any], *args: Any) -> Any:
        return client.submit(fn, *args, pure=False, key=f"gpumagic-fold-{next(count)}-{tag}")

    def submit(index: int) -> Any:
        fut = client.submit(read, files[index], pure=False, key=f"gpumagic-rank-{index}-{tag}")
        index_of[fut.key] = index
        return fut

    def take(part: Any) -> None:
        fold.merge(part.result())
        part.release()

    queue = as_completed([submit(i) for i in itertools.islice(todo, limit)], with_results=False)
    batch: list[tuple[int, Any]] = []
    for done, fut in enumerate(queue, start=1):
        for i in todo:  # the next read first: the worker never waits on the fold
            queue.add(submit(i))
            break
        batch.append((index_of.pop(fut.key), fut))
        last = done == len(files)
        if len(batch) >= FOLD_RANKS or last:
            paths, indices = [files[i] for i, _ in batch], [i for i, _ in batch]
            leaves.append(task(_fold_ranks, paths, indices, *[f for _, f in batch]))
            batch = []
        if len(leaves) >= MERGE_FAN or (last and leaves):
            parts.add(task(_merge, *leaves))
            leaves = []
        while parts.has_ready():
            for part in parts.next_batch(block=False):
                take(part)
        report(done, len(files))
    for part in parts:
        take(part)
    return fold


def _fold_ranks(paths: list[str], indices: list[int], *outcomes: RankSummary | str) -> Fold:
    """A fold of some ranks' summaries (a leaf of the tree; runs on a worker)."""
    fold = Fold([])
    for path, index, outcome in zip(paths, indices, outcomes):
        if isinstance(outcome, str):
            fold.unreadable.append((path, outcome))
        else:
            fold.add(index, outcome)
    return fold


def _merge(*folds: Fold) -> Fold:
    """One fold of several (a node of the tree; runs on a worker)."""
    merged = Fold([])
    for fold in folds:
        merged.merge(fold)
    return merged
