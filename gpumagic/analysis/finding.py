"""A finding, and the facts about a trace's kernels that several analyzers read (computed once per trace)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..kernels import KernelName, decode
from ..kernels.labels import distinct_labels
from ..trace import Trace
from ..units import format_time

__all__ = ["Finding", "KernelFacts", "api_names", "kernel_facts", "kernel_labels", "t"]


@dataclass
class Finding:
    """One sentence with the numbers behind it. ``severity`` is "info", "warn" or "error"."""

    kind: str
    severity: str
    message: str
    numbers: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


def t(ns: float) -> str:
    """A duration in nanoseconds, as the report writes it."""
    return format_time(ns * 1e-9)


@dataclass(frozen=True)
class KernelFacts:
    """Each kernel's duration, decoded name and label (distinct per distinct name), and their total: what the kernel
    analyzers share."""

    durations: pd.Series
    decoded: pd.Series
    labels: pd.Series
    total_ns: int


def kernel_facts(trace: Trace) -> KernelFacts:
    """The trace's :class:`KernelFacts`, decoded once per distinct name and kept on the trace."""

    def compute() -> KernelFacts:
        k = trace.kernels
        durations = (k["end"] - k["start"]).astype("int64")
        names: dict[str, KernelName] = {n: decode(n) for n in pd.unique(k["name"])}
        labels = kernel_labels(trace)
        return KernelFacts(durations, k["name"].map(names), k["name"].map(labels), int(durations.sum()))

    return trace.memo("analysis.kernel_facts", compute)


def kernel_labels(trace: Trace) -> dict[str, str]:
    """Each distinct kernel name's label (its decoded short form, told apart from siblings that share it), computed
    once per trace: the findings, the tables and the timeline all say the same name for the same kernel."""
    return trace.memo("kernel_labels", lambda: distinct_labels(pd.unique(trace.kernels["name"])))


def api_names(trace: Trace) -> pd.Series:
    """The CUDA API calls' names without a version suffix (``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``),
    computed once per trace for every analyzer that matches API names."""

    def strip() -> pd.Series:
        return trace.api["name"].astype(str).str.replace(r"_v\d+$", "", regex=True)

    return trace.memo("analysis.api_names", strip)
