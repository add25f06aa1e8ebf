"""Robust statistics for timing samples, and the rule that decides when to stop sampling.

Why median and IQR rather than mean and standard deviation (what ``%timeit`` prints): a GPU timing
distribution is one tight mode plus rare, large outliers (a context switch, a clock change, another
process's kernel). The mean and the standard deviation follow the outliers; the median and the
interquartile range do not.

Everything here is pure Python on sequences of floats, so the statistics are unit-tested without a
GPU or a clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["StopDecision", "StopRule", "iqr", "median", "median_ci", "quantile"]


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (numpy's default,
    'linear')."""
    if not values:
        raise ValueError("quantile of an empty sequence")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be within [0, 1], got {q}")
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


def iqr(values: Sequence[float]) -> float:
    """Interquartile range, Q3 - Q1."""
    return quantile(values, 0.75) - quantile(values, 0.25)


def median_ci(values: Sequence[float], z: float = 1.96) -> tuple[float, float]:
    """A distribution-free confidence interval of the median from order statistics.

    The ranks n/2 ± z·√n/2 bound the median with about the confidence of z (1.96: 95 %) whatever the
    distribution, which matters because timing samples are not normal. With fewer than 6 samples the
    interval is the full range.
    """
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("median_ci of an empty sequence")
    half = z * math.sqrt(n) / 2.0
    lo = max(0, math.floor(n / 2.0 - half))
    hi = min(n - 1, math.ceil(n / 2.0 + half) - 1)
    if n < 6:
        lo, hi = 0, n - 1
    return xs[lo], xs[hi]


@dataclass(frozen=True)
class StopDecision:
    """Whether to stop sampling, and why, in words (``reason``) and as the condition still unmet
    (``unmet``).

    ``unmet`` is the name of the :class:`StopRule` field whose condition does not hold yet
    (``"min_samples"``, ``"min_time"``, ``"rel_ci"``, ``"rel_drift"``), or ``""`` when stopping: a
    caller tells "too few samples" from "the median is still moving" without parsing the sentence.
    """

    stop: bool
    reason: str
    unmet: str = ""


@dataclass(frozen=True)
class StopRule:
    """When is the median known well enough?

    Stop once all of these hold: at least ``min_samples`` samples and ``min_time`` seconds of
    measured time (clocks and caches settle under sustained load); the 95 % confidence interval of
    the median lies within ±``rel_ci`` of it; and the medians of the first and second half of the
    samples agree within ``rel_drift`` (a drift guard: a tight interval around a moving target is no
    estimate). Otherwise stop when ``max_samples`` is reached; the caller also stops when its time
    budget ends. The reason string names what was or was not met.
    """

    min_samples: int = 10
    min_time: float = 0.1
    rel_ci: float = 0.0025
    rel_drift: float = 0.005
    max_samples: int = 10_000

    def decide(self, samples: Sequence[float], measured_time: float) -> StopDecision:
        n = len(samples)
        if n >= self.max_samples:
            return StopDecision(True, f"reached the maximum of {self.max_samples} samples")
        if n < self.min_samples:
            return StopDecision(False, f"fewer than {self.min_samples} samples", "min_samples")
        if measured_time < self.min_time:
            return StopDecision(
                False, f"less than {self.min_time * 1e3:.0f} ms measured", "min_time"
            )
        med = median(samples)
        if med <= 0:
            return StopDecision(True, "median is zero: nothing left to resolve")
        lo, hi = median_ci(samples)
        width = max(med - lo, hi - med) / med
        if width > self.rel_ci:
            return StopDecision(
                False, f"median's 95% CI ±{width:.2%} > ±{self.rel_ci:.2%}", "rel_ci"
            )
        half = n // 2
        drift = abs(median(samples[:half]) - median(samples[half:])) / med
        if drift > self.rel_drift:
            return StopDecision(
                False,
                f"first and second halves differ by {drift:.2%} > {self.rel_drift:.2%}",
                "rel_drift",
            )
        return StopDecision(True, f"median stable (95% CI ±{width:.2%}, drift {drift:.2%})")
