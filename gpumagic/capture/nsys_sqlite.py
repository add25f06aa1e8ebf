"""Read an Nsight Systems SQLite export into a Trace: ``read_sqlite(path)``. (``gpumagic.load_nsys`` also takes a
``.nsys-rep``, which the local nsys exports first: ``capture/nsys.py``.)

The export's schema changes between releases ("the SQLite export schema can and will change"), so the reader
checks the file is really SQLite and whole (an interrupted export leaves a zeroed or truncated file; a damaged page
found later by a query is the same error, never a raw ``sqlite3.DatabaseError``), reads ``META_DATA_EXPORT`` before
any query, names the tables and columns it needs when they are missing, and resolves every name through
``StringIds``. Kernels are named by their demangled name, as ``nsys stats`` groups them.
"""

from __future__ import annotations

import os
import re
import sqlite3
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ExportFormatError, FileMissingError, NoCudaDataError, NsysExportError
from ..trace import Trace, frame, nesting_depth

__all__ = ["SUPPORTED_SCHEMA_MAJOR", "NoCudaDataError", "NsysExportError", "read_sqlite"]

SUPPORTED_SCHEMA_MAJOR = 3
_SQLITE_MAGIC = b"SQLite format 3\x00"
_CUDA_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
)
_MEMCPY_KIND = {1: "HtoD", 2: "DtoH", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}


_EXPORT_AGAIN = "Export the report again: nsys export --type sqlite --force-overwrite true REPORT"


def _check_sqlite(path: str) -> None:
    """The file is whole SQLite: its magic, and as many bytes as its header says it has pages (an export cut short
    by a full disk or a killed nsys is shorter)."""
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except FileNotFoundError:
        raise FileMissingError(path=path, what="The nsys SQLite export") from None
    except OSError as exc:
        raise NsysExportError(path=path, reason=f"cannot be read ({exc})") from exc
    if head[:16] != _SQLITE_MAGIC:
        what = "an empty or zeroed file (an interrupted export?)" if not head.strip(b"\x00") else "not an SQLite file"
        raise NsysExportError(path=path, reason=f"{what}. {_EXPORT_AGAIN}")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    header_count_valid = head[24:28] == head[92:96]  # the page count is current only when these agree
    size = os.path.getsize(path)
    if len(head) == 100 and header_count_valid and pages and size < page_size * pages:
        raise NsysExportError(
            path=path,
            reason=f"truncated: {size:,} bytes where its header says {page_size * pages:,} (an export cut short by "
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
            reason=f"table {table} lacks column(s) {', '.join(missing)}: this export schema is not one gpumagic "
            "knows. Export with the nsys release gpumagic was tested with (2025.x), or report the schema version.",
        )


def read_sqlite(path: str) -> Trace:
    _check_sqlite(path)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return _read(con, path)
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:  # a damaged page, met by the query reading it
        raise NsysExportError(path=path, reason=f"a damaged SQLite file ({exc}). {_EXPORT_AGAIN}") from exc
    finally:
        con.close()


def _read(con: sqlite3.Connection, path: str) -> Trace:
    tables = _tables(con)
    meta: dict[str, Any] = {"backend": "nsys", "source": path}
    if "META_DATA_EXPORT" not in tables:
        raise NsysExportError(path=path, reason="no META_DATA_EXPORT table: not an nsys SQLite export")
    md = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall())
    schema = md.get("EXPORT_SCHEMA_VERSION", "")
    meta["nsys_version"] = md.get("EXPORT_PRODUCT_VERSION")
    meta["schema_version"] = schema
    try:
        major = int(md.get("EXPORT_SCHEMA_VERSION_MAJOR") or schema.split(".")[0])
    except ValueError:
        major = -1
    if major != SUPPORTED_SCHEMA_MAJOR:
        raise ExportFormatError(
            path=path, schema=schema or "?", nsys_version=meta["nsys_version"], supported=SUPPORTED_SCHEMA_MAJOR
        )
    if not tables & set(_CUDA_TABLES):
        raise NoCudaDataError(path=path)
    strings = dict(con.execute("SELECT id, value FROM StringIds").fetchall()) if "StringIds" in tables else {}
    kernels = _kernels(con, tables, strings, path)
    api = _api(con, tables, strings, path)
    memops = _memops(con, tables)
    nvtx = _nvtx(con, tables, strings)
    osrt = _osrt(con, tables, strings)
    if "TARGET_INFO_GPU" in tables:
        row = con.execute("SELECT * FROM TARGET_INFO_GPU LIMIT 1").fetchone()
        if row:
            cols = [d[0] for d in con.execute("SELECT * FROM TARGET_INFO_GPU LIMIT 1").description]
            info = dict(zip(cols, row))
            meta["device"] = info.get("name")
            meta["sm_count"] = info.get("smCount")
            if info.get("computeMajor") is not None:
                meta["compute_capability"] = f"{info['computeMajor']}.{info['computeMinor']}"
    return Trace(kernels=kernels, memops=memops, api=api, nvtx=nvtx, osrt=osrt, meta=meta)


