"""Read an Nsight Systems SQLite export into a Trace: ``read_sqlite(path)``. (``gpumagic.load_nsys``
also takes a ``.nsys-rep``, which the local nsys exports first: ``capture/nsys/backend.py``.)

The export's schema changes between releases ("the SQLite export schema can and will change"), so
the reader checks the file is really SQLite and whole (an interrupted export leaves a zeroed or
truncated file; a damaged page found later by a query is the same error, never a raw
``sqlite3.DatabaseError``), reads ``META_DATA_EXPORT`` before any query, names the tables and
columns it needs when they are missing, and resolves every name through ``StringIds``. Kernels are
named by their demangled name, as ``nsys stats`` groups them.

Big exports (a million kernels and as many API calls) are read lazily and in C. ``read_sqlite``
checks the file and reads its metadata; each table is read on first use (the Trace's ``source``),
and a duration summary of a table not read yet reads only group ids and durations. Integer columns
are read in C (``capture/nsys/columns.py``); names are resolved once per distinct id and kept as
pandas categoricals (sorted categories, so they sort as text).

What the capture recorded goes into ``meta["recorded"]`` (``Trace.recorded``): a kind whose table
the export holds, or which the capture's settings (``META_DATA_CAPTURE``) say it traced; kernels and
memory operations whose table is absent count as recorded (and none ran) only where the recorded
CUDA API calls made none (nsys leaves an empty table out): an export without its kernel table but
with kernel launches did not record kernels.

Every row keeps its process (``pid``, from ``globalPid`` / ``globalTid``) and every kernel and
memory operation its GPU (``deviceId``); the export's GPUs, CUDA processes and the launcher's rank
marks go into meta (``capture/nsys/processes.py``). Where a single process had a CUDA context, its
pid fills the column without a per-row read.
"""

from __future__ import annotations

import os
import re
import sqlite3
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from ...errors import ExportFormatError, FileMissingError, NoCudaDataError, NsysExportError
from ...trace import COLUMNS, Trace, frame, nesting_depth
from ...trace.coverage import made_by_api, recorded_kinds
from .columns import available, categorical, dims, distinct, int_columns
from .processes import PID_OF_GLOBAL, process_meta

__all__ = ["SUPPORTED_SCHEMA_MAJOR", "NoCudaDataError", "NsysExportError", "read_sqlite"]

SUPPORTED_SCHEMA_MAJOR = 3
#: What a guarded read returns.
_R = TypeVar("_R")
_SQLITE_MAGIC = b"SQLite format 3\x00"
_CUDA_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
)
_MEMCPY_KIND = {
    1: "HtoD",
    2: "DtoH",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "HtoD",
    12: "DtoH",
    13: "DtoD",
}


_EXPORT_AGAIN = "Export the report again: nsys export --type sqlite --force-overwrite true REPORT"


def _check_sqlite(path: str) -> None:
    """The file is whole SQLite: its magic, and as many bytes as its header says it has pages (an
    export cut short by a full disk or a killed nsys is shorter)."""
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except FileNotFoundError:
        raise FileMissingError(path=path, what="The nsys SQLite export") from None
    except OSError as exc:
        raise NsysExportError(path=path, reason=f"cannot be read ({exc})") from exc
    if head[:16] != _SQLITE_MAGIC:
        what = (
            "an empty or zeroed file (an interrupted export?)"
            if not head.strip(b"\x00")
            else "not an SQLite file"
        )
        raise NsysExportError(path=path, reason=f"{what}. {_EXPORT_AGAIN}")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    header_count_valid = (
        head[24:28] == head[92:96]
    )  # the page count is current only when these agree
    size = os.path.getsize(path)
    if len(head) == 100 and header_count_valid and pages and size < page_size * pages:
        raise NsysExportError(
            path=path,
            reason=f"truncated: {size:,} bytes where its header says {page_size * pages:,} "
            f"(an export cut short by "
            f"a full disk or a stopped nsys?). {_EXPORT_AGAIN}",
        )


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def _need(con: sqlite3.Connection, table: str, cols: list[str], path: str) -> None:
    missing = [c for c in cols if c not in _columns(con, table)]
    if missing:
        raise NsysExportError(
            path=path,
            reason=f"table {table} lacks column(s) {', '.join(missing)}: this export schema "
            f"is not one gpumagic "
            "knows. Export with the nsys release gpumagic was tested with (2025.x), or "
            "report the schema version.",
        )


