"""TimingOptions: every knob of a ``%gputime`` measurement, and the one place each timing default is written.

Why one place: the defaults are read by the orchestrator, by :class:`~gpumagic.timing.result.TimingResult` (the
text thresholds) and by the configuration layer (``%config GpuMagics``), and a default repeated in two places
drifts. Readers take them from this class (``TimingOptions.precision`` is the default itself) rather than
restating them. The stop rule's own defaults live on :class:`~gpumagic.stats.StopRule`, which this class holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InvalidOptionError
from ..stats import StopRule

__all__ = ["TimingOptions"]


@dataclass(frozen=True)
class TimingOptions:
    """Every knob of a measurement. ``None`` means "choose adaptively".

    Times are seconds. The fields are grouped by the step that reads them (see :mod:`gpumagic.timing.measure`).
    """

    # Fixed counts, as %timeit's letters; None lets the measurement choose.
    calls_per_sample: int | None = None  # -n
    samples: int | None = None  # -r
    warmup_calls: int | None = None  # -w

    # Warm-up: enough device time for clocks, caches and autotuners to settle, never longer than the wall cap.
    warmup_time: float = 0.03
    min_warmup_calls: int = 3
    warmup_wall_cap: float = 0.3

    # Calibration: a sample long enough that the CUDA event quantum (~0.5 µs) is 0.05 % of it.
    target_sample_time: float = 1e-3
    max_calls_per_sample: int = 10_000

    # Sampling: stop when the rule is met, or the budget ends (with at least a few samples to take a median of).
    time_budget: float = 0.5
    min_samples_on_budget: int = 3
    round_time: float = 0.01  # device time queued per round: the host enqueues a round while the GPU runs one
    stop_rule: StopRule = field(default_factory=StopRule)

    # Modes.
    flush_l2: bool = False
    graph: bool = False
    cpu: bool = False

    # Kernel pass (CUPTI): short, but preloaded so that the GPU is at its sustained clocks when the profiler starts.
    kernel_time: bool = True
    kernel_pass_time: float = 0.01
    kernel_preload_time: float = 0.05
    max_kernel_pass_calls: int = 2000

    # Host pass: few enough calls that the launch queue never fills (a full queue makes issuing wait on the GPU).
    host_pass_time: float = 0.002

    # Reporting, read by TimingResult: the first call is reported when it is this much slower than the median.
    first_call_ratio: float = 2.0
    first_call_min: float = 1e-3
    precision: int = 3

    def validate(self) -> None:
        """Raise :class:`~gpumagic.errors.InvalidOptionError` (a ``ValueError``) for values that cannot be used."""
        for name in ("calls_per_sample", "samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InvalidOptionError(option=name, value=value, reason="must be at least 1")
        if self.warmup_calls is not None and self.warmup_calls < 0:
            raise InvalidOptionError(option="warmup_calls", value=self.warmup_calls, reason="must be 0 or more")
        if self.time_budget <= 0:
            raise InvalidOptionError(option="time_budget", value=self.time_budget, reason="must be positive")
        if self.flush_l2 and self.calls_per_sample not in (None, 1):
            raise InvalidOptionError(
                option="--flush-l2",
                value=self.calls_per_sample,
                reason="times each call alone (the flush must sit between calls, outside the timed window): "
                "drop -n, or drop --flush-l2 for back-to-back calls; calls per sample must be 1",
            )
        if self.flush_l2 and self.graph:
            raise InvalidOptionError(
                option="--flush-l2",
                value=self.graph,
                reason="and --graph cannot be combined yet: choose one; graph must be off with --flush-l2",
            )
