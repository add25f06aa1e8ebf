"""TimingOptions: every knob of a ``%gputime`` measurement, and the one place each timing default is
written.

Why one place: the defaults are read by the orchestrator, by
:class:`~gpumagic.timing.result.TimingResult` (the text thresholds) and by the configuration layer
(``%config GpuMagics``), and a default repeated in two places drifts. Readers take them from this
class (``TimingOptions.precision`` is the default itself) rather than restating them. The stop
rule's own defaults live on :class:`~gpumagic.timing.stats.StopRule`, which this class holds.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields

from ..errors import InvalidOptionError
from .stats import StopRule

__all__ = ["Bounds", "TimingOptions"]


@dataclass(frozen=True)
class Bounds:
    """The values a numeric option accepts, and the words that say so when a value falls outside
    them.

    ``whole`` asks for an integer; ``low`` is the least value (excluded with ``strict``), ``below``
    an excluded upper end; ``optional`` lets None through ("choose adaptively"); ``what`` says what
    the number means, in the message.
    """

    low: float
    whole: bool = False
    strict: bool = False
    below: float | None = None
    optional: bool = False
    what: str = ""

    def reason(self) -> str:
        if self.below is not None:
            text = f"must be more than {self.low:g} and less than {self.below:g}"
        elif self.strict:
            text = "must be positive" if self.low == 0 else f"must be more than {self.low:g}"
        else:
            text = "must be 0 or more" if self.low == 0 else f"must be at least {self.low:g}"
        return text + (f" ({self.what})" if self.what else "")

    def check(self, option: str, value: object) -> None:
        """Raise :class:`~gpumagic.errors.InvalidOptionError` unless ``value`` is within these
        bounds."""
        if value is None and self.optional:
            return
        kind = numbers.Integral if self.whole else numbers.Real
        if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value):
            what = f" ({self.what})" if self.what else ""
            reason = f"must be {'a whole' if self.whole else 'a finite'} number{what}"
            raise InvalidOptionError(option=option, value=value, reason=reason)
        number = float(value)  # any Real (a NumPy scalar too) compares as the float it stands for
        too_low = number <= self.low if self.strict else number < self.low
        if too_low or (self.below is not None and number >= self.below):
            raise InvalidOptionError(option=option, value=value, reason=self.reason())


_COUNT = Bounds(1, whole=True)
_SECONDS = Bounds(0, strict=True, what="seconds")
_SECONDS_OR_0 = Bounds(0, what="seconds")


def _fraction(example: float) -> str:
    return f"a fraction of the median: {example:g} is \u00b1{round(example * 100, 6):g} %"


#: The bounds of every numeric option, :class:`TimingOptions`' fields and its ``stop_rule``'s by
#: their own names (the names of the ``GpuMagics`` settings too). Checked by
#: :meth:`TimingOptions.validate` and by the settings layer.
BOUNDS: dict[str, Bounds] = {
    "calls_per_sample": Bounds(1, whole=True, optional=True),
    "samples": Bounds(1, whole=True, optional=True),
    "warmup_calls": Bounds(0, whole=True, optional=True),
    "warmup_time": _SECONDS_OR_0,
    "min_warmup_calls": Bounds(0, whole=True),
    "warmup_wall_cap": _SECONDS,
    "target_sample_time": _SECONDS,
    "max_calls_per_sample": _COUNT,
    "time_budget": Bounds(0, strict=True),
    "min_samples_on_budget": _COUNT,
    "round_time": _SECONDS,
    "kernel_pass_time": _SECONDS,
    "kernel_preload_time": _SECONDS_OR_0,
    "max_kernel_pass_calls": _COUNT,
    "host_pass_time": _SECONDS,
    "steady_time": _SECONDS,
    "steady_min_time": _SECONDS_OR_0,
    "energy_tolerance": Bounds(0, strict=True),
    "energy_time": Bounds(0, strict=True),
    "steady_tolerance": Bounds(0, strict=True, below=1, what=_fraction(0.005)),
    "first_call_ratio": Bounds(1, what="1 reports any first call slower than the median"),
    "first_call_min": _SECONDS_OR_0,
    "precision": Bounds(1, whole=True, what="significant digits in printed times"),
    # the stop rule
    "min_samples": _COUNT,
    "min_time": _SECONDS_OR_0,
    "rel_ci": Bounds(0, strict=True, below=1, what=_fraction(StopRule.rel_ci)),
    "rel_drift": Bounds(0, strict=True, below=1, what=_fraction(StopRule.rel_drift)),
    "max_samples": _COUNT,
}


@dataclass(frozen=True)
class TimingOptions:
    """Every knob of a measurement. ``None`` means "choose adaptively".

    Times are seconds. The fields are grouped by the step that reads them (see
    :mod:`gpumagic.timing.measure`).
    """

    # Fixed counts, as %timeit's letters; None lets the measurement choose.
    calls_per_sample: int | None = None  # -n
    samples: int | None = None  # -r
    warmup_calls: int | None = None  # -w

    # Warm-up: enough device time for clocks, caches and autotuners to settle, never longer than the
    # wall cap.
    warmup_time: float = 0.03
    min_warmup_calls: int = 3
    warmup_wall_cap: float = 0.3

    # Calibration: a sample long enough that the CUDA event quantum (~0.5 µs) is 0.05 % of it.
    target_sample_time: float = 1e-3
    max_calls_per_sample: int = 10_000

    # Sampling: stop when the rule is met, or the budget ends (with at least a few samples to take a
    # median of).
    time_budget: float = 0.5
    min_samples_on_budget: int = 3
    round_time: float = (
        0.01  # device time queued per round: the host enqueues a round while the GPU runs one
    )
    stop_rule: StopRule = field(default_factory=StopRule)

    # Modes.
    flush_l2: bool = False
    graph: bool = False
    cpu: bool = False

    # Steady (--steady): before sampling, run until the per-call time (and the SM clock) has
    # settled: at least steady_min_time, at most steady_time seconds; settled is the last batches
    # within steady_tolerance.
    steady: bool = False
    steady_time: float = 10.0
    steady_min_time: float = 1.0
    steady_tolerance: float = 0.005

    # Energy (--energy): sample on, after the stop rule is met, until the board's energy per call
    # is known to energy_tolerance (95% interval over energy.BLOCK_SECONDS blocks) or energy_time
    # seconds of sampling have passed; implies steady, so that the power is the sustained one.
    energy: bool = False
    energy_tolerance: float = 0.05
    energy_time: float = 5.0

    # Work: one more call under FLOP and byte counters (outside the timed window) for FLOP/s, GB/s
    # and % of peak.
    work: bool = True

    # Kernel pass (CUPTI): short, but preloaded so that the GPU is at its sustained clocks when the
    # recording starts.
    kernel_time: bool = True
    kernel_pass_time: float = 0.01
    kernel_preload_time: float = 0.05
    max_kernel_pass_calls: int = 2000

    # Host pass: few enough calls that the launch queue never fills (a full queue makes issuing wait
    # on the GPU).
    host_pass_time: float = 0.002

    # Reporting, read by TimingResult: the first call is reported when it is this much slower than
    # the median.
    first_call_ratio: float = 2.0
    first_call_min: float = 1e-3
    precision: int = 3

    def validate(self) -> None:
        """Raise :class:`~gpumagic.errors.InvalidOptionError` (a ``ValueError``) for values that
        cannot be used.

        Every numeric field, and the stop rule's, is checked against :data:`BOUNDS` before anything
        runs: a bad value found only when the result is printed would cost the whole measurement.
        """
        for f in fields(self):
            if f.name in BOUNDS:
                BOUNDS[f.name].check(f.name, getattr(self, f.name))
        for f in fields(self.stop_rule):
            BOUNDS[f.name].check(f.name, getattr(self.stop_rule, f.name))
        if self.flush_l2 and self.calls_per_sample not in (None, 1):
            raise InvalidOptionError(
                option="--flush-l2",
                value=self.calls_per_sample,
                reason="times each call alone (the flush must sit between calls, outside the "
                "timed window): "
                "drop -n, or drop --flush-l2 for back-to-back calls; calls per sample must be 1",
            )
        if self.flush_l2 and self.graph:
            raise InvalidOptionError(
                option="--flush-l2",
                value=self.graph,
                reason="and --graph cannot be combined yet: choose one; graph must be off "
                "with --flush-l2",
            )