def read_sqlite(path: str) -> Trace:
    """A Trace over the export at ``path``: checked and its metadata read now, its tables read on
    first use."""
    _check_sqlite(path)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    try:
        meta, tables = _open(con, path)
    except sqlite3.DatabaseError as exc:  # a damaged page, met by the query reading it
        con.close()
        raise _damaged(path, exc) from exc
    except BaseException:
        con.close()
        raise
    procs = meta.get("processes") or []
    return Trace(
        meta=meta, source=Export(con, path, tables, procs[0]["pid"] if len(procs) == 1 else None)
    )


def _damaged(path: str, exc: Exception) -> NsysExportError:
    return NsysExportError(path=path, reason=f"a damaged SQLite file ({exc}). {_EXPORT_AGAIN}")


def _open(con: sqlite3.Connection, path: str) -> tuple[dict[str, Any], set[str]]:
    """The export's metadata, after checking it is one gpumagic reads (schema, CUDA tables, needed
    columns)."""
    tables = _tables(con)
    meta: dict[str, Any] = {"backend": "nsys", "source": path}
    found = [t for t in ("META_DATA_EXPORT", "EXPORT_META_DATA") if t in tables]  # 2023.1-2
    if not found:
        raise NsysExportError(path=path, reason="no META_DATA_EXPORT table: not an nsys export")
    md = dict(con.execute(f"SELECT name, value FROM {found[0]}").fetchall())
    schema = md.get("EXPORT_SCHEMA_VERSION", "")
    meta["nsys_version"] = md.get("EXPORT_PRODUCT_VERSION")
    meta["schema_version"] = schema
    try:
        major = int(md.get("EXPORT_SCHEMA_VERSION_MAJOR") or schema.split(".")[0])
    except ValueError:
        major = -1
    if major != SUPPORTED_SCHEMA_MAJOR:
        raise ExportFormatError(
            path=path,
            schema=schema or "?",
            nsys_version=meta["nsys_version"],
            supported=SUPPORTED_SCHEMA_MAJOR,
        )
    if not tables & set(_CUDA_TABLES):
        raise NoCudaDataError(path=path)
    for table, cols in _NEEDED.items():
        if table in tables:
            _need(con, table, cols, path)
    for table in tables & set(
        _COUNTED
    ):  # every page of the big tables walked once: a damaged one is met now
        con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
    if "TARGET_INFO_GPU" in tables:
        cur = con.execute("SELECT * FROM TARGET_INFO_GPU LIMIT 1")
        row = cur.fetchone()
        if row:
            info = dict(zip([d[0] for d in cur.description], row))
            meta["device"] = info.get("name")
            meta["sm_count"] = info.get("smCount")
            if info.get("computeMajor") is not None:
                meta["compute_capability"] = f"{info['computeMajor']}.{info['computeMinor']}"
    meta.update(process_meta(con, tables))
    meta["recorded"] = _recorded(con, tables)
    return meta, tables


#: The export's tables that hold each kind of record.
_HELD = {
    "kernels": ("CUPTI_ACTIVITY_KIND_KERNEL",),
    "memops": ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"),
    "api": ("CUPTI_ACTIVITY_KIND_RUNTIME",),
    "nvtx": ("NVTX_EVENTS",),
    "osrt": ("OSRT_API",),
}
#: META_DATA_CAPTURE's CAPTURE_EVENT_TYPE for what nsys traced (-t nvtx, -t osrt): traced and none
#: seen is recorded, though nsys then writes no table.
_TRACED = {"NvtxEvents": "nvtx", "OSRuntime": "osrt"}


def _recorded(con: sqlite3.Connection, tables: set[str]) -> list[str]:
    """The kinds of record the export recorded (``records.recorded_kinds``): its tables, what its
    capture settings say it traced, and, where the kernel or memcpy/memset tables are absent,
    whether its CUDA API calls made any."""
    held = {kind for kind, names in _HELD.items() if tables & set(names)}
    if "META_DATA_CAPTURE" in tables and {"name", "value"} <= _columns(con, "META_DATA_CAPTURE"):
        rows = con.execute(
            "SELECT value FROM META_DATA_CAPTURE WHERE name = 'CAPTURE_EVENT_TYPE'"
        ).fetchall()
        held.update(_TRACED[v] for (v,) in rows if v in _TRACED)
    made: set[str] = set()
    absent = {"kernels", "memops"} - held
    if "api" in held and absent and "StringIds" in tables:
        # the names that would have made an absent kind (few, in StringIds), then whether any call
        # has one of them
        ids: dict[str, list[int]] = {}
        for i, value in con.execute("SELECT id, value FROM StringIds WHERE value LIKE 'cu%'"):
            kind = made_by_api(value)
            if kind in absent:
                ids.setdefault(kind, []).append(int(i))
        for kind, kind_ids in ids.items():
            found = con.execute(
                f"SELECT EXISTS (SELECT 1 FROM {_RUNTIME} WHERE nameId IN "
                f"({','.join(map(str, kind_ids))}))"
            ).fetchone()[0]
            if found:
                made.add(kind)
    return recorded_kinds(held, made)


_KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
_NEEDED = {
    _KERNEL: ["start", "end", "demangledName", "streamId", "correlationId", "gridX", "blockX"],
    _RUNTIME: ["start", "end", "nameId", "globalTid", "correlationId"],
}
_COUNTED = (
    _KERNEL,
    _RUNTIME,
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "StringIds",
)
_KERNEL_COLS = {
    "start": "start",
    "end": "end",
    "device": "COALESCE(deviceId, -1)",
    "stream": "COALESCE(streamId, -1)",
    "correlation": "COALESCE(correlationId, -1)",
    "pid": PID_OF_GLOBAL.format("globalPid"),
    "name": "demangledName",
    # packed x << 32 | y << 16 | z: CUDA's limits (x < 2^31, y and z < 2^16) keep the three apart
    "grid": "(gridX << 32) | (gridY << 16) | gridZ",
    "block": "(blockX << 32) | (blockY << 16) | blockZ",
    "registers": "COALESCE(registersPerThread, -1)",
    "shared_memory": "COALESCE(staticSharedMemory, 0) + COALESCE(dynamicSharedMemory, 0)",
}
#: The kernels' launch shape: what a reader that never looks at it (a job's per-rank summary) skips.
SHAPE_COLUMNS = ("grid", "block", "registers", "shared_memory")
_API_COLS = {
    "start": "start",
    "end": "end",
    "name": "nameId",
    # nsys packs pid and tid into globalTid: tid in the low 24 bits
    "thread": "COALESCE(globalTid, 0) % 16777216",
    "pid": PID_OF_GLOBAL.format("globalTid"),
    "correlation": "COALESCE(correlationId, -1)",
}
_OSRT_COLS = {
    "start": "start",
    "end": "end",
    "name": "nameId",
    "thread": "COALESCE(globalTid, 0) % 16777216",
    "pid": PID_OF_GLOBAL.format("globalTid"),
}
_MEMOP_COLS = {
    "start": "start",
    "end": "end",
    "device": "COALESCE(deviceId, -1)",
    "stream": "COALESCE(streamId, -1)",
    "correlation": "COALESCE(correlationId, -1)",
    "bytes": "COALESCE(bytes, 0)",
    "pid": PID_OF_GLOBAL.format("globalPid"),
}


def _table(table: str, columns: dict[str, Any]) -> pd.DataFrame:
    """The Trace's table from its columns, in their fixed order, without copying them into one
    block."""
    if not len(columns["start"]):
        return frame(table, [])
    return pd.DataFrame({c: columns[c] for c in COLUMNS[table]}, copy=False)


