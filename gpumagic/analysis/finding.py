"""A finding, and the facts about a trace's kernels that several analyzers read (computed once per
trace)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..kernels import KernelName, decode
from ..kernels.labels import distinct_labels
from ..trace import Trace
from ..trace.launching_ops import kernel_launch_apis
from ..units import format_ns

__all__ = [
    "Finding",
    "KernelFacts",
    "api_names",
    "kernel_facts",
    "kernel_labels",
    "map_distinct",
    "pct",
    "t",
]


@dataclass
class Finding:
    """One sentence with the numbers behind it. ``severity`` is "info", "warn" or "error"."""

    kind: str
    severity: str
    message: str
    numbers: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


#: A duration in nanoseconds, as the report writes it (one spelling: ``units.format_ns``).
t = format_ns


def pct(share: float) -> str:
    """A share as the findings write it, never rounded to a 0% or 100% it is not."""
    if 0 < share < 0.005:
        return "<1%"
    if 0.995 <= share < 1:
        return ">99%"
    return f"{share:.0%}"


@dataclass(frozen=True)
class KernelFacts:
    """What the kernel analyzers share, per row and per distinct name: each kernel's duration and
    the index of its name (``codes``), and for each distinct name its text, decoded form and label
    (distinct per name). A question about names is asked once per distinct name and spread to the
    rows by ``codes``: a million kernels of thirty names cost thirty decodes."""

    durations: np.ndarray
    codes: np.ndarray
    names: list[str]
    decoded: list[KernelName]
    labels: list[str]
    total_ns: int

    def where(self, test: Callable[[KernelName], bool]) -> np.ndarray:
        """Each kernel's answer to ``test`` on its decoded name (a boolean array over the rows)."""
        answers: np.ndarray = np.array([bool(test(d)) for d in self.decoded], dtype=bool)
        per_row: np.ndarray = answers[self.codes]
        return per_row

    def ns_by_label(self, rows: np.ndarray, durations: np.ndarray | None = None) -> pd.Series:
        """The summed duration of the kernels in ``rows`` (a boolean array) per label, labels in
        text order; ``durations`` (one per kernel row) in place of the kernels' own, e.g. the time
        they worked."""
        durations = self.durations if durations is None else durations
        ns = np.bincount(self.codes[rows], weights=durations[rows], minlength=len(self.names))
        present = np.bincount(self.codes[rows], minlength=len(self.names)) > 0
        by = pd.Series(
            ns[present].round().astype("int64"),
            index=np.asarray(self.labels, dtype=object)[present],
        )
        return by.sort_index()


def kernel_facts(trace: Trace) -> KernelFacts:
    """The trace's :class:`KernelFacts`, decoded once per distinct name and kept on the trace."""

    def compute() -> KernelFacts:
        k = trace.kernels
        durations = k["end"].to_numpy(dtype="int64") - k["start"].to_numpy(dtype="int64")
        codes, uniques = pd.factorize(
            k["name"], use_na_sentinel=False
        )  # a categorical's codes: no string hashed
        names = [str(n) for n in uniques]
        labels = kernel_labels(trace)
        return KernelFacts(
            durations,
            np.asarray(codes, dtype=np.int64),
            names,
            [decode(n) for n in names],
            [labels.get(n, n) for n in uniques],
            int(durations.sum()),
        )

    return trace.memo("analysis.kernel_facts", compute)


def kernel_labels(trace: Trace) -> dict[str, str]:
    """Each distinct kernel name's label (its decoded short form, told apart from siblings that
    share it), computed once per trace: the findings, the tables and the timeline all say the same
    name for the same kernel."""
    names = pd.unique(trace.kernels["name"])
    return trace.memo("kernel_labels", lambda: distinct_labels(names, kernel_launch_apis(trace)))


def map_distinct(values: pd.Series, fn: Callable[[Any], str]) -> pd.Series:
    """``fn`` of each value, computed once per distinct value: a categorical Series with the same
    index."""
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    mapped = [fn(u) for u in uniques]
    cats, code_of = (
        np.unique(np.asarray(mapped, dtype=object), return_inverse=True) if mapped else ([], [])
    )
    cat = pd.Categorical.from_codes(
        np.asarray(code_of, dtype=np.int64).reshape(-1)[codes], categories=cats
    )
    return pd.Series(cat, index=values.index)


def api_names(trace: Trace) -> pd.Series:
    """The CUDA API calls' names without a version suffix (``cudaLaunchKernel_v7000`` ->
    ``cudaLaunchKernel``), computed once per distinct name and once per trace for every analyzer
    that matches API names."""
    return trace.memo("analysis.api_names", lambda: map_distinct(trace.api["name"], _unversioned))


def _unversioned(name: object) -> str:
    return re.sub(r"_v\d+$", "", str(name))
