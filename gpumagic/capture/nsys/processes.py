"""Who ran what in an nsys export: its GPUs, the processes that used CUDA, and the rank each process
says it is.

An export of a ``torchrun`` job holds several processes, each on its own GPU. nsys packs the process
id into every row's ``globalPid`` / ``globalTid`` (pid in bits 24-47, thread id in the low 24 bits);
the tables below name them: ``TARGET_INFO_GPU`` (each GPU's id and name),
``TARGET_INFO_CUDA_DEVICE`` (which GPU each process's CUDA device number is),
``TARGET_INFO_CUDA_CONTEXT_INFO`` (the processes with a CUDA context) and ``PROCESSES`` (names). A
process's rank comes from the NVTX mark ``gpumagic rank=R local_rank=L world=W`` that the launcher
emits in each rank (:data:`gpumagic.trace.RANK_MARK`); it is looked for only where more than one
process used CUDA, so a single-process export pays nothing. All of it is small: read at load, kept
in the Trace's meta as lists of records (they survive ``to_json``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ...trace import RANK_MARK

__all__ = ["PID_OF_GLOBAL", "process_meta"]

#: SQL: the process id packed in a globalPid or globalTid column ({} is the column).
PID_OF_GLOBAL = "COALESCE({} / 16777216 % 16777216, -1)"


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def _rows(
    con: sqlite3.Connection, tables: set[str], table: str, cols: list[str]
) -> list[dict[str, Any]]:
    """``cols`` of every row of ``table`` (those of them it has), or nothing where the export lacks
    the table."""
    if table not in tables:
        return []
    have = [c for c in cols if c in _columns(con, table)]
    if not have:
        return []
    cur = con.execute(f"SELECT {', '.join(have)} FROM {table}")
    return [dict(zip(have, row)) for row in cur.fetchall()]


def process_meta(con: sqlite3.Connection, tables: set[str]) -> dict[str, Any]:
    """``gpus`` ([{id, name, bus}]), ``cuda_devices`` ([{pid, cuda_id, gpu}]), ``processes`` ([{pid,
    name}] of the processes that used CUDA) and ``rank_marks`` ([{pid, rank, local_rank, world}])
    where the export has them."""
    meta: dict[str, Any] = {}
    gpus = _rows(con, tables, "TARGET_INFO_GPU", ["id", "name", "busLocation"])
    if gpus:
        meta["gpus"] = [
            {"id": g.get("id"), "name": g.get("name"), "bus": g.get("busLocation")} for g in gpus
        ]
    devices = _rows(con, tables, "TARGET_INFO_CUDA_DEVICE", ["gpuId", "cudaId", "pid"])
    if devices:
        meta["cuda_devices"] = [
            {"pid": d.get("pid"), "cuda_id": d.get("cudaId"), "gpu": d.get("gpuId")}
            for d in devices
        ]
    contexts = _rows(con, tables, "TARGET_INFO_CUDA_CONTEXT_INFO", ["processId"])
    pids = sorted({int(r["processId"]) for r in contexts if r.get("processId") is not None})
    pids = pids or sorted({int(d["pid"]) for d in devices if d.get("pid") is not None})
    if pids:
        names = {
            int(r["pid"]): r.get("name")
            for r in _rows(con, tables, "PROCESSES", ["pid", "name"])
            if r.get("pid") is not None
        }
        meta["processes"] = [{"pid": p, "name": names.get(p)} for p in pids]
    if (
        len(pids) != 1
    ):  # several processes, or an export that does not say: look for the launcher's marks
        meta["rank_marks"] = _rank_marks(con, tables)
    return meta


def _rank_marks(con: sqlite3.Connection, tables: set[str]) -> list[dict[str, int]]:
    """The launcher's rank marks (NVTX marks, or ranges with that text), one per process: the first
    it emitted."""
    if "NVTX_EVENTS" not in tables or not {"text", "textId", "globalTid"} <= _columns(
        con, "NVTX_EVENTS"
    ):
        return []
    text = "COALESCE(n.text, s.value)" if "StringIds" in tables else "n.text"
    join = "LEFT JOIN StringIds s ON s.id = n.textId" if "StringIds" in tables else ""
    # 34: NvtxMark, 59: push/pop range, 60: start/end range (ENUM_NSYS_EVENT_TYPE)
    rows = con.execute(
        f"SELECT {text}, {PID_OF_GLOBAL.format('n.globalTid')} FROM NVTX_EVENTS n {join} "
        f"WHERE n.eventType IN (34, 59, 60) AND {text} LIKE 'gpumagic rank=%' ORDER BY n.start"
    ).fetchall()
    marks: dict[int, dict[str, int]] = {}
    for value, pid in rows:
        m = RANK_MARK.match(str(value))
        if m and int(pid) not in marks:
            rank, local, world = (int(x) for x in m.groups())
            marks[int(pid)] = {"pid": int(pid), "rank": rank, "local_rank": local, "world": world}
    return list(marks.values())