def _identity(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _api_name(name: str) -> str:
    # nsys stats drops a four-digit API version suffix (cudaMalloc_v3020 -> cudaMalloc) and keeps
    # the others (cudaLaunchKernelExC_v11060, cuGetProcAddress_v2), as observed with nsys 2025.3;
    # names follow it.
    return re.sub(r"_v\d{4}$", "", name)


#: Per table a duration read serves: the export's table, the name column, how a name is cleaned.
_NAMED_DURATIONS: dict[str, tuple[str, str, Callable[[str], str]]] = {
    "kernels": (_KERNEL, "demangledName", str),
    "api": (_RUNTIME, "nameId", _api_name),
    "osrt": ("OSRT_API", "nameId", str),
}


class Export:
    """An open nsys export, the Trace's :class:`~gpumagic.trace.TableSource`: each table read on
    first use. The connection stays open until every table has been read (the export may be moved or
    deleted meanwhile: the open file is still read), and closes with the Trace otherwise; a later
    read opens the file again."""

    def __init__(
        self, con: sqlite3.Connection, path: str, present: set[str], pid: int | None = None
    ) -> None:
        self.path = path
        self.tables = frozenset(("kernels", "api", "memops", "nvtx", "osrt"))
        self._present = present
        self._pid = pid  # the one process with a CUDA context, where the export says there is one
        self._strings: dict[int, str] = {}
        self._given: set[str] = set()
        self._skipped: dict[str, tuple[str, ...]] = {}  # per table: see narrow()
        self._depth = True
        self._attach(con)

    def narrow(self) -> None:
        """Skip what a job's per-rank summary never reads (4 ms a column per 50,000 rows): launch
        shapes (None), streams and threads (-1), NVTX depths (None). Before reading those tables."""
        self._skipped = {"kernels": (*SHAPE_COLUMNS, "stream"), "api": ("thread",)}
        self._skipped["osrt"] = ("thread",)
        self._depth = False

    def _attach(self, con: sqlite3.Connection) -> None:
        self._con = con
        self._close = weakref.finalize(self, con.close)
        self._stat = _identity(self.path)

    def _same_file(self) -> str | None:
        """The path, for more connections to read chunks in parallel, while it is still the file
        first opened; None where it was deleted or replaced since (the open connection alone reads
        the file it opened). A file rewritten in place would mix two exports: that is an error."""
        now = _identity(self.path)
        if (
            now is not None
            and self._stat is not None
            and now != self._stat
            and now[:2] == self._stat[:2]
        ):
            raise NsysExportError(
                path=self.path, reason="was rewritten after it was loaded: load it again"
            )
        return self.path if now is not None and now == self._stat else None

    # --- TableSource
    # --------------------------------------------------------------------------------------------
    def read(self, table: str) -> pd.DataFrame:
        if not self._close.alive:
            _check_sqlite(self.path)
            self._attach(
                sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            )
        df = self._guarded(getattr(self, f"_{table}"))
        self._given.add(table)
        if self._given >= self.tables:
            self._close()
        return df

    def durations(self, table: str) -> tuple[np.ndarray, np.ndarray, list[Any]] | None:
        spec = _NAMED_DURATIONS.get(table)
        if spec is None or spec[0] not in self._present:
            return None
        sql_table, name_col, clean = spec

        def read() -> tuple[np.ndarray, np.ndarray, list[Any]]:
            exprs, where = [name_col, "end - start"], self._where(sql_table)
            ids, dur = int_columns(self._con, sql_table, exprs, where, self._same_file())
            uniq, inverse = distinct(ids)
            labels = [clean(n) for n in self._names(uniq)]
            names, code_of = np.unique(np.asarray(labels, dtype=object), return_inverse=True)
            return code_of.reshape(-1)[inverse], dur, [names]

        return self._guarded(read)

    def count(self, table: str) -> int:
        where = {t: self._where(t) for t in _HELD[table] if t in self._present}

        def read() -> int:
            sql = "SELECT COUNT(*) FROM {}{}"
            run = self._con.execute
            return sum(
                int(run(sql.format(t, f" WHERE {w}" if w else "")).fetchone()[0])
                for t, w in where.items()
            )

        return self._guarded(read)

    # --- reading
    # ----------------------------------------------------------------------------------------------
    def _guarded(self, read: Callable[[], _R]) -> _R:
        try:
            return read()
        except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:  # a damaged page, met here
            raise _damaged(self.path, exc) from exc

    def _where(self, table: str) -> str:
        if table == "NVTX_EVENTS":
            return "eventType IN (59, 60) AND end IS NOT NULL"
        if table == "OSRT_API" and "eventClass" in _columns(self._con, "OSRT_API"):
            # an OS runtime call; 31/32 mark OSRT start/finish (nsys stats skips them)
            return "eventClass = 27"
        return ""

    def _names(self, ids: np.ndarray) -> list[str]:
        """StringIds' text for each id (read once per distinct id; an id without text is named by
        its number)."""
        want = [int(i) for i in ids.tolist() if int(i) not in self._strings]
        if want and "StringIds" in self._present:
            for k in range(0, len(want), 500):
                chunk = want[k : k + 500]
                rows = self._con.execute(
                    f"SELECT id, value FROM StringIds WHERE id IN ({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
                self._strings.update(rows)
        return [self._strings.get(int(i), str(int(i))) for i in ids.tolist()]

    def _frame(self, table: str, cols: dict[str, str]) -> dict[str, np.ndarray]:
        """``cols`` (name -> SQL expression) of ``table``'s rows. Each row's process is read only
        where more than one process had a CUDA context: a single-process export's rows are all its
        one process's (a column read per row costs 0.2 s per million rows)."""
        have = _columns(self._con, table)
        known = -1 if not {"globalPid", "globalTid"} & have else self._pid
        read = {c: available(e, have) for c, e in cols.items() if c != "pid" or known is None}
        exprs = list(read.values())
        out = dict(
            zip(read, int_columns(self._con, table, exprs, self._where(table), self._same_file()))
        )
        if "pid" in cols and known is not None:
            out["pid"] = np.full(len(out["start"]), known, dtype=np.int64)
        return out

    def _read(self, table: str, cols: dict[str, str], name: str) -> dict[str, np.ndarray]:
        """:meth:`_frame` less the columns a narrow read skips: one value repeated, no memory."""
        skipped = self._skipped.get(name, ())
        c = self._frame(table, {k: v for k, v in cols.items() if k not in skipped})
        fill = {k: np.array(None if k in SHAPE_COLUMNS else -1) for k in skipped}  # None, or -1
        c.update({k: np.broadcast_to(v, len(c["start"])) for k, v in fill.items()})
        return c

    def _named(self, ids: np.ndarray, clean: Callable[[str], str] = str) -> pd.Categorical:
        uniq, inverse = distinct(ids)
        return categorical([clean(n) for n in self._names(uniq)], inverse)

    def _kernels(self) -> pd.DataFrame:
        if _KERNEL not in self._present:
            return frame("kernels", [])
        c = self._read(_KERNEL, _KERNEL_COLS, "kernels")
        c["name"] = self._named(c["name"])
        if not self._skipped:
            c.update(grid=dims(c["grid"]), block=dims(c["block"]))
        return _table("kernels", c)

    def _api(self) -> pd.DataFrame:
        if _RUNTIME not in self._present:
            return frame("api", [])
        c = self._read(_RUNTIME, _API_COLS, "api")
        c["name"] = self._named(c["name"], _api_name)  # each distinct name rewritten once
        return _table("api", c)

    def _osrt(self) -> pd.DataFrame:
        if "OSRT_API" not in self._present:
            return frame("osrt", [])
        c = self._read("OSRT_API", _OSRT_COLS, "osrt")
        c["name"] = self._named(c["name"])
        return _table("osrt", c)

    def _memops(self) -> pd.DataFrame:
        parts = []
        if "CUPTI_ACTIVITY_KIND_MEMCPY" in self._present:
            c = self._frame(
                "CUPTI_ACTIVITY_KIND_MEMCPY", {**_MEMOP_COLS, "kind": "COALESCE(copyKind, -1)"}
            )
            uniq, inverse = distinct(c["kind"] + 1)
            kinds = np.array([_MEMCPY_KIND.get(int(k) - 1, "memcpy") for k in uniq], dtype=object)
            c.update(
                kind=kinds[inverse],
                name=np.array([f"Memcpy {k}" for k in kinds], dtype=object)[inverse],
            )
            parts.append(pd.DataFrame(c))
        if "CUPTI_ACTIVITY_KIND_MEMSET" in self._present:
            c = self._frame("CUPTI_ACTIVITY_KIND_MEMSET", _MEMOP_COLS)
            parts.append(pd.DataFrame(c).assign(kind="memset", name="Memset"))
        parts = [p for p in parts if not p.empty]
        if not parts:
            return frame("memops", [])
        return frame("memops", pd.concat(parts, ignore_index=True))

    def _nvtx(self) -> pd.DataFrame:
        if "NVTX_EVENTS" not in self._present:
            return frame("nvtx", [])
        # 59: push/pop range, 60: start/end range (ENUM_NSYS_EVENT_TYPE); 75: domain creation gives
        # domain names
        df = pd.read_sql_query(
            "SELECT start, end, eventType, text, textId, globalTid, domainId FROM NVTX_EVENTS "
            f"WHERE {self._where('NVTX_EVENTS')}",
            self._con,
        )
        if df.empty:
            return frame("nvtx", [])
        domains = dict(
            self._con.execute(
                "SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = 75 AND text IS NOT NULL"
            ).fetchall()
        )
        text_ids = df["textId"].dropna().astype("int64").unique()
        strings = dict(zip(text_ids.tolist(), self._names(text_ids)))
        text = df["text"].where(df["text"].notna(), df["textId"].map(strings))
        domain = (
            df["domainId"]
            .map(domains)
            .astype(object)
            .where(df["domainId"].map(domains).notna(), "")
        )
        out = pd.DataFrame(
            {
                # nsys stats names a range "<domain>:<text>" (":text" in the default domain)
                "text": domain + ":" + text.fillna("").astype(str),
                "start": df["start"],
                "end": df["end"],
                "thread": df["globalTid"].fillna(0).astype("int64") % 0x1000000,
                "pid": (df["globalTid"].fillna(0).astype("int64") // 0x1000000 % 0x1000000).where(
                    df["globalTid"].notna(), -1
                ),
                "domain": domain,
                "style": df["eventType"].map({59: "PushPop", 60: "StartEnd"}),
            }
        )
        out = frame("nvtx", out)
        out["depth"] = nesting_depth(out) if self._depth else None
        return out
