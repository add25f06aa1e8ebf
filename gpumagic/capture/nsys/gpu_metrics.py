"""The GPU metrics of an nsys export (``GPU_METRICS``, ``TARGET_INFO_GPU_METRICS``: written where
nsys sampled the GPU's counters, ``--gpu-metrics-devices``), put on its kernels as the report reads
them: ``trace.meta["counters"]``, one row per kernel name (``trace/counters.py``).

Which GPU a sample is of: nsys names each GPU's metrics by a ``typeId`` whose low byte is the GPU's
index; with one GPU sampled every sample is that GPU's. Where the export has no metrics although
they were asked for, the reason is almost always the counters' permission (``ERR_NVGPUCTRPERM``):
:data:`NO_PERMISSION` says what to do.
"""

from __future__ import annotations

import re
import sqlite3

import pandas as pd

from ...trace import Trace
from ...trace.counters import METRICS, kernel_counters, records, sample_period

__all__ = ["NO_PERMISSION", "attach_counters", "metric_set", "read_samples"]

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


def metric_set(con: sqlite3.Connection) -> str | None:
    """The metric set nsys sampled, as "alias: name" from the set file it recorded (its
    ``GpuMetrics/*.config``, kept in the export); None where the export does not hold it."""
    if not {"ANALYSIS_FILE", "StringIds"} <= _tables(con):
        return None
    rows = con.execute(
        "SELECT s.value FROM ANALYSIS_FILE a JOIN StringIds s ON s.id = a.contentId "
        "WHERE a.filename LIKE '%GpuMetrics%.config'"
    ).fetchall()
    for (text,) in rows:
        found = _SET.search(str(text))
        if found:
            return f"{found[1]}: {found[2].strip()}"
    return None


_SET = re.compile(r"-\s*alias:\s*(\S+)\s*\n\s*name:\s*([^\n]+)")


def attach_counters(trace: Trace, path: str, asked: bool = False) -> None:
    """Put the export's GPU metrics on ``trace``: ``meta["counter_samples"]`` (the samples of
    the metrics read, over the trace's window), ``meta["counters_period_ns"]``,
    ``meta["counters"]`` (per kernel name, :func:`~gpumagic.trace.counters.kernel_counters`) and
    ``meta["counters_set"]``; where there are none and ``asked``, a note saying why
    (``meta["counters_note"]``)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        samples = read_samples(con)
        if samples is None or samples.empty:
            if asked:
                trace.meta["counters_note"] = NO_PERMISSION
            return
        chosen = metric_set(con)
    finally:
        con.close()
    period = sample_period(samples)
    if len(trace.kernels):
        t0, t1 = trace.window()
        keep = (samples["timestamp"] >= t0 - 2 * period) & (samples["timestamp"] <= t1 + 2 * period)
        samples = samples[keep.to_numpy()].reset_index(drop=True)
    table = kernel_counters(trace.kernels, samples, period)
    trace.meta["counter_samples"] = samples
    trace.meta["counters"] = records(table)
    trace.meta["counters_period_ns"] = period
    if chosen:
        trace.meta["counters_set"] = chosen
