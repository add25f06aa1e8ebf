"""Reading a job: the map on an executor or a Dask cluster, and the reduce.

Each report is read and reduced where it is read (:func:`~.rank_summary.summarize`), at most a few
ranks per worker in flight at a time (so a worker holds one rank's tables, not a queue of finished
results). ``executor=`` is any ``concurrent.futures.Executor`` (a process pool on the local cores
by default): each summary is folded here the moment it is done and then let go. ``client=`` is a
``dask.distributed.Client``: its workers read the files (local paths they share, or fsspec URLs)
and fold the summaries too, 16 ranks a task, whose folds the client merges (``on_dask.py``).
``progress``: a callable given ``(ranks done, ranks in all)`` as each finishes, or True for a line
on stderr.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import sqlite3
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..edges import DaskClient
from ..errors import GpuMagicError, JobReadError
from .fold import Fold
from .on_dask import read_on_dask
from .paths import expand_urls
from .rank_summary import RankSummary, summarize
from .report_kinds import ReportKind, split_kinds

__all__ = ["IN_FLIGHT_PER_WORKER", "JobReadError", "read_job"]

#: Reports in flight per worker: one being read, one queued so the worker never waits on us.
IN_FLIGHT_PER_WORKER = 2
Progress = Callable[[int, int], None]

if TYPE_CHECKING:
    from .model import Job


def read_job(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    executor: cf.Executor | None = None,
    client: DaskClient = None,
    align: str = "auto",
    kind: ReportKind | None = None,
    progress: Progress | bool | None = None,
) -> Job:
    """A :class:`~gpumagic.job.Job` of the per-rank reports at ``paths`` (a folder, a glob, a list;
    local paths or fsspec URLs), each reduced to its summary where it is read.

    ``executor``: any Executor (default: a process pool of ``min(files, cores)`` workers).
    ``client``: a ``dask.distributed.Client``: the cluster reads the files. ``align``: "auto"
    (align clocks on a collective where the files come from different or unknown hosts),
    "collective" or "none". ``kind``: "nsys" or "chrome" reads only that kind (the others named in
    ``meta["skipped"]``); None reads one kind and refuses a mix."""
    from .model import Job

    if align not in ("auto", "collective", "none"):
        raise ValueError(f"align must be 'auto', 'collective' or 'none', got {align!r}")
    files, skipped = _files(paths, kind)
    report = _progress(progress)
    if client is not None:  # the reduce's first level too on the cluster
        fold = read_on_dask(client, files, _guarded, IN_FLIGHT_PER_WORKER, report)
    else:
        fold = Fold(files)
        _on_executor(executor, files, fold, report)
    if not fold.kept:
        _first_error(files[0])  # raises the first file's own error
        raise JobReadError(
            detail=f"none of the {len(files)} reports could be read: {fold.unreadable[0][1]}"
        )
    data = fold.finish(align)
    data.meta["skipped"] = skipped
    return Job(data)


def _files(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], kind: ReportKind | None
) -> tuple[list[str], list[dict[str, str]]]:
    urls = expand_urls(paths)
    if urls is None:
        items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        if not items:  # read_job([]) raised IndexError
            raise JobReadError(
                detail="no reports given: read_job takes a folder, a glob or a list of files"
            )
        local = [os.fspath(p).removeprefix("file://") for p in items]
        from .reports import _of_kind

        return _of_kind(local if len(local) > 1 else local[0], kind)
    kept, skipped = split_kinds(urls, kind)
    if not kept:
        raise JobReadError(detail=f"no report of the job's kind among {len(urls)} files")
    return kept, skipped


def _progress(progress: Progress | bool | None) -> Progress:
    if callable(progress):
        return progress
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        return lambda done, total: None

    def line(done: int, total: int) -> None:
        end = "\n" if done == total else ""
        print(f"\rgpumagic: read {done}/{total} ranks", end=end, file=sys.stderr, flush=True)

    return line


def _guarded(path: str) -> RankSummary | str:
    """The summary, or why the file could not be read (text: an error object need not pickle).
    Any error of one file's reading is that file's (a trace nested past the parser's depth, a
    field of the wrong type): the other ranks are read, the bad one named with its reason."""
    try:
        return summarize(path)
    except Exception as exc:  # noqa: BLE001 - one bad file must not lose the whole job
        lines = str(exc).strip().splitlines()
        return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _first_error(path: str) -> None:
    """Raise the error reading ``path`` met: gpumagic's own and the system's as they are, any other
    (a TypeError from a field of the wrong type) as a JobReadError that names the file."""
    try:
        summarize(path)
    except (GpuMagicError, OSError, ValueError, sqlite3.Error):
        raise
    except Exception as exc:
        raise JobReadError(detail=f"{path}: {_guarded(path)}") from exc


def _take(fold: Fold, index: int, outcome: RankSummary | str, report: Progress) -> None:
    if isinstance(outcome, str):
        fold.fail(index, outcome)
    else:
        fold.add(index, outcome)
    report(fold.done, len(fold.files))


def _on_executor(
    executor: cf.Executor | None, files: list[str], fold: Fold, report: Progress
) -> None:
    if len(files) == 1 and executor is None:
        _take(fold, 0, _guarded(files[0]), report)
        return
    workers = min(len(files), len(os.sched_getaffinity(0)) or 1)
    own = executor is None
    # Forked workers start with the readers loaded.
    from ..capture.chrome import reader as chrome_trace  # noqa: F401
    from ..capture.nsys import backend as nsys  # noqa: F401

    pool = executor or cf.ProcessPoolExecutor(max_workers=workers)
    limit = IN_FLIGHT_PER_WORKER * max(getattr(pool, "_max_workers", workers) or workers, 1)
    try:
        pending: dict[cf.Future[Any], int] = {}
        todo = iter(range(len(files)))
        for index in todo:
            pending[pool.submit(_guarded, files[index])] = index
            if len(pending) >= limit:
                break
        while pending:
            done, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                _take(fold, pending.pop(fut), fut.result(), report)
                del fut
            for index in todo:
                pending[pool.submit(_guarded, files[index])] = index
                if len(pending) >= limit:
                    break
    finally:
        if own:
            pool.shutdown()
