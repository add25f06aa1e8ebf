"""GPU metrics (Nsight Systems' sampled hardware counters) put on the kernels that ran while they
were sampled.

nsys samples a GPU's counters at a fixed rate (``--gpu-metrics-frequency``, 10 kHz here: one sample
every 100 µs) and writes each metric's value at the end of its sampling period, as a percentage of
its peak (``SMs Active``, ``SM Issue``, ``Tensor Active``, ``DRAM Read/Write Bandwidth``, ``Compute
Warps in Flight``: ``[Throughput %]``) or a unit (clocks, ``[MHz]``). A kernel's figure is the
time-weighted mean of the samples over its run: the samples, as a step function of time, integrated
over ``[start, end]`` and divided by its duration. A kernel shorter than a sampling period sees one
sample shared with what ran beside it, so a kernel name's figure is the integral over all its calls
divided by their total time, and a name whose calls are shorter than two periods on average is
marked ``short``: its figure is the neighbourhood's as much as its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "METRICS",
    "grouped_means",
    "integrals",
    "kernel_counters",
    "kernel_integrals",
    "records",
    "sample_period",
]

#: The metrics read, by short key: the name nsys gives them starts with the text.
METRICS = {
    "sm_active": "SMs Active [Throughput %]",
    "sm_issue": "SM Issue [Throughput %]",
    "tensor_active": "Tensor Active [Throughput %]",
    "dram_read": "DRAM Read Bandwidth [Throughput %]",
    "dram_write": "DRAM Write Bandwidth [Throughput %]",
    "warps": "Compute Warps in Flight [Throughput %]",
    "gpc_mhz": "GPC Clock Frequency [MHz]",
}


def _integral(ts: np.ndarray, values: np.ndarray, period: float) -> tuple[np.ndarray, np.ndarray]:
    """Knots (times) and the running integral of the step function whose value ``values[i]``
    holds from the previous sample's time to ``ts[i]`` (the first over one ``period``)."""
    knots = np.concatenate([[ts[0] - period], ts])
    widths = np.diff(knots)
    return knots, np.concatenate([[0.0], np.cumsum(values * widths)])


def sample_period(samples: pd.DataFrame) -> float:
    """The sampling period (ns): the median gap between sample times (0 with fewer than two)."""
    gaps = np.diff(np.sort(samples["timestamp"].unique())) if len(samples) else np.empty(0)
    return float(np.median(gaps)) if len(gaps) else 0.0


def integrals(
    starts: np.ndarray, ends: np.ndarray, samples: pd.DataFrame, period_ns: float
) -> pd.DataFrame:
    """Each interval's integral (ns x value) of every metric in :data:`METRICS` over
    ``[start, end]``: summed over a group and divided by the group's time, the group's
    time-weighted mean. NaN for a metric that was not sampled."""
    starts = np.asarray(starts, dtype="float64")
    ends = np.asarray(ends, dtype="float64")
    out = {}
    for key in METRICS:
        mine = samples[samples["key"] == key].sort_values("timestamp")
        if mine.empty or not period_ns:
            out[key] = np.full(len(starts), np.nan)
            continue
        values = mine["value"].to_numpy(dtype="float64")
        if key == "gpc_mhz" and np.nanmedian(values) > 1e5:
            values = values / 1e6  # nsys 2025.3 writes the [MHz] clock in Hz
        knots, running = _integral(mine["timestamp"].to_numpy(dtype="float64"), values, period_ns)
        out[key] = np.interp(ends, knots, running) - np.interp(starts, knots, running)
    return pd.DataFrame(out)


def grouped_means(
    durations: np.ndarray, parts: pd.DataFrame, by: list[pd.Series] | pd.Series, period_ns: float
) -> pd.DataFrame:
    """Per group of ``by``: Instances, Total Time (ns), each metric's time-weighted mean (from the
    rows' ``parts``, :func:`integrals`), ``short`` (calls shorter than two periods on average)."""
    frame = parts.assign(dur=np.asarray(durations, dtype="float64"))
    groups = frame.groupby(by, sort=False, dropna=False)
    table = pd.DataFrame({"Instances": groups.size(), "Total Time (ns)": groups["dur"].sum()})
    time = table["Total Time (ns)"].where(table["Total Time (ns)"] > 0)
    for key in METRICS:
        table[key] = groups[key].sum(min_count=1) / time
    table["short"] = table["Total Time (ns)"] / table["Instances"] < 2 * period_ns
    return table


def kernel_counters(
    kernels: pd.DataFrame, samples: pd.DataFrame, period_ns: float | None = None
) -> pd.DataFrame:
    """One row per kernel name (``kernels``: name, start, end in ns, and device where several GPUs
    were sampled; ``samples``: timestamp, key, value, and gpu): Instances, Total Time (ns), each
    metric's time-weighted mean over the name's calls, ``short`` (calls shorter than two periods on
    average) and ``period_ns``. Empty where either table is."""
    cols = ["Name", "Instances", "Total Time (ns)", *METRICS, "short", "period_ns"]
    if kernels.empty or samples.empty:
        return pd.DataFrame(columns=cols)
    if period_ns is None:
        period_ns = sample_period(samples)
    starts = kernels["start"].to_numpy(dtype="float64")
    ends = kernels["end"].to_numpy(dtype="float64")
    parts = kernel_integrals(kernels, samples, period_ns).reset_index(drop=True)
    names = pd.Series(kernels["name"].astype(str).to_numpy(), name="Name")
    table = grouped_means(np.maximum(ends - starts, 0.0), parts, names, period_ns)
    table["period_ns"] = period_ns
    table = table.reset_index().sort_values("Total Time (ns)", ascending=False)
    return table[cols].reset_index(drop=True)


def kernel_integrals(
    kernels: pd.DataFrame, samples: pd.DataFrame, period_ns: float
) -> pd.DataFrame:
    """:func:`integrals` for each row of ``kernels`` (start, end, and device where several GPUs
    were sampled: each kernel read from its own GPU's samples), in the kernels' order."""
    if kernels.empty:
        return integrals(np.array([]), np.array([]), samples, period_ns)
    gpus = samples["gpu"].unique() if "gpu" in samples else [0]
    if len(gpus) <= 1 or "device" not in kernels:
        return integrals(kernels["start"], kernels["end"], samples, period_ns)
    parts = []
    for device, mine in kernels.groupby("device", sort=False):
        found = integrals(
            mine["start"], mine["end"], samples[samples["gpu"] == int(device)], period_ns
        )
        parts.append(found.set_axis(mine.index))
    return pd.concat(parts).reindex(kernels.index)


def records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The table as JSON-able rows (for ``Trace.meta``)."""
    rows = []
    for row in table.to_dict("records"):
        rows.append(
            {
                k: None
                if isinstance(v, float) and np.isnan(v)
                else getattr(v, "item", lambda v=v: v)()
                for k, v in row.items()
            }
        )
    return rows
