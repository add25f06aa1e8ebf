"""Two runs of a statement compared from their raw samples: the ratio of their medians, its 95%
confidence interval, a verdict, and what differed between the runs besides the code.

The interval is a percentile bootstrap of the ratio of medians: each run's per-call samples are
resampled with replacement (independently, :data:`RESAMPLES` times, from a fixed seed, so the same
two runs always give the same interval), and the 2.5th and 97.5th percentiles of median(new) /
median(reference) bound it. Why this and not a rank test: the figure ``%gputime`` prints is the
median, so the interval is on the ratio a reader would compute from the two lines, and it needs no
assumption about the shape of timing distributions (one tight mode, rare large outliers).

The verdict is "slower" or "faster" only when the interval excludes 1 *and* the ratio is beyond
:data:`NOISE_FLOOR`; else "no difference the samples can show". The samples of one run know nothing
of the next run's clocks, so a difference in device, SM clock, driver or library versions is said
beside the verdict: it may be the cause.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..units import format_time
from .provenance import MEASURED_ON
from .rows import one_line, unpack_samples

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CLOCK_BAND",
    "NOISE_FLOOR",
    "RESAMPLES",
    "RatioCI",
    "Versus",
    "differences",
    "ratio_ci",
    "versus",
]

#: Bootstrap resamples of each run (the interval's ends move by well under 0.1% between seeds at
#: this count).
RESAMPLES = 2000
#: A ratio within ±1% of 1 is "no difference" even where the interval excludes 1: separate runs
#: differ that much with nothing changed (clocks settling, another process's kernels).
NOISE_FLOOR = 0.01
#: Prevailing SM clocks further apart than this share are a difference worth saying.
CLOCK_BAND = 0.03
METHOD = "bootstrap of the ratio of medians"
_VERSIONS = (("driver", "driver"), ("torch", "torch"), ("cuda", "CUDA"), ("cudnn", "cuDNN"))


@dataclass(frozen=True)
class RatioCI:
    """median(new) / median(reference) (above 1: the new run is slower), its 95% interval and the
    verdict."""

    ratio: float
    low: float
    high: float
    verdict: str
    n_reference: int
    n_new: int

    @property
    def significant(self) -> bool:
        return self.verdict in ("faster", "slower")


def _verdict(ratio: float, low: float, high: float, floor: float) -> str:
    if low > 1 and ratio > 1 + floor:
        return "slower"
    if high < 1 and ratio < 1 - floor:
        return "faster"
    return "no difference the samples can show"


def ratio_ci(
    reference: Sequence[float],
    new: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    floor: float = NOISE_FLOOR,
    confidence: float = 0.95,
) -> RatioCI:
    """The ratio of medians of ``new`` over ``reference`` with its bootstrap interval (see the
    module)."""
    import numpy as np

    ref, cur = np.asarray(reference, dtype=float), np.asarray(new, dtype=float)
    if ref.size == 0 or cur.size == 0:
        raise ValueError("both runs need samples to compare")
    ratio = float(np.median(cur) / np.median(ref))
    rng = np.random.default_rng(seed)
    chunk = max(
        1, min(resamples, 4_000_000 // max(ref.size, cur.size))
    )  # bounded memory for long runs
    ratios = []
    for start in range(0, resamples, chunk):
        k = min(chunk, resamples - start)
        med_ref = np.median(ref[rng.integers(0, ref.size, (k, ref.size))], axis=1)
        med_cur = np.median(cur[rng.integers(0, cur.size, (k, cur.size))], axis=1)
        ratios.append(med_cur / med_ref)
    tail = (1 - confidence) / 2 * 100
    low, high = (float(v) for v in np.percentile(np.concatenate(ratios), [tail, 100 - tail]))
    return RatioCI(
        ratio, low, high, _verdict(ratio, low, high, floor), int(ref.size), int(cur.size)
    )


def differences(reference: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differed between two saved runs besides the code: device, SM clock, driver, library
    versions, timer."""
    out = []
    if (reference.get("device_key"), reference.get("device")) != (
        new.get("device_key"),
        new.get("device"),
    ):
        then = reference.get("device_uuid") or reference.get("host") or "?"
        now = new.get("device_uuid") or new.get("host") or "?"
        out.append(
            f"device differs: {reference.get('device')} ({then}) then, {new.get('device')} "
            f"({now}) now"
        )
    if reference.get("backend") != new.get("backend"):
        out.append(f"timer differs: {reference.get('backend')} then, {new.get('backend')} now")
    a, b = reference.get("sm_clock_prevailing"), new.get("sm_clock_prevailing")
    if a and b and abs(a - b) > CLOCK_BAND * max(a, b):
        out.append(f"SM clock differs: {a} MHz then, {b} MHz now (prevailing while sampling)")
    for key, name in _VERSIONS:
        a, b = reference.get(key), new.get(key)
        if a != b and (a or b):
            out.append(f"{name} differs: {a or 'unknown'} then, {b or 'unknown'} now")
    return out


