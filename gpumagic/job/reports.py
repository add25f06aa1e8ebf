"""A whole job's per-rank reports as one Trace: a directory, a glob or a list of nsys exports or
Chrome traces.

A job beyond one host leaves one report per rank (``torchrun ... --no-python nsys profile -o
rank%q{RANK} python train.py``, or a torch.profiler trace per rank). :func:`load_reports` reads
them, each on an executor (a process pool on the local cores by default, or any
``concurrent.futures.Executor``: ``dask.distributed.Client.get_executor()`` hands the reading to a
cluster), and stacks them into one Trace whose processes are the ranks, so every per-rank view
(summary per rank, kernel table with a Rank column, timeline by rank, exposed communication,
straggler) reads it as it reads a ``--nproc`` capture.

**Which rank a file is**, the first rule that gives every file a distinct rank, said in
``meta["rank_rule"]``:
1. gpumagic's own rank mark (``--nproc`` runs emit it);
2. the rank the report records: ``RANK`` in the environment nsys launched the process with
   (META_DATA_CAPTURE), or a torch.profiler trace's ``distributedInfo.rank``;
3. the file name: ``rank3``, ``rank_3``, ``rank-3``, else the last number before the extension
   (``trace_3.json``);
4. the order of the files.

**Clocks.** Each file's times are first put on its host's clock (an nsys export counts from its
session start, ``TARGET_INFO_SESSION_START_TIME``; a Chrome trace from ``baseTimeNanoseconds``):
reports of one host then share a clock and need nothing more. Files of different hosts (their
``Hostname`` differ, or a host is not recorded) are aligned on the end of the first NCCL collective
every rank ran (matched by name and its place among that rank's kernels of that name, the order NCCL
requires every rank to keep): a collective ends on every rank together, when the last rank has
joined and the data has moved. ``meta["clock_alignment"]`` says what was done, each rank's shift,
and the residual skew: the largest spread of the other common collectives' ends after the shift.

**One kind per reader.** ``load_nsys`` of a folder reads its nsys exports and ``load_trace`` its
Chrome traces; the files of the other kind (a folder may hold both for every rank: two recordings of
each rank, not more ranks) are named in ``meta["skipped"]`` (``job/report_kinds.py``).

**One job?** Reports that cannot have run together (different run ids or world sizes, clocks hours
apart, no collective in common: ``job/identity.py``) are read all the same, and said:
``meta["job_mismatch"]`` and a :class:`JobMismatchWarning`.

**Many ranks.** Every rank's rows end up in this one process (about 24 MB a rank of 50,000
kernels); past :data:`MANY_REPORTS` files a :class:`ManyReportsWarning` says so, and
``gpumagic.read_job`` reads such a job rank by rank in bounded memory (``gpumagic/job/``).

**A file that cannot be read** among several is named in ``meta["unreadable"]`` (path and reason)
and the others still load; the report says so. If none can be read, the first file's error is
raised.
"""

from __future__ import annotations

import concurrent.futures as cf
import glob
import os
import re
import sqlite3
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..errors import FileMissingError, GpuMagicError
from ..trace import COLUMNS, Trace, frame, id_column
from ..trace.clock_alignment import align_on_collective
from .identity import chrome_identity, mismatch, nsys_identity
from .report_kinds import (
    MANY_REPORTS,
    ManyReportsWarning,
    ReportKind,
    ReportKindError,
    check_count,
    describe,
    kind_of,
    split_kinds,
)

__all__ = [
    "MANY_REPORTS",
    "PID_SPAN",
    "FileReport",
    "JobMismatchWarning",
    "ManyReportsWarning",
    "align_on_collective",
    "expand",
    "is_many",
    "load_nsys",
    "load_reports",
    "load_trace",
    "rank_from_name",
    "rank_rule",
    "read_one",
    "stack",
]

_SUFFIXES = (
    ".sqlite",
    ".nsys-rep",
    ".qdrep",
    ".json",
    ".json.gz",
    ".pt.trace.json",
    ".pt.trace.json.gz",
)
_NSYS_DEFAULT = re.compile(r"report\d+")
_RANK_IN_NAME = (re.compile(r"rank[_-]?(\d+)", re.IGNORECASE), re.compile(r"(\d+)(?=\D*$)"))
#: Past this many pids a pid is offset per file where files share pids (processes of different
#: hosts).
PID_SPAN = 1 << 22
_PID_SPAN = PID_SPAN


