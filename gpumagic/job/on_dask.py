"""A job on a Dask cluster: the map and the reduce both as tasks of the cluster.

Each rank is read and reduced to its summary by a task (``read._guarded``), a bounded number in
flight (so a worker holds one rank's tables, not a queue of them). The summaries are folded where
they are, not in the client: every :data:`FOLD_RANKS` finished ranks are folded by one task into a
:class:`~.fold.Fold` of those ranks, and every :data:`MERGE_FAN` folds of one level of the tree are
merged by another (:meth:`Fold.merge`), so each rank's few KB cross between workers about
``log(ranks / FOLD_RANKS) / log(MERGE_FAN)`` times. The root merge also makes the cross-rank
facts (:meth:`Fold.finish`: the rank rule, the clock alignment, the skews, the NCCL waits) on the
cluster; the client receives the job's folded tables alone. The client holds futures, counts the
ranks done for the progress, and lets each summary go the moment the fold that takes it is
submitted (the cluster drops it once that fold has run).
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections.abc import Callable
from typing import Any

from .fold import Fold, JobData
from .rank_summary import RankSummary

__all__ = ["FOLD_RANKS", "MERGE_FAN", "read_on_dask"]

#: Ranks folded by one task (the leaves of the tree of folds).
FOLD_RANKS = 16
#: Folds merged by one task (the fan-in of each level above the leaves).
MERGE_FAN = 8


def read_on_dask(
    client: Any,
    files: list[str],
    read: Callable[[str], RankSummary | str],
    in_flight: int,
    report: Callable[[int, int], None],
    align: str,
) -> JobData | Fold:
    """The job's :class:`JobData`, read by ``read`` (a path to its summary, or why it could not be
    read) on the cluster of ``client`` with ``in_flight`` reads per worker thread; the root fold
    itself where no rank could be read (its ``unreadable`` says why)."""
    from distributed import as_completed

    info = client.scheduler_info()
    workers = max(len(info.get("workers", {})), 1)
    threads = sum(w.get("nthreads", 1) for w in info.get("workers", {}).values())
    limit = in_flight * max(threads, workers)
    tag = uuid.uuid4().hex[:12]
    todo = iter(range(len(files)))
    index_of: dict[str, int] = {}
    tree = _Tree(client, tag)

    def submit(index: int) -> Any:
        fut = client.submit(read, files[index], pure=False, key=f"gpumagic-rank-{index}-{tag}")
        index_of[fut.key] = index
        return fut

    queue = as_completed([submit(i) for i in itertools.islice(todo, limit)], with_results=False)
    batch: list[tuple[int, Any]] = []
    for done, fut in enumerate(queue, start=1):
        for i in todo:  # the next read first: the worker never waits on the fold
            queue.add(submit(i))
            break
        batch.append((index_of.pop(fut.key), fut))
        if len(batch) >= FOLD_RANKS or done == len(files):
            tree.leaf([files[i] for i, _ in batch], [i for i, _ in batch], [f for _, f in batch])
            batch = []
        report(done, len(files))
    del fut
    root = tree.root(files, align)
    try:
        return root.result()
    finally:
        root.release()


@dataclasses.dataclass
class _Tree:
    """The folds submitted so far, by level (0: folds of ranks); a level's :data:`MERGE_FAN` folds
    are merged into one of the next level as soon as they are submitted."""

    client: Any
    tag: str
    levels: list[list[Any]] = dataclasses.field(default_factory=list)
    count: int = 0

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        self.count += 1
        key = f"gpumagic-fold-{self.count}-{self.tag}"
        return self.client.submit(fn, *args, pure=False, key=key)

    def leaf(self, paths: list[str], indices: list[int], outcomes: list[Any]) -> None:
        self._add(0, self._submit(_fold_ranks, paths, indices, *outcomes))

    def _add(self, level: int, fold: Any) -> None:
        if len(self.levels) <= level:
            self.levels.append([])
        self.levels[level].append(fold)
        if len(self.levels[level]) >= MERGE_FAN:
            parts, self.levels[level] = self.levels[level], []
            self._add(level + 1, self._submit(_merge, *parts))

    def root(self, files: list[str], align: str) -> Any:
        parts = [f for level in self.levels for f in level]
        self.levels = []
        return self._submit(_finish, files, align, *parts)


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


def _finish(files: list[str], align: str, *folds: Fold) -> JobData | Fold:
    """The root: the last folds merged and the job's cross-rank facts made (runs on a worker); the
    fold itself where no rank was read."""
    fold = _merge(*folds)
    fold.files = files
    return fold.finish(align) if fold.kept else fold