def _age(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} days ago"


def describe(row: Mapping[str, Any], now: float | None = None) -> str:
    """'#12 'v1', 3 h ago, a1b2c3d+' : a saved result, briefly."""
    parts = [f"#{row.get('id')}"]
    if row.get("label"):
        parts.append(repr(row["label"]))
    if row.get("created"):
        parts.append(_age((now or time.time()) - row["created"]))
    if row.get("git_commit"):
        parts.append(row["git_commit"][:7] + ("+" if row.get("git_dirty") else ""))
    return ", ".join(parts)


@dataclass
class Versus:
    """A run against a reference: ``ref`` and ``new`` are saved rows (dicts), ``stats`` the
    comparison, ``warnings`` the differences between the runs; ``ref_name`` how the reference was
    asked for (``last``, a label, an id)."""

    ref: dict[str, Any]
    new: dict[str, Any]
    stats: RatioCI
    ref_name: str = ""
    warnings: list[str] = field(default_factory=list)
    precision: int = 3

    def line(self) -> str:
        s = self.stats
        ref_median = (
            format_time(self.ref["median"], self.precision) if self.ref.get("median") else "?"
        )
        name = (
            f"{self.ref_name} "
            if self.ref_name and self.ref_name != str(self.ref.get("id"))
            else ""
        )
        return (
            f"vs {name}({describe(self.ref)}; {ref_median}): {s.verdict}, time \u00d7{s.ratio:.3f} "
            f"[{s.low:.3f}, {s.high:.3f}] (95% CI, {METHOD}, {s.n_reference} vs {s.n_new} samples)"
        )

    def __str__(self) -> str:
        return "\n".join([self.line(), *(f"\u26a0 {w}" for w in self.warnings)])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        warn = "".join(f"<div>\u26a0 {html.escape(w)}</div>" for w in self.warnings)
        return f"<div class='gpumagic-versus'><code>{html.escape(self.line())}</code>{warn}</div>"

    def to_dataframe(self) -> pd.DataFrame:
        """Two rows (reference, new): id, label, median, iqr, samples, device and versions; the
        ratio, its interval and the verdict in ``df.attrs``."""
        import pandas as pd

        keys = [
            "id",
            "label",
            "created",
            "median",
            "iqr",
            "n_samples",
            *MEASURED_ON,
        ]
        df = pd.DataFrame(
            [{k: row.get(k) for k in keys} for row in (self.ref, self.new)],
            index=["reference", "new"],
        )
        s = self.stats
        df.attrs.update(ratio=s.ratio, low=s.low, high=s.high, verdict=s.verdict, method=METHOD)
        df.attrs["warnings"] = list(self.warnings)
        return df


def versus(
    ref: Mapping[str, Any], new: Mapping[str, Any], *, ref_name: str = "", precision: int = 3
) -> Versus:
    """Compare two saved rows (their ``samples`` BLOBs, or lists of seconds)."""

    def samples(row: Mapping[str, Any]) -> list[float]:
        got = row.get("samples")
        return (
            unpack_samples(got)
            if isinstance(got, (bytes, bytearray, memoryview))
            else list(got or [])
        )

    stats = ratio_ci(samples(ref), samples(new))
    notes = differences(ref, new)
    if (
        ref.get("statement")
        and new.get("statement")
        and ref["statement"].strip() != new["statement"].strip()
    ):
        notes.append(f"the reference timed another statement: {one_line(ref['statement'], 60)}")
    return Versus(
        dict(ref), dict(new), stats, ref_name=ref_name, warnings=notes, precision=precision
    )
