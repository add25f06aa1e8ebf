"""Every default of gpumagic, as traitlets so that ``%config GpuMagics.<name> = value`` changes it.

The traits live on a plain ``Configurable`` that the IPython magics class inherits from, so the core can build its
options from the same defaults without importing IPython.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from traitlets import Bool, Float, Int, Unicode
from traitlets.config import Configurable

from .stats import StopRule
from .timing import TimingOptions

__all__ = ["GpuMagicsConfig"]


class GpuMagicsConfig(Configurable):
    """Defaults for ``%gputime`` (and, later, ``%%gpuprofile``)."""

    warmup_time = Float(
        0.03, help="Seconds of device time to warm up for before sampling (at least min_warmup_calls calls)."
    ).tag(config=True)
    min_warmup_calls = Int(3, help="Warm-up calls at least, whatever warmup_time says.").tag(config=True)
    time_budget = Float(
        0.5, help="Seconds of sampling after which %gputime stops even if the median is not yet stable."
    ).tag(config=True)
    target_sample_time = Float(
        1e-3,
        help="Seconds one sample should last; calls per sample are chosen for it (CUDA events resolve ~0.5 µs).",
    ).tag(config=True)
    min_samples = Int(10, help="Samples at least before the stop rule may stop.").tag(config=True)
    min_time = Float(0.1, help="Seconds of measured time at least before the stop rule may stop.").tag(config=True)
    rel_ci = Float(
        0.0025, help="Stop once the 95% confidence interval of the median is within ± this fraction of it."
    ).tag(config=True)
    rel_drift = Float(
        0.005, help="... and the medians of the first and second half of the samples agree within this fraction."
    ).tag(config=True)
    kernel_time = Bool(
        True, help="Measure GPU kernel time per call with the profiler (CUPTI) in a short extra pass."
    ).tag(config=True)
    first_call_ratio = Float(2.0, help="Report the first call when it took more than this many times the median.").tag(
        config=True
    )
    precision = Int(3, help="Significant digits in printed times.").tag(config=True)
    profile_warmup = Int(1, help="%%gpuprofile: runs of the cell before the capture (lazy init, autotuning).").tag(
        config=True
    )
    profile_top = Int(15, help="%%gpuprofile: rows in the kernel and other tables.").tag(config=True)
    nsys_path = Unicode(
        "", help="%%gpuprofile --nsys: the nsys binary (default: PATH, then the usual install locations)."
    ).tag(config=True)
    profile_dir = Unicode(
        "gpumagic-profiles", help="%%gpuprofile --nsys: where the .nsys-rep and .sqlite files are kept."
    ).tag(config=True)
    nsys_trace = Unicode("cuda,nvtx,osrt", help="%%gpuprofile --nsys: what nsys traces (-t).").tag(config=True)
    nsys_timeout = Float(300.0, help="%%gpuprofile --nsys: seconds before the nsys run is stopped.").tag(config=True)
    timeline_max_glyphs = Int(
        2500, help="%%gpuprofile: events per timeline lane before they are merged into time buckets."
    ).tag(config=True)

    def timing_options(self, **overrides: Any) -> TimingOptions:
        """TimingOptions from the configured defaults, with per-call ``overrides`` (None values are ignored)."""
        base = TimingOptions(
            warmup_time=self.warmup_time,
            min_warmup_calls=self.min_warmup_calls,
            time_budget=self.time_budget,
            target_sample_time=self.target_sample_time,
            stop_rule=StopRule(
                min_samples=self.min_samples, min_time=self.min_time, rel_ci=self.rel_ci, rel_drift=self.rel_drift
            ),
            kernel_time=self.kernel_time,
            first_call_ratio=self.first_call_ratio,
            precision=self.precision,
        )
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})
