"""A two-process, two-GPU nsys export BUILT from the committed single-GPU one
(``data/nsys/block.sqlite.gz``, an H100 capture of the block program): not a capture of a real
two-rank job, but every row of a real export.

The second process is a copy of every row of the first (kernels, memory operations, CUDA API calls,
NVTX ranges, OS runtime calls) under another pid and on GPU 1, shifted by :data:`SHIFT` ns; the
export's process, GPU and CUDA device tables gain the matching rows. NCCL kernels are added by
copying a kernel row and pointing it at new StringIds (real NCCL kernel names) on a stream of their
own, placed per :data:`NCCL`: on the first process one all-reduce inside a GEMM (all overlapped) and
one all-gather after the last kernel (none overlapped); on the second a long all-reduce after its
last kernel and an all-gather that straddles the end of a GEMM. With ``marks``, each process carries
the launcher's NVTX mark, the *second* one as rank 0 (so rank order is not process order).
"""

from __future__ import annotations

import pathlib
import sqlite3

from ..helpers import DATA, gunzip

NSYS = DATA / "nsys"
PID_A, PID_B = 810, 9001  # the original process, and the copy's pid
TID_A = 281488566256426  # the original's main thread (globalTid)
SHIFT = 250_000  # ns: the copy runs this much later
DELTA = (PID_B - PID_A) << 24  # globalPid / globalTid of the copy
LABEL = "cell:block"
ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
ALL_GATHER = "ncclDevKernel_AllGather_RING_LL"
NCCL_STREAM = 20
#: (pid, name, start, end) on the export's clock (the copy's times already shifted).
NCCL = [
    (
        PID_A,
        ALL_REDUCE,
        4_000_615_058,
        4_004_615_058,
    ),  # inside the GEMM 3_999_615_058..4_020_691_218
    (PID_A, ALL_GATHER, 4_104_700_000, 4_105_700_000),  # after the cell range and every kernel
    (
        PID_B,
        ALL_REDUCE,
        4_101_900_000 + SHIFT,
        4_121_900_000 + SHIFT,
    ),  # after the copy's last kernel
    (PID_B, ALL_GATHER, 4_020_000_000 + SHIFT, 4_021_000_000 + SHIFT),  # across the end of a GEMM
]
_BY_PID = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
_BY_TID = ("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "OSRT_API")


def _cols(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]


def _copy_rows(
    con: sqlite3.Connection, table: str, changes: dict[str, str], where: str = "1"
) -> None:
    cols = _cols(con, table)
    exprs = [changes.get(c, c) for c in cols]
    con.execute(
        f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(exprs)} FROM {table} "
        f"WHERE {where}"
    )


def build(path: str | pathlib.Path, marks: bool = True, nccl: list | None = None) -> str:
    """Write the two-process export to ``path`` (returned as a string)."""
    gunzip(NSYS / "block.sqlite.gz", path)
    con = sqlite3.connect(path)
    shifted = {"start": f"start + {SHIFT}", "end": f"end + {SHIFT}"}
    for table in _BY_PID:
        _copy_rows(
            con,
            table,
            {**shifted, "globalPid": f"globalPid + {DELTA}", "deviceId": "1", "contextId": "2"},
        )
    for table in _BY_TID:
        extra = (
            {"endGlobalTid": f"endGlobalTid + {DELTA}"}
            if "endGlobalTid" in _cols(con, table)
            else {}
        )
        _copy_rows(con, table, {**shifted, "globalTid": f"globalTid + {DELTA}", **extra})
    _copy_rows(
        con, "PROCESSES", {"globalPid": f"globalPid + {DELTA}", "pid": str(PID_B)}, f"pid = {PID_A}"
    )
    _copy_rows(
        con, "TARGET_INFO_GPU", {"id": "1", "busLocation": "'0000:00:07.0'", "cuDevice": "1"}
    )
    _copy_rows(con, "TARGET_INFO_CUDA_DEVICE", {"gpuId": "1", "cudaId": "1", "pid": str(PID_B)})
    _copy_rows(
        con,
        "TARGET_INFO_CUDA_CONTEXT_INFO",
        {"processId": str(PID_B), "deviceId": "1", "contextId": "2"},
    )
    next_id = con.execute("SELECT MAX(id) FROM StringIds").fetchone()[0] + 1
    ids = {}
    for name in sorted({n for _, n, _, _ in (nccl if nccl is not None else NCCL)}):
        con.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (next_id, name))
        ids[name], next_id = next_id, next_id + 1
    kcols = _cols(con, "CUPTI_ACTIVITY_KIND_KERNEL")
    for i, (pid, name, start, end) in enumerate(nccl if nccl is not None else NCCL):
        changes = {
            "start": str(start),
            "end": str(end),
            "streamId": str(NCCL_STREAM),
            "correlationId": str(900_000 + i),
            "demangledName": str(ids[name]),
            "shortName": str(ids[name]),
            "mangledName": str(ids[name]),
            "gridX": "2",
            "blockX": "640",
            "globalPid": f"globalPid + {DELTA}" if pid == PID_B else "globalPid",
            "deviceId": "1" if pid == PID_B else "0",
        }
        exprs = [changes.get(c, c) for c in kcols]
        con.execute(
            f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ({', '.join(kcols)}) SELECT "
            f"{', '.join(exprs)} "
            f"FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = 1"
        )
    if marks:
        cell = con.execute(
            "SELECT MIN(n.start) FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId "
            "WHERE s.value = ?",
            (LABEL,),
        ).fetchone()[0]
        if cell is None:
            cell = con.execute(
                "SELECT MIN(start) FROM NVTX_EVENTS WHERE text = ?", (LABEL,)
            ).fetchone()[0]
        for rank, tid, at in ((1, TID_A, cell + 1_000), (0, TID_A + DELTA, cell + SHIFT + 1_000)):
            con.execute(
                "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
                "VALUES (?, NULL, 34, ?, ?, 0)",
                (at, f"gpumagic rank={rank} local_rank={rank} world=2", tid),
            )
    con.commit()
    con.close()
    return str(path)
