"""Per-name statistics that merge: ``nsys stats``' summaries of a whole job, built rank by rank.

A rank sends, per name of a table (kernels, CUDA API calls, OS runtime calls, NVTX ranges, memory
operations and their sizes), the count, sum, minimum, maximum, mean and sum of squared deviations
(``m2``), and a quantile sketch (``sketch.py``). Counts, totals, minima, maxima and averages merge
exactly; the standard deviation merges by Chan's formula (exact up to float rounding); the median is
read from the merged sketch (within ``sketch.ALPHA``, relatively, and labelled approximate where it
is shown). Names travel once per rank: the sketch rows carry a name's number in the rank's own list,
which the fold maps onto the job's (:class:`NameTable`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import sketch

__all__ = ["TABLES", "NameStats", "NameTable", "name_stats"]

#: Each summarised table: (count column, name columns) as ``nsys stats`` names them.
TABLES: dict[str, tuple[str, list[str]]] = {
    "kernels": ("Instances", ["Name"]),
    "api": ("Num Calls", ["Name"]),
    "osrt": ("Num Calls", ["Name"]),
    "nvtx": ("Instances", ["Style", "Range"]),
    "memops": ("Count", ["Operation"]),
    "memop_size": ("Count", ["Operation"]),
}
#: The separator of an NVTX range's style and text in its one name.
SEP = "\x1f"
_FIELDS = ("count", "total", "min", "max", "mean", "m2")


@dataclass
class NameStats:
    """One table's statistics by name: ``names`` and, per name, the arrays of :data:`_FIELDS`; the
    ``sketch`` rows (name's number, bucket, count)."""

    names: list[str]
    arrays: dict[str, np.ndarray]
    sketch: np.ndarray

    def __len__(self) -> int:
        return len(self.names)


def name_stats(codes: np.ndarray, values: np.ndarray, names: list[Any]) -> NameStats:
    """The statistics of ``values`` grouped by ``codes`` (0..len(names)-1)."""
    codes = np.asarray(codes, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    n = len(names)
    count = np.bincount(codes, minlength=n).astype(np.int64)
    total = np.zeros(n, dtype=np.int64)
    np.add.at(total, codes, np.asarray(values, dtype=np.int64))
    lo = np.full(n, np.inf)
    hi = np.full(n, -np.inf)
    np.minimum.at(lo, codes, v)
    np.maximum.at(hi, codes, v)
    mean = total / np.maximum(count, 1)
    dev = mean[codes]  # each temporary of a row's size made once and worked on in place
    np.subtract(v, dev, out=dev)
    dev *= dev
    m2 = np.bincount(codes, weights=dev, minlength=n)
    del dev
    keep = count > 0
    if keep.all():  # every name had rows (as group codes have it): numbered as they are
        return NameStats(
            [str(x) for x in names],
            dict(zip(_FIELDS, (count, total, lo, hi, mean, m2))),
            sketch.counts(codes, v),
        )
    remap = np.cumsum(keep) - 1
    arrays = {
        "count": count[keep],
        "total": total[keep],
        "min": lo[keep],
        "max": hi[keep],
        "mean": mean[keep],
        "m2": m2[keep],
    }
    sk = sketch.counts(remap[codes], v)
    return NameStats([str(x) for x, k in zip(names, keep) if k], arrays, sk)


@dataclass
class NameTable:
    """A table's statistics over many ranks, merged as they come: the job's names, per name the
    merged figures, and the merged sketch. Ranks are added in batches (:meth:`add`, then
    :meth:`flush`, which :meth:`frame` calls)."""

    index: dict[str, int] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(
        default_factory=lambda: {
            k: np.empty(0, np.int64 if k == "total" else float) for k in _FIELDS
        }
    )
    sketch: np.ndarray = field(default_factory=lambda: np.empty((0, 3), np.int64))
    _pending: list[tuple[np.ndarray, NameStats]] = field(default_factory=list)

    def codes(self, names: list[str]) -> np.ndarray:
        """The job's number of each name, new names numbered as they come."""
        return np.array([self.index.setdefault(x, len(self.index)) for x in names], dtype=np.int64)

    def add(self, stats: NameStats) -> np.ndarray:
        """Queue one rank's statistics; returns the job's number of each of its names."""
        codes = self.codes(stats.names)
        self._pending.append((codes, stats))
        if len(self._pending) >= 64:
            self.flush()
        return codes

    def merge(self, other: NameTable) -> np.ndarray:
        """Queue another table's merged statistics (a part of the job folded elsewhere: a tree of
        folds on a cluster), as one more part; returns this table's number of each of its names."""
        other.flush()
        names = list(other.index)
        codes = self.codes(names)
        if names:
            self._pending.append((codes, NameStats(names, other.arrays, other.sketch)))
            if len(self._pending) >= 64:
                self.flush()
        return codes

    def flush(self) -> None:
        if not self._pending:
            return
        n = len(self.index)
        parts = [(np.arange(len(self.arrays["count"])), self.arrays)]
        parts += [(codes, s.arrays) for codes, s in self._pending]
        code = np.concatenate([c for c, _ in parts])
        a = {k: np.concatenate([np.asarray(p[k], dtype=float) for _, p in parts]) for k in _FIELDS}

        count = np.bincount(code, weights=a["count"], minlength=n)
        total = np.zeros(n, dtype=np.int64)  # integer ns: a job's total stays exact
        np.add.at(total, code, np.concatenate([np.asarray(p["total"], np.int64) for _, p in parts]))
        lo = np.full(n, np.inf)
        hi = np.full(n, -np.inf)
        np.minimum.at(lo, code, a["min"])
        np.maximum.at(hi, code, a["max"])
        mean = total / np.maximum(count, 1)
        # Chan et al.: each part's m2 plus its count times its mean's squared distance to the whole
        spread = a["m2"] + a["count"] * (a["mean"] - mean[code]) ** 2
        m2 = np.bincount(code, weights=spread, minlength=n)
        self.arrays = {"count": count, "total": total, "min": lo, "max": hi, "mean": mean, "m2": m2}
        sketches = [self.sketch]
        for codes, s in self._pending:
            if len(s.sketch):
                sk = s.sketch.astype(np.int64)
                sk[:, 0] = codes[sk[:, 0]]
                sketches.append(sk)
        self.sketch = sketch.merge_counts(sketches)
        self._pending = []

    def frame(self, table: str) -> pd.DataFrame:
        """The merged statistics as ``nsys stats`` lays them out (``Med`` read from the sketch)."""
        self.flush()
        count_col, name_cols = TABLES[table]
        unit = "MB" if table == "memop_size" else "ns"
        scale = 1e6 if table == "memop_size" else 1.0
        cols = [
            *(["Time (%)"] if unit == "ns" else []),
            f"Total{' Time' if unit == 'ns' else ''} ({unit})",
            count_col,
            *(f"{k} ({unit})" for k in ("Avg", "Med", "Min", "Max", "StdDev")),
            *name_cols,
        ]
        a = self.arrays
        if not len(self.index):
            return pd.DataFrame(columns=cols)
        count = a["count"].astype(np.int64)
        med = np.clip(sketch.median(self.sketch, len(self.index)), a["min"], a["max"])
        std = np.where(count > 1, np.sqrt(a["m2"] / np.maximum(count - 1, 1)), 0.0)
        total_col = cols[1 if unit == "ns" else 0]
        exact_int = unit == "ns"
        out = pd.DataFrame(
            {
                total_col: a["total"] if exact_int else a["total"] / scale,
                count_col: count,
                f"Avg ({unit})": a["mean"] / scale,
                f"Med ({unit})": med / scale,
                f"Min ({unit})": (
                    a["min"].round().astype(np.int64) if exact_int else a["min"] / scale
                ),
                f"Max ({unit})": (
                    a["max"].round().astype(np.int64) if exact_int else a["max"] / scale
                ),
                f"StdDev ({unit})": std / scale,
            }
        )
        if unit == "ns":
            grand = int(out[total_col].sum())
            out.insert(0, "Time (%)", out[total_col] / grand * 100 if grand else 0.0)
        names = list(self.index)
        if len(name_cols) == 2:
            split = [x.split(SEP, 1) for x in names]
            out[name_cols[0]] = [s[0] for s in split]
            out[name_cols[1]] = [s[1] for s in split]
        else:
            out[name_cols[0]] = names
        out = out.sort_values([total_col, name_cols[-1]], ascending=[False, True], kind="stable")
        return out.reset_index(drop=True)[cols]
