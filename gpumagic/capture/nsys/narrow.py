"""The few columns of a big nsys export that a diff needs, read without building its tables.

Reading a million-kernel export's whole kernel table (ten columns) costs seconds; a diff needs each
kernel's name, start and duration, the host's synchronisation calls and the first CUDA API call's
start. :func:`narrow_read` reads those (the columnar read of ``nsys_columns``, and two small SQL
aggregates) for an export of one process on one GPU whose tables have not been read yet; anything
else returns None and the diff reads the Trace as it is.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...trace import Trace
from .columns import distinct, int_columns
from .sqlite import Export

__all__ = ["narrow_read"]

_KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"


def narrow_read(trace: Trace, sync_apis: Sequence[str]) -> dict[str, Any] | None:
    """The export's few columns, as the fields of ``gpumagic.analysis.profile_summary.Narrow``
    (``codes``, ``names``, ``start``, ``end``, ``syncs``: the calls of ``sync_apis`` and their ns,
    together, ``api_first``); None where the Trace is not an unread nsys export of one process and
    one GPU without a cell label (its figures need its tables).
    """
    src = trace.source
    meta = trace.meta
    if (
        src is None
        or meta.get("backend") != "nsys"
        or meta.get("label")
        or "kernels" not in trace._unread
    ):
        return None
    if (
        len(meta.get("processes") or []) != 1
        or len({d.get("cuda_id") for d in meta.get("cuda_devices") or []}) > 1
    ):
        return None
    if not isinstance(src, Export):  # its figures come straight from the export's tables
        return None
    con, present = src._con, src._present
    if _KERNEL not in present:
        return None
    try:
        ids, start, dur = int_columns(
            con, _KERNEL, ["demangledName", "start", "end - start"], "", src._same_file()
        )
        uniq, inverse = distinct(ids)
        names = src._names(uniq)
        syncs, first = _api(con, present, sync_apis)
    except sqlite3.Error:
        return None
    codes = np.asarray(inverse, dtype=np.int64)
    return {
        "codes": codes,
        "names": names,
        "start": start,
        "end": start + dur,
        "syncs": syncs,
        "api_first": first,
    }


def _api(
    con: sqlite3.Connection, present: set[str], sync_apis: Sequence[str]
) -> tuple[dict[str, tuple[int, int]], int | None]:
    """The host synchronisations (name -> calls, ns) and the first API call's start."""
    if _RUNTIME not in present:
        return {}, None
    wanted = set(sync_apis)
    strings = (
        con.execute("SELECT id, value FROM StringIds WHERE value LIKE 'cu%'")
        if "StringIds" in present
        else []
    )
    ids = [(i, bare) for i, v in strings if (bare := re.sub(r"_v\d+$", "", str(v))) in wanted]
    name_of = dict(ids)
    # one scan, no grouping: the first call's start, and the calls and time of the synchronisations
    # together
    marks = ",".join(str(int(i)) for i in name_of) or "NULL"
    first, n, ns = con.execute(
        f"SELECT MIN(start), SUM(nameId IN ({marks})), SUM(CASE WHEN nameId IN ({marks}) THEN "
        f"end - start ELSE 0 END) "
        f"FROM {_RUNTIME}"
    ).fetchone()
    syncs = {"synchronisations": (int(n or 0), int(ns or 0))} if n else {}
    first = None if first is None else int(first)
    return syncs, first
