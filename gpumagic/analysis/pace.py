"""Who sets the pace: a GPU idle most of the cell (and a host busy in torch ops), or kernels too small to amortise
their launch."""

from __future__ import annotations

import numpy as np

from ..trace import Trace
from .finding import Finding, kernel_facts, t

__all__ = ["TINY_KERNEL_NS", "gpu_idle", "tiny_kernels"]

#: A kernel shorter than this is "tiny": its launch (a few µs of host time) costs as much as its work.
TINY_KERNEL_NS = 10_000


def gpu_idle(trace: Trace) -> list[Finding]:
    """The GPU busy under half of the cell's window; overhead-bound when the host spends 3x that in torch ops."""
    fig = trace.figures()
    wall, busy = fig["wall_ns"], fig["gpu_busy_ns"]
    if not wall or busy / wall >= 0.5:
        return []
    idle = 1 - busy / wall
    cpu = fig["cpu_ops_ns"]
    msg = f"The GPU is idle {idle:.0%} of {fig['window_text']} ({t(wall)}): it is busy for {t(busy)}"
    if cpu and cpu >= 3 * busy:
        msg += (
            f", while the CPU spends {t(cpu)} in torch ops. Overhead-bound: the host, not the GPU, sets the "
            "pace (bigger batches, CUDA graphs or torch.compile help)."
        )
    else:
        msg += "."
    return [Finding("gpu_idle", "warn", msg, {"idle": idle, "wall_ns": wall, "busy_ns": busy, "cpu_ns": cpu})]


def tiny_kernels(trace: Trace) -> list[Finding]:
    """At least 20 kernels, half of them shorter than a launch costs."""
    k = trace.kernels
    if len(k) < 20:
        return []
    durs = kernel_facts(trace).durations
    tiny = durs < TINY_KERNEL_NS
    if tiny.mean() < 0.5:
        return []
    median = float(np.median(durs))
    return [
        Finding(
            "tiny_kernels",
            "warn",
            f"{int(tiny.sum())} of {len(k)} kernels ran for less than {t(TINY_KERNEL_NS)} (median "
            f"{t(median)}): each costs a launch of a few µs of host time. Launch-bound: "
            "CUDA graphs or torch.compile (fusion) remove launches.",
            {"tiny": int(tiny.sum()), "kernels": len(k), "median_ns": median},
        )
    ]
