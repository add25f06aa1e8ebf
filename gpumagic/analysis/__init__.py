"""Findings computed from a Trace: each a sentence with the numbers behind it. No rendering, no
torch.

What no other notebook tool says for you: do the numbers check out (kernels seen vs launches
issued), is the GPU busy or waiting on the host, are the kernels too small to amortise their launch,
is an fp32 GEMM running on CUDA cores when TF32 tensor cores would do, are there copies nobody asked
for, large host<->device transfers or host waits inside the cell, where does the time go; with
several ranks, which rank the others wait for and how much of the communication compute does not
hide (``communication.py``, over ``ranks.py``'s per-rank figures). One small analyzer per finding,
each ``Trace -> list[Finding]``, run in the order below; a new finding is a new function in the
list. Every percentage names its total: "of kernel time" (the kernels' summed durations), "of GPU
busy time" (kernels and memory operations, overlap once; with several GPUs, each GPU's summed) or of
the window.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ..trace import Trace
from .communication import comm_exposed, straggler
from .finding import Finding
from .job_files import job_files
from .kernel_mix import compat_kernels, copies, ffma_gemms, top_kernels
from .pace import TINY_KERNEL_NS, gpu_idle, tiny_kernels
from .selfcheck import missing_kernels, no_gpu_activity, unplaced_events
from .transfers import host_copies, host_syncs

__all__ = ["ANALYZERS", "TINY_KERNEL_NS", "Analyzer", "Finding", "findings"]

Analyzer = Callable[[Trace], list[Finding]]

#: Self-checks first (numbers that do not add up are the most important thing to say), then where
#: the time goes.
ANALYZERS: tuple[Analyzer, ...] = (
    job_files,
    missing_kernels,
    gpu_idle,
    straggler,
    comm_exposed,
    host_syncs,
    host_copies,
    tiny_kernels,
    ffma_gemms,
    compat_kernels,
    copies,
)


def findings(trace: Trace, top: int = 3) -> list[Finding]:
    """Every finding about ``trace``: why there is no GPU activity, if there is none; else each
    analyzer's, and the ``top`` kernels' share last."""
    nothing = no_gpu_activity(trace)  # every event left out is said there, by its kind
    if nothing:
        return nothing
    out: list[Finding] = unplaced_events(trace)  # said first: the figures are of the rest
    every: tuple[Analyzer, ...] = (*ANALYZERS, partial(top_kernels, top=top))
    for analyze in every:
        out.extend(analyze(trace))
    return out