@dataclass
class FileReport:
    """One file's tables on its host's clock, with what says which rank it is and which host it ran
    on."""

    path: str
    tables: dict[str, pd.DataFrame]
    meta: dict[str, Any]
    host: str | None = None
    recorded_rank: int | None = None  # RANK in its environment, or distributedInfo.rank
    pids: list[int] = field(default_factory=list)
    identity: dict[str, Any] = field(
        default_factory=dict
    )  # what it records of its job (job/identity.py)


def is_many(path: object) -> bool:
    """Whether ``path`` names several reports: a list or tuple, a directory, or a glob pattern."""
    if isinstance(path, (list, tuple, set)):
        return True
    if isinstance(path, (str, os.PathLike)):
        p = os.fspath(path)
        return os.path.isdir(p) or (glob.has_magic(p) and not os.path.exists(p))
    return False


def load_nsys(
    path: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    nsys: str | None = None,
    *,
    executor: cf.Executor | None = None,
    align: str = "auto",
) -> Trace:
    """``gpumagic.load_nsys``: a Trace from an nsys SQLite export or ``.nsys-rep``
    (``capture.nsys.backend.load_nsys``), or, from a directory, a glob or a list of files (one
    report per rank, as a multi-node job leaves them), one Trace of every rank
    (:func:`load_reports`: each file read on ``executor``, clocks of different hosts aligned per
    ``align``). Of many files it reads the nsys exports only, and names any Chrome traces among them
    in ``meta["skipped"]`` (``load_trace`` reads those)."""
    if is_many(path):
        return load_reports(path, executor=executor, align=align, kind="nsys")
    from ..capture.nsys.backend import load_nsys as load_one

    return load_one(path, nsys)  # type: ignore[arg-type]


def load_trace(
    path: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    executor: cf.Executor | None = None,
    align: str = "auto",
) -> Trace:
    """``gpumagic.load_trace``: a Trace from a torch.profiler Chrome-trace JSON
    (``.json``/``.json.gz``), or from a directory, a glob or a list of them (one trace per rank) one
    Trace of every rank (:func:`load_reports`). Of many files it reads the Chrome traces only, and
    names any nsys exports among them in ``meta["skipped"]``. One file that holds several ranks (a
    merged trace: ``args.rank`` on its events) reads as those ranks (``job/merged_ranks.py``)."""
    if is_many(path):
        return load_reports(path, executor=executor, align=align, kind="chrome")
    from .merged_ranks import chrome_file_trace

    return chrome_file_trace(os.fspath(path), chrome_report, stack)  # type: ignore[arg-type]