def _tid(global_tid: pd.Series) -> pd.Series:
    # nsys packs pid and tid into globalTid: tid in the low 24 bits
    return (global_tid.astype("int64") % 0x1000000).astype("int64")


def _ints(con: sqlite3.Connection, sql: str, ncols: int) -> np.ndarray:
    """An integer query as a (rows, ncols) int64 array: fetchall + numpy is several times faster than
    pandas.read_sql_query on million-row tables (NULLs must be COALESCEd in the SQL)."""
    rows = con.execute(sql).fetchall()
    return np.array(rows, dtype=np.int64).reshape(len(rows), ncols)


def _dims(packed: np.ndarray) -> np.ndarray:
    """Packed (x << 42 | y << 21 | z) launch dimensions -> 'XxYxZ' strings, formatted once per distinct value."""
    uniq, inv = np.unique(packed, return_inverse=True)
    labels = np.array([f"{u >> 42}x{(u >> 21) & 0x1FFFFF}x{u & 0x1FFFFF}" for u in uniq.tolist()], dtype=object)
    return labels[inv]


def _kernels(con: sqlite3.Connection, tables: set[str], strings: dict[int, str], path: str) -> pd.DataFrame:
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    if t not in tables:
        return frame("kernels", [])
    _need(con, t, ["start", "end", "demangledName", "streamId", "correlationId", "gridX", "blockX"], path)
    a = _ints(
        con,
        "SELECT start, end, COALESCE(deviceId, -1), COALESCE(streamId, -1), COALESCE(correlationId, -1), "
        "demangledName, "
        "(gridX << 42) | (gridY << 21) | gridZ, (blockX << 42) | (blockY << 21) | blockZ, "
        "COALESCE(registersPerThread, -1), COALESCE(staticSharedMemory, 0) + COALESCE(dynamicSharedMemory, 0) "
        f"FROM {t}",
        10,
    )
    if not len(a):
        return frame("kernels", [])
    names = pd.Series(a[:, 5]).map(strings)
    out = pd.DataFrame(
        {
            "name": names.where(names.notna(), pd.Series(a[:, 5]).astype(str)),
            "start": a[:, 0],
            "end": a[:, 1],
            "device": a[:, 2],
            "stream": a[:, 3],
            "correlation": a[:, 4],
            "grid": _dims(a[:, 6]),
            "block": _dims(a[:, 7]),
            "registers": a[:, 8],
            "shared_memory": a[:, 9],
        }
    )
    return frame("kernels", out)


