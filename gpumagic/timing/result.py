"""TimingResult: the raw samples of one ``%gputime`` run and everything derived from them.

Like ``torch.utils.benchmark.Measurement`` it keeps the raw data and derives the statistics, and
like IPython's ``TimeitResult`` its text form is the one line the magic prints. Warnings that say
when not to trust the number are part of the text, never a separate side channel.

Its thresholds for the text (precision, when a first call is worth reporting) come from the options
of the run that made it; their defaults are :class:`~gpumagic.timing.options.TimingOptions`' own,
never restated here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..edges import PrettyPrinter
from ..errors import Hint
from ..units import format_time
from . import stats
from .advice import Advised
from .energy import EnergySummary, summarize_energy
from .options import TimingOptions
from .smclock import PREVAILING_BAND, ClockSummary, reason_words, summarize_clocks
from .steps import Steadiness
from .work import Work

if TYPE_CHECKING:
    import pandas as pd

    from ..device_peaks import Achieved

__all__ = ["TimingResult"]

# The launch-bound verdict. The host figure (``host_per_call``) comes from a short host pass: a
# burst of at most 256 launches into a drained queue, right after a synchronize, the fastest of
# three. The per-call median describes something else: the steady state of ~0.5 s of sustained
# launching, in which a launch-bound statement's per-call time *is* the host's time per call in the
# sampling loop (the GPU waits for each launch). The two are not the same measurement, and the burst
# reads low: on an H100, ``x + 1`` ran at 16 µs per call while the host pass timed 10 µs to issue
# one (and 19.5 µs against 17.9 µs in another run). So the verdict cannot ask the host figure to
# match the median; it asks how much of the per-call time the host accounts for, by how idle the GPU
# is.

#: GPU busy below this share of the per-call time means the GPU waits between calls.
BUSY_THRESHOLD = 0.9
#: A GPU busy less than this share of the time is launch-bound when the host needs
#: ``HOST_SHARE_FOR_LAUNCH_BOUND`` of the per-call time to issue a call: nothing else in a statement
#: that spends that long issuing it keeps it idle.
BUSY_FOR_LAUNCH_BOUND = 0.5
HOST_SHARE_FOR_LAUNCH_BOUND = 0.5
#: A GPU busier than that (up to ``BUSY_THRESHOLD``) is launch-bound only when the host needs most
#: of the per-call time, and more than the kernels take.
HOST_SHARE_WHEN_BUSY = 0.8
#: A host that issues a call in less than this share of the per-call time is not what an idle GPU
#: waits on.
HOST_SHARE_QUICK = 0.2
#: IQR / median above which the spread is called out (torch.utils.benchmark uses 10 % and 25 %).
NOISY_IQR = 0.10
#: The achieved-rate figures (``gpumagic.device_peaks.Achieved.summary``) a summary carries.
_RATE_KEYS = (
    "flop_rate",
    "byte_rate",
    "flop_peak",
    "bandwidth",
    "flop_share",
    "byte_share",
    "intensity",
    "limiter",
)
#: Kernel time and per-call time further apart than this share of the per-call time are both shown,
#: with the gap.
KERNELS_APART = 0.03


@dataclass
class TimingResult(Advised):
    """Per-call timing of a statement.

    Times are seconds. ``samples`` holds one per-call time per sample (a sample is
    ``calls_per_sample`` calls back-to-back between two device events, or two host clock reads on
    the CPU). ``hints`` are the settings the ``notes`` advise (each note spells its hint as
    ``hint.script()``, e.g. ``time_budget=2``), so that a front end can respell them in its own
    terms.
    """

    samples: list[float]
    calls_per_sample: int
    device: str
    backend: str
    first_call: float | None = None
    kernel_time: float | None = None
    kernels_per_call: float | None = None
    host_per_call: float | None = None
    flush_l2: bool = False
    stop_reason: str = ""
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)
    wall_time: float = 0.0
    precision: int = TimingOptions.precision
    first_call_ratio: float = TimingOptions.first_call_ratio
    first_call_min: float = TimingOptions.first_call_min
    meta: dict[str, Any] = field(default_factory=dict)  # Any: facts of several types, for JSON
    hints: list[Hint] = field(default_factory=list)
    #: the SM clock (MHz, NVML) read beside each sample (as its round ended); None where it was not
    #: read
    sample_clocks: list[int | None] = field(default_factory=list)
    #: NVML clock-event reason bits at the end of sampling (power cap, thermal, ...), where reported
    clock_reasons: int | None = None
    #: (seconds, joules) of the stretches the samples ran in back to back, from NVML's energy
    #: counter (``energy.py``)
    energy_pieces: list[tuple[float, float]] = field(default_factory=list)
    #: whether the device has an energy counter (None: NVML does not see it, e.g. a CPU)
    energy_counter: bool | None = None
    #: what ``steady`` warm-up did (None without it)
    steadiness: Steadiness | None = None
    #: SM clock (MHz) while the kernel pass ran, where reported
    kernel_clock: int | None = None
    #: FLOPs and bytes of one call, counted once outside the timed window (None where not counted)
    work: Work | None = None

    # --- statistics
    # -------------------------------------------------------------------------------------------
    @property
    def median(self) -> float:
        return stats.median(self.samples)

    @property
    def iqr(self) -> float:
        return stats.iqr(self.samples)

    @property
    def mean(self) -> float:
        return sum(self.samples) / len(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    @property
    def on_gpu(self) -> bool:
        return self.backend != "host"

    @property
    def gpu_busy(self) -> float | None:
        """Share of the per-call time during which the GPU ran this statement's kernels (CUPTI), at
        most 1."""
        if self.kernel_time is None or not self.samples or self.median <= 0:
            return None
        return min(1.0, self.kernel_time / self.median)

    @property
    def host_share(self) -> float | None:
        """Host seconds to issue a call over the per-call median (None without a host figure)."""
        if self.host_per_call is None or not self.samples or self.median <= 0:
            return None
        return self.host_per_call / self.median

    @property
    def launch_bound(self) -> bool:
        """The GPU idles between calls because the host cannot issue work as fast as the GPU
        finishes it.

        GPU busy under ``BUSY_FOR_LAUNCH_BOUND`` (50 %) with the host needing at least
        ``HOST_SHARE_FOR_LAUNCH_BOUND`` (50 %) of the per-call time to issue a call; or GPU busy
        under ``BUSY_THRESHOLD`` (90 %) with the host needing ``HOST_SHARE_WHEN_BUSY`` (80 %) of it.
        Either way the host takes longer than the kernels.
        """
        busy, share = self.gpu_busy, self.host_share
        if self.flush_l2 or busy is None or share is None or busy >= BUSY_THRESHOLD:
            # with --flush-l2 each call is queued behind its own flush: the host is never what the
            # GPU waits on
            return False
        needed = (
            HOST_SHARE_FOR_LAUNCH_BOUND if busy < BUSY_FOR_LAUNCH_BOUND else HOST_SHARE_WHEN_BUSY
        )
        return share >= needed and share > busy

    @property
    def first_call_slow(self) -> bool:
        return (
            self.first_call is not None
            and bool(self.samples)
            and self.first_call > self.first_call_ratio * self.median
            and self.first_call - self.median > self.first_call_min
        )

    @property
    def clock_summary(self) -> ClockSummary | None:
        """What the SM clock did over the samples (None where it was not read)."""
        if len(self.sample_clocks) != len(self.samples):
            return None
        return summarize_clocks(self.samples, self.sample_clocks)

    @property
    def energy(self) -> EnergySummary | None:
        """Board energy per call and mean power while the samples ran (None where NVML gave no
        energy counter, or it did not move)."""
        if not self.samples or not self.on_gpu:
            return None
        return summarize_energy(self.energy_pieces, self.median)

    @property
    def prevailing_median(self) -> float | None:
        """The median of the samples taken at the prevailing SM clock, where the clock moved and
        enough were."""
        clocks = self.clock_summary
        return clocks.prevailing_median if clocks is not None and clocks.has_moved else None

    @property
    def achieved(self) -> Achieved | None:
        """FLOP/s and bytes/s at the median, with shares of the device's peaks
        (``gpumagic.device_peaks``); None where the work was not counted."""
        if self.work is None or not self.work.counted or not self.samples or self.median <= 0:
            return None
        from ..device_peaks import achieved  # the peaks table loads only when a rate is asked for

        return achieved(self.work, self.median, self.device if self.on_gpu else None)

    # --- text
    # ----------------------------------------------------------------------------------------------
    def _t(self, seconds: float) -> str:
        return format_time(seconds, self.precision)

    def _details(self) -> list[str]:
        """The parenthesised parts of the line, in order: each is one segment method (None: nothing
        to say)."""
        segments = (
            self._count_segment,
            self._mode_segment,
            self._kernel_segment,
            self._work_segment,
            self._energy_segment,
            self._clock_segment,
            self._steady_segment,
            self._first_call_segment,
        )
        parts = [text for segment in segments if (text := segment())]
        if self.interrupted:
            parts.append("interrupted")
        return parts

    def _count_segment(self) -> str:
        n = len(self.samples)
        count = f"{n} sample{'s' if n != 1 else ''}"
        if self.calls_per_sample > 1:
            count += f" \u00d7 {self.calls_per_sample} calls"
        return f"median \u00b1 IQR of {count}"

    def _mode_segment(self) -> str | None:
        modes = ["CUDA graph replay"] if self.backend == "cuda-graph" else []
        if self.flush_l2:
            modes.append("L2 flushed before each call")
        return "; ".join(modes) or None

    def _kernel_segment(self) -> str | None:
        """Kernel time beside the per-call time: both, with the gap, when they differ by more than
        ``KERNELS_APART``.

        The per-call time is a stream figure (gaps between kernels included), the kernel time GPU
        busy time; when the two agree, "GPU busy" says so in one word. The kernel pass is a
        separate, short pass: where the SM clock it ran at is not the one the samples prevailed at,
        the difference is the clock's, and no gap is claimed; where the clock moved during sampling,
        the kernels are set against the median at the prevailing clock.
        """
        launch = self._launch_figures()
        if launch is not None:
            kernels, host = launch
            return f"launch-bound: kernels {self._t(kernels)}, host {self._t(host)} per call"
        if self.kernel_time is None or not self.samples or self.median <= 0:
            return None
        if self.flush_l2:
            # one event pair per call: the window holds the event overhead too, so give the kernel
            # time itself
            return f"kernels {self._t(self.kernel_time)} per call"
        med, kernels, clocks = self.median, self.kernel_time, self.clock_summary
        apart = abs(kernels / med - 1) > KERNELS_APART
        if clocks is not None and self.kernel_clock:
            if abs(self.kernel_clock - clocks.prevailing) > PREVAILING_BAND * clocks.prevailing:
                if not apart:
                    return f"GPU busy {self.gpu_busy:.0%}"
                return (
                    f"kernels {self._t(kernels)} per call at SM {self.kernel_clock} MHz, "
                    f"samples at {clocks.prevailing} MHz"
                )
            if clocks.has_moved and clocks.prevailing_median is not None:
                med = clocks.prevailing_median
                apart = abs(kernels / med - 1) > KERNELS_APART
        if kernels < med * (1 - KERNELS_APART):
            gap = self._t(med - kernels)
            return (
                f"kernels {self._t(kernels)} of {self._t(med)} per call: {gap} gaps between kernels"
            )
        if apart:
            return (
                f"kernels {self._t(kernels)} per call in a separate pass, "
                f"{kernels / med - 1:.0%} above"
            )
        return f"GPU busy {self.gpu_busy:.0%}"

    def _work_segment(self) -> str | None:
        """The achieved rate nearer its ceiling, e.g. '51.9 TFLOP/s fp32 = 77% of FFMA peak'."""
        found = self.achieved
        return found.segment() if found is not None else None

    def _energy_segment(self) -> str | None:
        """'1.14 J/call ± 1.2% at 668 W' (FLOP/J where the work was counted)."""
        found = self.energy
        if found is None:
            return None
        flops = getattr(self.work, "flops", None) if self.work is not None else None
        return found.segment(flops)

    def _clock_segment(self) -> str | None:
        """Where the SM clock moved: how far, and the median at the clock that prevailed."""
        clocks = self.clock_summary
        if clocks is None or not clocks.has_moved:
            return None
        why = ", ".join(reason_words(self.clock_reasons))
        text = (
            f"SM clock moved {clocks.moved:.0%} ({clocks.low}-{clocks.high} "
            f"MHz{', ' + why if why else ''})"
        )
        if clocks.prevailing_median is not None:
            text += (
                f": {self._t(clocks.prevailing_median)} at the prevailing {clocks.prevailing} MHz"
            )
        return text

    def _steady_segment(self) -> str | None:
        found = self.steadiness
        if found is None:
            return None
        clock = found.clock[1]
        at = f" at SM {clock} MHz" if clock else ""
        if found.settled:
            return f"steady{at} after {found.seconds:.1f} s"
        return f"not steady after {found.seconds:.1f} s"

    def _first_call_segment(self) -> str | None:
        if self.first_call is None or not self.first_call_slow:
            return None
        return f"first call {self._t(self.first_call)}"

    def clock_sentence(self) -> str:
        """One sentence on a moving SM clock, for the notes ("" where it did not move)."""
        clocks = self.clock_summary
        if clocks is None or not clocks.has_moved:
            return ""
        why = " and ".join(reason_words(self.clock_reasons)) or "power or thermal limits"
        text = (
            f"The SM clock moved between {clocks.high} and {clocks.low} MHz while sampling ({why})"
        )
        if clocks.prevailing_median is None:
            return text + ": the samples span both."
        return (
            f"{text}: the median at the prevailing {clocks.prevailing} MHz is "
            f"{self._t(clocks.prevailing_median)} "
            f"({clocks.prevailing_samples} samples), over all samples {self._t(self.median)}."
        )

    def line(self) -> str:
        """The one-line summary, e.g. '3.69 ms ± 21.4 µs per call on NVIDIA GB10 (median ± IQR of 87
        samples; …)'."""
        if not self.samples:
            return f"no samples measured on {self.device}" + (
                " (interrupted)" if self.interrupted else ""
            )
        return (
            f"{self._t(self.median)} \u00b1 {self._t(self.iqr)} per call on {self.device} "
            f"({'; '.join(self._details())})"
        )

    def warnings(self) -> list[str]:
        """Sentences that qualify the line: what to distrust and what to try."""
        out = list(self.notes)
        if not self.samples:
            return out
        if self.work is not None and not self.work.counted and self.work.note:
            out.append(f"FLOP/s and bandwidth not shown: {self.work.note}")
        elif self.work is not None and self.work.note:
            out.append(f"Work: {self.work.note}.")
        found = self.achieved
        out.extend(f"{why}." for why in (found.over_peak() if found is not None else []))
        med = self.median
        if med > 0 and self.iqr / med > NOISY_IQR and len(self.samples) >= 4:
            out.append(
                f"The spread is {self.iqr / med:.0%} of the median: something else may be "
                f"using the "
                f"{'GPU' if self.on_gpu else 'CPU'}, or the statement's work varies from call "
                f"to call."
            )
        launch = self._launch_figures()
        if launch is not None:
            kernels, host = launch
            out.append(
                f"The GPU is idle {1 - (self.gpu_busy or 0):.0%} of the time: the host needs "
                f"{self._t(host)} to launch what the GPU runs in "
                f"{self._t(kernels)}. {self._launch_advice()}"
            )
        elif self.gpu_busy is not None and self.gpu_busy < BUSY_THRESHOLD and not self.flush_l2:
            out.append(self._idle_note())
        return out

    def _launch_figures(self) -> tuple[float, float] | None:
        """(kernel seconds, host seconds) per call, the two figures the words on a launch-bound
        statement quote; None where it is not launch-bound (which it can only be with both)."""
        if not self.launch_bound or self.kernel_time is None or self.host_per_call is None:
            return None
        return self.kernel_time, self.host_per_call

    def _launch_advice(self) -> str:
        """What cuts a launch-bound statement's launches, of what it does not do already: a
        statement that runs torch.compile'd code (it reads a name bound to compiled code, or its
        work was counted at the compiled calls) is not told to compile, nor to capture a graph
        with --graph (a model compiled with mode="reduce-overhead" replays CUDA graphs already); a
        --graph run is not told to use --graph."""
        compiled = bool(self.meta.get("compiled_names")) or (
            self.work is not None and self.work.counted_at == "compiled calls"
        )
        if compiled:
            return (
                "The statement runs torch.compile'd code already: larger batches cut the "
                'launches; where it was compiled without mode="reduce-overhead", that mode '
                "replays them as CUDA graphs."
            )
        if self.backend == "cuda-graph":
            return "Larger batches or torch.compile cut the launches."
        return (
            "--graph replays the calls without launch overhead; larger batches or torch.compile "
            "cut the launches."
        )

    def _idle_note(self) -> str:
        """Why the GPU idles between the kernels of a statement that is not launch-bound, as far as
        the figures say.

        The host figure is the host's whole time per call, any synchronization or CPU work in the
        statement included: a host that needs only a small share of the per-call time is not what
        the GPU waits on.
        """
        idle = (
            f"The GPU is idle {1 - (self.gpu_busy or 0):.0%} of the time between this "
            f"statement's kernels"
        )
        share, host_per_call = self.host_share, self.host_per_call
        if share is None or host_per_call is None:
            return idle + "."
        host, per_call = self._t(host_per_call), self._t(self.median)
        if share < HOST_SHARE_QUICK:
            return (
                f"{idle}, yet the host issues a call in {host} of the {per_call} per call: "
                f"the gaps are not launch "
                "overhead. The kernels wait on something else: another process on the GPU, "
                "or a stream, event or "
                "device the statement waits on."
            )
        return f"{idle}: the host needs {host} of the {per_call} per call to issue it."

    def __str__(self) -> str:
        return "\n".join([self.line(), *self.warnings()])

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, p: PrettyPrinter, cycle: bool) -> None:
        p.text(self._advised(f"<TimingResult : {self}>"))

    def _repr_html_(self) -> str:
        from .result_html import timing_html

        return self._advised(timing_html(self))

    # --- data
    # ----------------------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:  # Any: figures of several types, for JSON
        """The derived figures as a flat dict (seconds), for comparing runs or writing JSON."""
        has = bool(self.samples)
        return {
            "device": self.device,
            "backend": self.backend,
            "median": self.median if has else None,
            "iqr": self.iqr if has else None,
            "mean": self.mean if has else None,
            "min": self.min if has else None,
            "max": self.max if has else None,
            "samples": len(self.samples),
            "calls_per_sample": self.calls_per_sample,
            "first_call": self.first_call,
            "kernel_time": self.kernel_time,
            "kernels_per_call": self.kernels_per_call,
            "host_per_call": self.host_per_call,
            "gpu_busy": self.gpu_busy,
            "launch_bound": self.launch_bound,
            "flush_l2": self.flush_l2,
            "stop_reason": self.stop_reason,
            "interrupted": self.interrupted,
            "wall_time": self.wall_time,
            "kernel_clock": self.kernel_clock,
            **self._energy_figures(),
            **self._clock_figures(),
            **self._work_figures(),
            **{f"meta.{k}": v for k, v in self.meta.items()},
        }

    def _energy_figures(self) -> dict[str, Any]:
        found = self.energy
        return {
            "energy_per_call": found.joules_per_call if found else None,
            "power_w": found.watts if found else None,
            "energy_rel_ci": found.rel_ci if found else None,
        }

    def _clock_figures(self) -> dict[str, Any]:
        clocks, found = self.clock_summary, self.steadiness
        return {
            "sm_clock_low": clocks.low if clocks else None,
            "sm_clock_high": clocks.high if clocks else None,
            "sm_clock_prevailing": clocks.prevailing if clocks else None,
            "prevailing_median": self.prevailing_median,
            "steady_seconds": found.seconds if found else None,
            "steady_settled": found.settled if found else None,
        }

    def _work_figures(self) -> dict[str, Any]:
        work, found = self.work, self.achieved
        return {
            "flops": work.flops if work else None,
            "bytes": work.bytes if work else None,
            "precision_class": work.precision_class if work else None,
            "peak_memory": work.peak_memory if work else None,
            **{k: (found.summary()[k] if found is not None else None) for k in _RATE_KEYS},
        }

    def to_dataframe(self) -> pd.DataFrame:
        """One row per sample (per-call seconds); the summary figures are in ``df.attrs``."""
        import pandas as pd

        df = pd.DataFrame(
            {
                "sample": range(len(self.samples)),
                "calls": [self.calls_per_sample] * len(self.samples),
                "time_per_call_s": list(self.samples),
                "sm_clock_mhz": (
                    list(self.sample_clocks)
                    if len(self.sample_clocks) == len(self.samples)
                    else [None] * len(self.samples)
                ),
            }
        )
        df.attrs.update(self.summary())
        return df