def expand(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[str]:
    """The files meant by a directory (its reports, not recursing), a glob, one file, or a list of
    any of these."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[str] = []
    for p in (os.fspath(given) for given in paths):
        if os.path.isdir(p):
            found = sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(_SUFFIXES))
            if not found:
                raise FileMissingError(
                    path=p,
                    what=f"A report (a file ending {', '.join(_SUFFIXES[:5])}) in the folder",
                )
            out += _prefer_sqlite(found)
        elif glob.has_magic(p):
            found = sorted(glob.glob(p))
            if not found:
                raise FileMissingError(path=p, what="A file matching the pattern")
            out += found
        else:
            out.append(p)
    return sorted(dict.fromkeys(out), key=_natural)


def _prefer_sqlite(files: list[str]) -> list[str]:
    """A folder holding rank0.nsys-rep and rank0.sqlite (nsys --export=sqlite) has one report, read
    from the SQLite."""
    stems = {f.rsplit(".", 1)[0] for f in files if f.endswith(".sqlite")}
    return [
        f
        for f in files
        if not (f.endswith((".nsys-rep", ".qdrep")) and f.rsplit(".", 1)[0] in stems)
    ]


def _natural(path: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", os.path.basename(path))]


def rank_from_name(path: str) -> int | None:
    """The rank a file's name says: ``rank3``/``rank_3``/``rank-3``, else the last number before its
    extension; none for nsys' default names (``report1``, ``report2``: its count of reports)."""
    name = os.path.basename(path)
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if _NSYS_DEFAULT.fullmatch(name):  # nsys' own numbering of its reports, not a rank
        return None
    for pattern in _RANK_IN_NAME:
        m = pattern.search(name)
        if m:
            return int(m.group(1))
    return None


def read_one(path: str, narrow: bool = False) -> FileReport:
    """Read one report whole (every table), its times moved onto its host's clock. Runs in a worker
    process. ``narrow``: an nsys export's kernels without their launch shape (grid, block,
    registers, shared memory) and its NVTX ranges without their depth (None), for a reader that
    never looks at them."""
    if path.endswith((".json", ".json.gz")):
        return _read_chrome(path)
    from ..capture.nsys.backend import load_nsys as load_one
    from ..capture.nsys.sqlite import Export

    trace = load_one(path)
    if narrow and isinstance(trace.source, Export) and trace._unread >= {"kernels", "nvtx"}:
        trace.source.narrow()
    sqlite = trace.meta.get("source") or path
    start, host, rank, identity = _nsys_identity(sqlite)
    tables = {name: _shifted(getattr(trace, name), start) for name in COLUMNS}
    pids = [int(p["pid"]) for p in trace.meta.get("processes") or [] if p.get("pid") is not None]
    return FileReport(path, tables, dict(trace.meta), host, rank, pids, identity)


def _nsys_identity(path: str) -> tuple[int, str | None, int | None, dict[str, Any]]:
    """(session start, UTC ns; the host's name; RANK in the launched process's environment; what it
    records of its job) of an nsys export."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        start = 0
        if "TARGET_INFO_SESSION_START_TIME" in tables:
            row = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
            start = int(row[0]) if row and row[0] is not None else 0
        host = None
        if "TARGET_INFO_SYSTEM_ENV" in tables:
            row = con.execute(
                "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname'"
            ).fetchone()
            host = str(row[0]) if row else None
        rank = None
        if "META_DATA_CAPTURE" in tables:
            for (value,) in con.execute(
                "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE "
                "'PROCESS_%:ENVIRONMENT_VARIABLE' "
                "AND value LIKE 'RANK=%'"
            ):
                m = re.fullmatch(r'RANK="?(\d+)"?', str(value))
                if m:
                    rank = int(m.group(1))
                    break
        return start, host, rank, nsys_identity(con, tables)
    finally:
        con.close()


def _read_chrome(path: str) -> FileReport:
    from ..capture.chrome.reader import read_chrome_json

    return chrome_report(read_chrome_json(path), path)


def chrome_report(data: dict[str, Any] | list[Any], path: str) -> FileReport:
    """A parsed Chrome trace as one rank's report: its rows on the clock of ``baseTimeNanoseconds``
    and marked with its process, its rank from ``distributedInfo``."""
    from ..capture.chrome.reader import trace_from_chrome

    trace = trace_from_chrome(data, path=path)
    trace.meta.setdefault("source", path)
    info = data.get("distributedInfo") or {} if isinstance(data, dict) else {}
    base = int(data.get("baseTimeNanoseconds") or 0) if isinstance(data, dict) else 0
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    pid = next(  # the host process: its ops', else its launches' pid (a file of launches only)
        (ev.get("pid") for ev in events if isinstance(ev, dict) and ev.get("cat") in _HOST_CATS),
        None,
    )
    pid = int(pid) if isinstance(pid, (int, float)) else None
    tables = {}
    for name in COLUMNS:
        df = _shifted(getattr(trace, name), base)
        if pid is not None and "pid" in df.columns:
            df = df.assign(pid=pid)
        tables[name] = df
    rank = info.get("rank")
    recorded = int(rank) if rank is not None else None
    identity = chrome_identity(data) if isinstance(data, dict) else {}
    return FileReport(
        path, tables, dict(trace.meta), None, recorded, [pid] if pid else [], identity
    )


#: The categories of a torch.profiler trace's host-process events.
_HOST_CATS = ("cpu_op", "cuda_runtime", "cuda_driver")


def _shifted(df: pd.DataFrame, ns: int) -> pd.DataFrame:
    if not ns or df.empty:
        return df
    return df.assign(start=df["start"] + ns, end=df["end"] + ns)


def load_reports(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    executor: cf.Executor | None = None,
    align: str = "auto",
    reader: Callable[[str], FileReport] = read_one,
    kind: ReportKind | None = None,
) -> Trace:
    """One Trace from a directory, a glob or a list of per-rank reports (nsys exports or Chrome
    traces).

    ``executor``: where each file is read (default: a process pool of ``min(files, cores)`` workers;
    one file is read here). ``align``: "auto" (align on a collective where the files come from
    different or unknown hosts), "collective" (always), "none" (each file's own clock). ``kind``:
    "nsys" or "chrome" reads the files of that kind and names the others in ``meta["skipped"]``;
    None reads files of one kind and refuses a mix of both.

    Reports that cannot be one job (different run ids or world sizes, clocks hours apart, no
    collective in common: ``job/identity.py``) are still read, with the reasons in
    ``meta["job_mismatch"]`` and a :class:`JobMismatchWarning`.
    """
    if align not in ("auto", "collective", "none"):
        raise ValueError(f"align must be 'auto', 'collective' or 'none', got {align!r}")
    files, skipped = _of_kind(paths, kind)
    check_count(len(files))
    reports, unreadable = _read_all(files, executor, reader)
    trace = _stack(reports)
    trace.meta["unreadable"] = [{"path": p, "reason": why} for p, why in unreadable]
    trace.meta["skipped"] = skipped
    reasons = mismatch(reports, rank_rule(reports)[0])
    trace.meta["job_mismatch"] = reasons
    if reasons:
        warnings.warn(
            f"These {len(reports)} reports may not be one job: {'; '.join(reasons)}.",
            JobMismatchWarning,
            stacklevel=3,
        )
    same_host = len({r.host for r in reports}) == 1 and reports[0].host is not None
    if align == "collective" or (align == "auto" and not same_host and len(reports) > 1):
        trace = align_on_collective(trace)
    else:
        trace.meta["clock_alignment"] = {
            "method": "none" if align == "none" else "one host: clocks shared",
            "host": reports[0].host,
        }
    return trace


class JobMismatchWarning(UserWarning):
    """Reports loaded as one job that cannot have run together (the reasons are in the message)."""


def _of_kind(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], kind: ReportKind | None
) -> tuple[list[str], list[dict[str, str]]]:
    """The files to read and those of the other kind left out; an error where none is of ``kind``,
    or where ``kind`` is None and both kinds are given."""
    files = expand(paths)
    kept, skipped = split_kinds(files, kind)
    if kind is not None and not kept:
        other = skipped[0]["kind"]
        raise ReportKindError(
            where=describe(paths),
            wanted=kind,
            found=other,
            count=len(skipped),
            reader=skipped[0]["reader"],
        )
    kinds = {kind_of(f) for f in kept} - {None}
    if kind is None and len(kinds) > 1:
        raise GpuMagicError(
            detail=f"{describe(paths)} holds both nsys exports and Chrome traces (two "
            f"recordings of each rank): "
            "read the exports with gpumagic.load_nsys(...) and the traces with "
            "gpumagic.load_trace(...)."
        )
    return kept, skipped


@dataclass
class _Failure:
    """A file a worker could not read: the reason as text (an error object need not survive
    pickling)."""

    reason: str


def _guarded_read(reader: Callable[[str], FileReport], path: str) -> FileReport | _Failure:
    try:
        return reader(path)
    except (GpuMagicError, OSError, ValueError, sqlite3.Error) as exc:
        return _Failure(_reason(exc))


def _read_all(
    files: Sequence[str], executor: cf.Executor | None, reader: Callable[[str], FileReport]
) -> tuple[list[FileReport], list[tuple[str, str]]]:
    """The reports that could be read, in file order, and (path, reason) of those that could not;
    with none read, the first file's own error is raised (read again here, where it can be raised as
    itself)."""
    if len(files) == 1 and executor is None:
        return [reader(files[0])], []
    own = executor is None
    from ..capture.chrome import reader as chrome_trace  # noqa: F401 - imported once here: forked workers start with them loaded

    pool = executor or cf.ProcessPoolExecutor(
        max_workers=min(len(files), len(os.sched_getaffinity(0)) or 1)
    )
    try:
        outcomes = list(pool.map(_guarded_read, [reader] * len(files), files))
    finally:
        if own:
            pool.shutdown()
    reports = [o for o in outcomes if isinstance(o, FileReport)]
    failed = [(f, o.reason) for f, o in zip(files, outcomes) if isinstance(o, _Failure)]
    if not reports:
        reader(files[0])  # raises the first file's error as itself
        raise GpuMagicError(
            detail=f"none of the {len(files)} reports could be read: {failed[0][1]}"
        )
    return reports, failed


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def rank_rule(reports: Sequence[Any]) -> tuple[list[int], str]:
    """Each file's rank and the rule that gave every file a distinct one. ``reports``: anything
    with a report's ``meta`` (its ``rank_marks``), ``recorded_rank`` and ``path`` (a
    :class:`FileReport`, or a job's rank summary: ``gpumagic.job``)."""
    marks = [list(r.meta.get("rank_marks") or []) for r in reports]
    candidates = [
        (
            [m[0]["rank"] if len(m) == 1 else None for m in marks],
            "gpumagic's rank mark in each report",
        ),
        (
            [r.recorded_rank for r in reports],
            "the rank each report records (RANK / distributedInfo)",
        ),
        ([rank_from_name(r.path) for r in reports], "the rank in each file's name"),
    ]
    for ranks, rule in candidates:
        if all(x is not None for x in ranks) and len(set(ranks)) == len(ranks):
            return [int(x) for x in ranks], rule
    return list(
        range(len(reports))
    ), "the order of the files (no rule gave every file its own rank)"


def stack(reports: Sequence[FileReport], ranks: Sequence[int] | None = None) -> Trace:
    """One Trace of ``reports``, each file's processes marked as its rank (``ranks``, else the rule
    of :func:`rank_rule`), pids of different hosts that collide offset. A job read rank by rank
    (``gpumagic.job``) stacks the few ranks it reads again with the ranks it gave them."""
    return _stack(reports, ranks)


def _stack(reports: Sequence[FileReport], given: Sequence[int] | None = None) -> Trace:
    ranks, rule = (list(given), "given") if given is not None else rank_rule(reports)
    seen: set[int] = set()
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in COLUMNS}
    marks, processes, gpus, devices, offsets = [], [], [], [], []
    for i, (r, rank) in enumerate(zip(reports, ranks)):
        offset = (
            _PID_SPAN * (i + 1) if seen & set(r.pids) else 0
        )  # pids of another host that collide
        offsets.append(offset)
        seen |= {p + offset for p in r.pids}
        for name, df in r.tables.items():
            if not df.empty and "pid" in df.columns and offset:
                df = df.assign(pid=id_column(df["pid"]) + offset)
            parts[name].append(df)
        for p in r.pids:
            pid = p + offset
            marks.append({"pid": pid, "rank": rank, "local_rank": -1, "world": len(reports)})
            processes.append({"pid": pid, "name": f"rank {rank} ({os.path.basename(r.path)})"})
        gpus += [{**g, "id": g.get("id")} for g in r.meta.get("gpus") or []]
        devices += [
            {**d, "pid": (d.get("pid") or 0) + offset} for d in r.meta.get("cuda_devices") or []
        ]
    tables = {name: _concat(name, dfs) for name, dfs in parts.items()}
    first = reports[0].meta
    meta: dict[str, Any] = {
        k: first[k]
        for k in ("backend", "device", "sm_count", "compute_capability", "nsys_version")
        if k in first
    }
    recorded = [set(r.meta["recorded"]) for r in reports if r.meta.get("recorded") is not None]
    meta.update(
        source=[r.path for r in reports],
        rank_rule=rule,
        rank_marks=marks,
        processes=processes,
        gpus=list({(g.get("id"), g.get("name")): g for g in gpus}.values()),
        cuda_devices=devices,
        hosts=[r.host for r in reports],
        # each rank's own device (a job may mix GPUs: an MI350 rank is not the first file's H200)
        rank_devices={
            p + o: r.meta.get("device") for r, o in zip(reports, offsets) for p in r.pids
        },
    )
    if recorded:
        meta["recorded"] = sorted(set.union(*recorded))  # a kind any file recorded; each file's:
        meta["recorded_by_file"] = {r.path: sorted(r.meta.get("recorded") or []) for r in reports}
    return Trace(**tables, meta=meta)


def _concat(name: str, dfs: list[pd.DataFrame]) -> pd.DataFrame:
    """The files' rows of one table, stacked; a name column stays categorical over the union of the
    files' names (concatenating different categories would turn it into Python strings, row by
    row)."""
    dfs = [df for df in dfs if not df.empty] or dfs[:1]
    if not dfs:
        return frame(name, [])
    if len(dfs) > 1:
        for col in dfs[0].columns:
            if all(isinstance(df[col].dtype, pd.CategoricalDtype) for df in dfs):
                cats = pd.api.types.union_categoricals([df[col] for df in dfs]).categories
                dfs = [df.assign(**{col: df[col].cat.set_categories(cats)}) for df in dfs]
    out = pd.concat(dfs, ignore_index=True)
    return out if list(out.columns) == COLUMNS[name] else frame(name, out)
