"""The sampled GPU metrics (``--counters``) as lanes under the timeline's GPU lanes: SMs active,
the tensor pipe active, DRAM bandwidth (read and write, stacked), each a filled step curve from 0 to
100% of its peak, so that a slow stretch of the timeline shows at a glance whether the SMs were
idle, the tensor cores unused or the memory saturated, on the same time axis as the kernels.

Each sample holds its value over the period before its time (as ``trace/counters.py`` reads it);
beyond :data:`MAX_POINTS` samples a lane shows the mean of equal bins, so a long capture stays a
small page.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..edges import BokehModel
from ..trace import Trace

__all__ = ["LANE_HEIGHT", "MAX_POINTS", "CounterLane", "draw_lanes", "plan_lanes"]

#: Samples a lane draws at most (bins beyond).
MAX_POINTS = 4000
#: A lane's height in the timeline's row units (a kernel lane is 0.8).
LANE_HEIGHT = 1.2
_GAP = 0.2
_LANES = [
    ("SMs active", ("sm_active",), "#4c78a8"),
    ("Tensor pipe active", ("tensor_active",), "#54a24b"),
    ("DRAM read + write", ("dram_read", "dram_write"), "#e45756"),
]


@dataclass
class CounterLane:
    """One metric's lane: its label, the step curve's x (ns since ``t0``) and values (0-100 per
    part, stacked), and the band it fills (``bottom`` to ``bottom + LANE_HEIGHT``)."""

    label: str
    x: np.ndarray
    parts: list[np.ndarray]
    color: str
    bottom: float


def _binned(ts: np.ndarray, values: np.ndarray, period: float) -> tuple[np.ndarray, np.ndarray]:
    """The step curve's corners (each sample from ``t - period`` to ``t``), binned to at most
    :data:`MAX_POINTS` samples."""
    if len(ts) > MAX_POINTS:
        k = -(-len(ts) // MAX_POINTS)
        n = len(ts) // k * k
        ts = ts[:n].reshape(-1, k)[:, -1]
        values = values[:n].reshape(-1, k).mean(axis=1)
        period = period * k
    x = np.empty(2 * len(ts))
    x[0::2], x[1::2] = ts - period, ts
    return x, np.repeat(values, 2)


def plan_lanes(trace: Trace, t0: int, y: float) -> tuple[list[CounterLane], float]:
    """The lanes to draw from ``y`` down (none where the capture sampled no counters), and the y
    below them."""
    samples = trace.meta.get("counter_samples")
    period = trace.meta.get("counters_period_ns")
    if samples is None or not len(samples) or not period:
        return [], y
    if "gpu" in samples and samples["gpu"].nunique() > 1:
        samples = samples[samples["gpu"] == samples["gpu"].min()]
    lanes = []
    for label, keys, color in _LANES:
        series = []
        for key in keys:
            mine = samples[samples["key"] == key].sort_values("timestamp")
            if len(mine):
                series.append(mine.set_index("timestamp")["value"].rename(key))
        if not series:
            continue
        frame = pd.concat(series, axis=1).fillna(0.0)
        ts = frame.index.to_numpy(dtype="float64") - t0
        parts = []
        for col in frame.columns:
            x, v = _binned(ts, np.clip(frame[col].to_numpy(dtype="float64"), 0, 100), period)
            parts.append(v)
        y -= _GAP + LANE_HEIGHT
        lanes.append(CounterLane(label, x, parts, color, y))
    return lanes, y - _GAP


def draw_lanes(
    p: BokehModel, lanes: list[CounterLane], per: float
) -> tuple[list[float], dict[float, str]]:
    """Draw ``lanes`` on figure ``p`` (x in units of ``per`` ns); the ticks and labels they add."""
    ticks: list[float] = []
    labels: dict[float, str] = {}
    for lane in lanes:
        base = np.full(len(lane.x), lane.bottom)
        x = lane.x / per
        for i, part in enumerate(lane.parts):
            top = base + np.minimum(part, 100.0) / 100.0 * LANE_HEIGHT
            top = np.minimum(top, lane.bottom + LANE_HEIGHT)
            p.varea(x=x, y1=base, y2=top, fill_color=lane.color, fill_alpha=0.75 - 0.3 * i)
            base = top
        center = lane.bottom + LANE_HEIGHT / 2
        ticks.append(center)
        labels[center] = f"{lane.label} (0-100%)"
    return ticks, labels
