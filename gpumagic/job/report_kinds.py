"""Which kind of report a file is (an nsys export or a torch.profiler Chrome trace), and the files
of one kind among many.

A job's folder often holds both kinds for every rank: the multi-host recipe writes
``rank%q{RANK}.nsys-rep`` and ``.sqlite`` with nsys and ``rank{R}.json`` with torch.profiler. The
two are two recordings of each rank (nsys and torch.profiler cannot both hold CUPTI in one process,
so they come from different runs), never two ranks: stacked together they would double the job and
mix tables one kind records and the other does not. So ``load_nsys`` reads the nsys exports of a
folder and ``load_trace`` its Chrome traces, and each names the files of the other kind it left out
and how to read them.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Literal

from ..errors import GpuMagicError, TooManyReportsError

__all__ = [
    "CHROME_SUFFIXES",
    "MANY_REPORTS",
    "NSYS_SUFFIXES",
    "READER",
    "TOO_MANY_REPORTS",
    "ManyReportsWarning",
    "ReportKind",
    "ReportKindError",
    "check_count",
    "kind_of",
    "split_kinds",
]

ReportKind = Literal["nsys", "chrome"]

NSYS_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep")
#: ``.pt.trace.json`` (torch.profiler's tensorboard handler) ends in ``.json`` too.
CHROME_SUFFIXES = (".json", ".json.gz")
#: The reader of each kind, as a user calls it.
READER: dict[ReportKind, str] = {"nsys": "gpumagic.load_nsys", "chrome": "gpumagic.load_trace"}
_WHAT: dict[ReportKind, str] = {"nsys": "nsys export", "chrome": "torch.profiler (Chrome) trace"}


def kind_of(path: str) -> ReportKind | None:
    """The kind of report ``path`` names by its extension, or None for neither."""
    if path.endswith(NSYS_SUFFIXES):
        return "nsys"
    if path.endswith(CHROME_SUFFIXES):
        return "chrome"
    return None


def what(kind: ReportKind, n: int = 1) -> str:
    """ "nsys export(s)" / "torch.profiler (Chrome) trace(s)", counted."""
    return f"{n} {_WHAT[kind]}{'s' if n != 1 else ''}"


class ReportKindError(GpuMagicError, ValueError):
    """A reader was given files of the other kind only: ``where`` (the folder, pattern or list),
    ``wanted`` and ``found`` (kinds), ``count`` (files of the found kind), and the ``reader`` of
    those."""

    where: str
    wanted: ReportKind
    found: ReportKind
    count: int
    reader: str
    template = "{where} holds {found_text} and no {wanted_text}: read {them} with {reader}(...)."

    def extra_fields(self) -> dict[str, str]:
        return {
            "found_text": what(self.found, self.count),
            "wanted_text": _WHAT[self.wanted],
            "them": "it" if self.count == 1 else "them",
        }


def split_kinds(
    files: Sequence[str], kind: ReportKind | None
) -> tuple[list[str], list[dict[str, str]]]:
    """(the files a reader of ``kind`` reads, the others as ``{"path", "kind", "what", "reader"}``:
    what they are and the reader of them, for a report to say). ``kind`` None keeps every file of a
    known kind (a list of one kind; a mix is for the caller to refuse). Files of neither kind named
    explicitly stay: their reader says what is wrong with them."""
    kept, skipped = [], []
    for f in files:
        k = kind_of(f)
        if kind is None or k in (kind, None):
            kept.append(f)
        else:
            skipped.append({"path": f, "kind": k, "what": _WHAT[k], "reader": READER[k]})
    return kept, skipped


def describe(paths: object) -> str:
    """How an error names what it was given: the folder, the pattern, or "the N files given"."""
    if isinstance(paths, (str, os.PathLike)):
        return os.fspath(paths)
    items = list(paths) if isinstance(paths, (list, tuple, set)) else []
    return f"the {len(items)} files given" if len(items) != 1 else os.fspath(items[0])


#: Past this many reports, ``load_nsys``/``load_trace`` of a job say that ``gpumagic.read_job``
#: reads it in bounded memory (they still return the one Trace they always have: their callers
#: read its rows).
MANY_REPORTS = 128
#: Past this many, they stop before reading any and say to use ``gpumagic.read_job`` (128 ranks of
#: 20,000 kernels held 3.5 GB in one Trace, where ``read_job`` held 164 MB).
TOO_MANY_REPORTS = 512


class ManyReportsWarning(UserWarning):
    """A job of more than :data:`MANY_REPORTS` reports read into one Trace."""


def check_count(n: int) -> None:
    """Before a job of ``n`` reports is read into one Trace: past :data:`TOO_MANY_REPORTS` a
    :class:`~gpumagic.errors.TooManyReportsError` naming ``gpumagic.read_job``, past
    :data:`MANY_REPORTS` a :class:`ManyReportsWarning` saying the same."""
    if n > TOO_MANY_REPORTS:
        raise TooManyReportsError(
            detail=(
                f"{n:,} reports would be read into one Trace, holding every rank's rows here "
                f"(about {24 * n / 1000:.1f} GB at 50,000 kernels a rank): read the job with "
                "gpumagic.read_job(path), which reduces each rank where it is read and keeps a "
                "few KB a rank (the same per-rank figures), or give load_nsys/load_trace at most "
                f"{TOO_MANY_REPORTS} files (a narrower glob)"
            )
        )
    if n > MANY_REPORTS:
        warnings.warn(
            f"{n} reports read into one Trace: every rank's rows are held here (about 24 MB a "
            "rank of 50,000 kernels). gpumagic.read_job(...) reduces each rank where it is read "
            "and keeps a few KB a rank, with the same per-rank figures.",
            ManyReportsWarning,
            stacklevel=4,
        )
