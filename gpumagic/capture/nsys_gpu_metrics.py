"""The GPU metrics of an nsys export (``GPU_METRICS``, ``TARGET_INFO_GPU_METRICS``: written where
nsys sampled the GPU's counters, ``--gpu-metrics-devices``), put on its kernels as the report reads
them: ``trace.meta["counters"]``, one row per kernel name (``trace/counters.py``).

Which GPU a sample is of: nsys names each GPU's metrics by a ``typeId`` whose low byte is the GPU's
index; with one GPU sampled every sample is that GPU's. Where the export has no metrics although
they were asked for, the reason is almost always the counters' permission (``ERR_NVGPUCTRPERM``):
:data:`NO_PERMISSION` says what to do.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pandas as pd

from ..trace.counters import METRICS, kernel_counters, records

__all__ = ["NO_PERMISSION", "attach_counters", "read_samples"]

#: What the report says where metrics were asked for and the export holds none.
NO_PERMISSION = (
    "GPU metrics were asked for (--counters) but the report holds none: nsys could not read the "
    "GPU's performance counters (ERR_NVGPUCTRPERM). Run as root, or let every user profile "
    "(the driver option NVreg_RestrictProfilingToAdminUsers=0), or start the container with "
    "--cap-add=SYS_ADMIN; the rest of the profile is as without --counters."
)


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def read_samples(con: sqlite3.Connection) -> pd.DataFrame | None:
    """The samples of the metrics gpumagic reads: timestamp (ns), gpu, key, value; None where the
    export has no GPU metrics."""
    if not {"GPU_METRICS", "TARGET_INFO_GPU_METRICS"} <= _tables(con):
        return None
    names = pd.read_sql_query(
        "SELECT DISTINCT typeId, metricId, metricName FROM TARGET_INFO_GPU_METRICS", con
    )
    keys = {name: key for key, name in METRICS.items()}
    names["key"] = names["metricName"].map(keys)
    names = names.dropna(subset=["key"])
    if names.empty:
        return None
    ids = ",".join(str(int(i)) for i in names["metricId"].unique())
    samples = pd.read_sql_query(
        f"SELECT timestamp, typeId, metricId, value FROM GPU_METRICS WHERE metricId IN ({ids})",
        con,
    )
    samples = samples.merge(names[["typeId", "metricId", "key"]], on=["typeId", "metricId"])
    samples["gpu"] = samples["typeId"].astype("int64") & 0xFF
    return samples[["timestamp", "gpu", "key", "value"]]


def _kernels(con: sqlite3.Connection) -> pd.DataFrame:
    return pd.read_sql_query(
        "SELECT s.value AS name, k.start, k.end, k.deviceId AS device "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName",
        con,
    )


def attach_counters(trace: Any, path: str, asked: bool = False) -> None:
    """Put the export's GPU metrics on ``trace``'s kernels (``meta["counters"]`` and
    ``meta["counters_period_ns"]``); where there are none and ``asked``, a note saying why
    (``meta["counters_note"]``)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        samples = read_samples(con)
        if samples is None or samples.empty:
            if asked:
                trace.meta["counters_note"] = NO_PERMISSION
            return
        kernels = _kernels(con)
    finally:
        con.close()
    gpus = samples["gpu"].unique()
    parts = []
    for device, mine in kernels.groupby("device"):
        of = samples if len(gpus) == 1 else samples[samples["gpu"] == int(device)]
        parts.append(kernel_counters(mine, of))
    if not parts:
        return
    table = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    trace.meta["counters"] = records(table)
    trace.meta["counters_period_ns"] = float(table["period_ns"].iloc[0]) if len(table) else None