def _api(con: sqlite3.Connection, tables: set[str], strings: dict[int, str], path: str) -> pd.DataFrame:
    t = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if t not in tables:
        return frame("api", [])
    _need(con, t, ["start", "end", "nameId", "globalTid", "correlationId"], path)
    a = _ints(con, f"SELECT start, end, nameId, globalTid, COALESCE(correlationId, -1) FROM {t}", 5)
    if not len(a):
        return frame("api", [])
    # nsys stats drops a four-digit API version suffix (cudaMalloc_v3020 -> cudaMalloc) and keeps the others
    # (cudaLaunchKernelExC_v11060, cuGetProcAddress_v2), as observed with nsys 2025.3; names follow it. Each
    # distinct name is rewritten once.
    ids = np.unique(a[:, 2])
    clean = {int(i): re.sub(r"_v\d{4}$", "", strings.get(int(i), "?")) for i in ids}
    out = pd.DataFrame(
        {
            "name": pd.Series(a[:, 2]).map(clean),
            "start": a[:, 0],
            "end": a[:, 1],
            "thread": a[:, 3] % 0x1000000,
            "correlation": a[:, 4],
        }
    )
    return frame("api", out)


def _memops(con: sqlite3.Connection, tables: set[str]) -> pd.DataFrame:
    parts = []
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        df = pd.read_sql_query(
            "SELECT start, end, deviceId, streamId, correlationId, bytes, copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY", con
        )
        kind = df["copyKind"].map(_MEMCPY_KIND).fillna("memcpy")
        parts.append(_memop_frame(df, kind, "Memcpy " + kind))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        df = pd.read_sql_query(
            "SELECT start, end, deviceId, streamId, correlationId, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET", con
        )
        parts.append(_memop_frame(df, "memset", "Memset"))
    parts = [p for p in parts if not p.empty]
    return frame("memops", pd.concat(parts, ignore_index=True) if parts else [])


def _memop_frame(df: pd.DataFrame, kind: Any, name: Any) -> pd.DataFrame:
    """An nsys MEMCPY or MEMSET table in the Trace's memops columns."""
    return pd.DataFrame(
        {
            "kind": kind,
            "name": name,
            "bytes": df["bytes"],
            "start": df["start"],
            "end": df["end"],
            "device": df["deviceId"],
            "stream": df["streamId"],
            "correlation": df["correlationId"],
        }
    )


def _nvtx(con: sqlite3.Connection, tables: set[str], strings: dict[int, str]) -> pd.DataFrame:
    if "NVTX_EVENTS" not in tables:
        return frame("nvtx", [])
    # 59: push/pop range, 60: start/end range (ENUM_NSYS_EVENT_TYPE); 75: domain creation gives domain names
    df = pd.read_sql_query(
        "SELECT start, end, eventType, text, textId, globalTid, domainId FROM NVTX_EVENTS "
        "WHERE eventType IN (59, 60) AND end IS NOT NULL",
        con,
    )
    if df.empty:
        return frame("nvtx", [])
    domains = dict(
        con.execute("SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = 75 AND text IS NOT NULL").fetchall()
    )
    text = df["text"].where(df["text"].notna(), df["textId"].map(strings))
    domain = df["domainId"].map(domains).astype(object).where(df["domainId"].map(domains).notna(), "")
    out = pd.DataFrame(
        {
            # nsys stats names a range "<domain>:<text>" (":text" in the default domain)
            "text": domain + ":" + text.fillna("").astype(str),
            "start": df["start"],
            "end": df["end"],
            "thread": _tid(df["globalTid"]),
            "domain": domain,
            "style": df["eventType"].map({59: "PushPop", 60: "StartEnd"}),
        }
    )
    out = frame("nvtx", out)
    out["depth"] = nesting_depth(out)
    return out


def _osrt(con: sqlite3.Connection, tables: set[str], strings: dict[int, str]) -> pd.DataFrame:
    if "OSRT_API" not in tables:
        return frame("osrt", [])
    # eventClass 27 is an OS runtime call; 31/32 mark OSRT start/finish and are not calls (nsys stats skips them)
    where = " WHERE eventClass = 27" if "eventClass" in _columns(con, "OSRT_API") else ""
    df = pd.read_sql_query(f"SELECT start, end, nameId, globalTid FROM OSRT_API{where}", con)
    out = pd.DataFrame(
        {
            "name": df["nameId"].map(strings).fillna("?"),
            "start": df["start"],
            "end": df["end"],
            "thread": _tid(df["globalTid"]),
        }
    )
    return frame("osrt", out)
