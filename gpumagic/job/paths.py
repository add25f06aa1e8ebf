"""Where a job's reports are: local paths, or any fsspec URL its workers can read (``file://``,
``s3://``, ``gs://``...).

A local path (or a ``file://`` URL) is listed and read as ``job.reports`` does. A remote URL's
folder or glob is listed with fsspec, and each report is copied by the worker that reads it to a
temporary file of its own (SQLite reads a file, not a stream), removed once read: the raw files
never pass through the process that folds the job.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["expand_urls", "is_url", "local_file", "to_local"]

_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep", ".json", ".json.gz")


def is_url(path: object) -> bool:
    """A string with a protocol (``file://``, ``s3://``...)."""
    return isinstance(path, str) and "://" in path


def to_local(path: str) -> str | None:
    """The local path of a local path or ``file://`` URL; None for a remote URL."""
    if not is_url(path):
        return os.fspath(path)
    if path.startswith("file://"):
        return path[len("file://") :]
    if path.startswith("local://"):
        return path[len("local://") :]
    return None


def expand_urls(paths: str | os.PathLike[str] | Iterable[Any]) -> list[str] | None:
    """The files meant by remote URLs (a folder, a glob, a file, or a list of them), as URLs; None
    where every path is local (``job.reports.expand`` lists those)."""
    given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    items: list[str] = [os.fspath(p) for p in given]
    if not any(is_url(p) and to_local(p) is None for p in items):
        return None
    import fsspec

    out: list[str] = []
    for p in items:
        fs, root = fsspec.core.url_to_fs(p)
        proto = p.split("://", 1)[0]
        if fs.isdir(root):
            found = sorted(f for f in fs.ls(root, detail=False) if f.endswith(_SUFFIXES))
        elif any(c in root for c in "*?["):
            found = sorted(fs.glob(root))
        else:
            found = [root]
        out += [f if "://" in f else f"{proto}://{f}" for f in found]
    return out


@contextlib.contextmanager
def local_file(path: str) -> Iterator[str]:
    """A local path to read ``path`` from: itself where local, else a temporary copy (removed on
    exit), made with fsspec."""
    local = to_local(path)
    if local is not None:
        yield local
        return
    import fsspec

    name = path.rsplit("/", 1)[-1]
    tmp = tempfile.mkdtemp(prefix="gpumagic-rank-")
    try:
        dst = os.path.join(tmp, name)
        with fsspec.open(path, "rb") as src, open(dst, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        yield dst
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
