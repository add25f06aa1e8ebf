"""Faults a user found in %gputime's core, each pinned by the scripted sampler of
tests/timing/conftest.py: options checked before any work, an interrupt that keeps its samples and
still stops the queue, notes that say what is true on the host clock, and a launch-bound verdict
that holds for a tiny op."""

from __future__ import annotations

import gc
import math
import pickle

import pytest

from gpumagic.errors import InvalidOptionError, TimingInterrupted
from gpumagic.timing import TimingOptions, TimingResult
from gpumagic.timing.result import (
    BUSY_FOR_LAUNCH_BOUND,
    HOST_SHARE_FOR_LAUNCH_BOUND,
    HOST_SHARE_QUICK,
)
from gpumagic.timing.stats import StopRule

from .conftest import FakeClock, ScriptedSampler, run

# --- every numeric option is checked before the statement runs
# ---------------------------------------------------


@pytest.mark.parametrize(
    "field, value, message",
    [
        (
            "precision",
            -3,
            "precision must be at least 1 (significant digits in printed times), got -3",
        ),
        (
            "precision",
            0,
            "precision must be at least 1 (significant digits in printed times), got 0",
        ),
        (
            "precision",
            2.5,
            "precision must be a whole number (significant digits in printed times), got 2.5",
        ),
        ("warmup_time", -0.1, "warmup_time must be 0 or more (seconds), got -0.1"),
        ("min_warmup_calls", -1, "min_warmup_calls must be 0 or more, got -1"),
        ("warmup_wall_cap", 0, "warmup_wall_cap must be positive (seconds), got 0"),
        ("target_sample_time", 0, "target_sample_time must be positive (seconds), got 0"),
        ("max_calls_per_sample", 0, "max_calls_per_sample must be at least 1, got 0"),
        ("time_budget", -1, "time_budget must be positive, got -1"),
        ("time_budget", math.inf, "time_budget must be a finite number, got inf"),
        ("time_budget", math.nan, "time_budget must be a finite number, got nan"),
        ("min_samples_on_budget", 0, "min_samples_on_budget must be at least 1, got 0"),
        ("round_time", 0, "round_time must be positive (seconds), got 0"),
        ("kernel_pass_time", 0, "kernel_pass_time must be positive (seconds), got 0"),
        ("kernel_preload_time", -1, "kernel_preload_time must be 0 or more (seconds), got -1"),
        ("max_kernel_pass_calls", 0, "max_kernel_pass_calls must be at least 1, got 0"),
        ("host_pass_time", 0, "host_pass_time must be positive (seconds), got 0"),
        ("steady_time", 0, "steady_time must be positive (seconds), got 0"),
        ("steady_min_time", -1, "steady_min_time must be 0 or more (seconds), got -1"),
        ("steady_tolerance", 1, "steady_tolerance must be more than 0 and less than 1"),
        (
            "first_call_ratio",
            0.5,
            "first_call_ratio must be at least 1 (1 reports any first call slower than the",
        ),
        ("first_call_min", -1, "first_call_min must be 0 or more (seconds), got -1"),
        ("samples", 0, "samples must be at least 1, got 0"),
        ("calls_per_sample", 1.5, "calls_per_sample must be a whole number, got 1.5"),
    ],
)
def test_each_numeric_option_is_checked_with_a_message_that_names_it(field, value, message):
    with pytest.raises(InvalidOptionError) as info:
        TimingOptions(**{field: value}).validate()
    assert str(info.value).startswith(message)
    assert (info.value.option, info.value.value is value or info.value.value == value) == (
        field,
        True,
    )


@pytest.mark.parametrize(
    "field, value, message",
    [
        (
            "rel_ci",
            -1,
            "rel_ci must be more than 0 and less than 1 (a fraction of the median: 0.0025 is "
            "±0.25 %)",
        ),
        ("rel_ci", 0, "rel_ci must be more than 0 and less than 1"),
        ("rel_ci", 5, "rel_ci must be more than 0 and less than 1"),
        (
            "rel_drift",
            0,
            "rel_drift must be more than 0 and less than 1 (a fraction of the median: 0.005 "
            "is ±0.5 %)",
        ),
        ("min_samples", 0, "min_samples must be at least 1, got 0"),
        ("min_time", -1, "min_time must be 0 or more (seconds), got -1"),
        ("max_samples", 0, "max_samples must be at least 1, got 0"),
    ],
)
def test_the_stop_rule_is_checked_too(field, value, message):
    with pytest.raises(
        InvalidOptionError, match="^" + message.replace("(", r"\(").replace(")", r"\)")
    ):
        TimingOptions(stop_rule=StopRule(**{field: value})).validate()


def test_the_defaults_and_edge_values_are_accepted():
    TimingOptions().validate()
    TimingOptions(
        precision=1, warmup_time=0, min_warmup_calls=0, warmup_calls=0, kernel_preload_time=0
    ).validate()
    TimingOptions(stop_rule=StopRule(rel_ci=0.5, min_time=0, min_samples=1)).validate()


def test_a_bad_option_fails_before_the_statement_runs():
    calls = []
    with pytest.raises(InvalidOptionError, match="precision must be at least 1"):
        run(lambda i: calls.append(i) or 1e-3, TimingOptions(precision=-3))
    assert calls == []


# --- an interrupt keeps what was measured and still stops the cells queued after it
# -------------------------------


def interrupt_at(sample_index: int):
    def per_call(i):
        if i == sample_index:
            raise KeyboardInterrupt
        return 1e-3

    return per_call


def test_an_interrupt_while_sampling_keeps_the_samples_and_is_raised_again():
    # caught as any KeyboardInterrupt, so that a plain one fails this test instead of stopping the
    # test session
    with pytest.raises(KeyboardInterrupt) as info:
        run(interrupt_at(25), TimingOptions(time_budget=10, stop_rule=StopRule(min_time=10)))
    err = info.value
    assert isinstance(err, TimingInterrupted), "the interrupt was swallowed or lost its result"
    assert not isinstance(
        err, Exception
    )  # IPython stops the queued cells; `except Exception` cannot eat it
    result = err.result
    assert isinstance(result, TimingResult) and result.interrupted
    assert len(result.samples) == 20  # the two rounds completed before the one being issued
    assert result.line().endswith("; interrupted)")
    assert (
        str(err) == "timing interrupted after 20 samples; the partial TimingResult is this "
        "exception's .result"
    )
    again = pickle.loads(
        pickle.dumps(err)
    )  # it crosses process boundaries whole (a parallel runner, a kernel)
    assert (
        isinstance(again, TimingInterrupted)
        and again.result.samples == result.samples
        and str(again) == str(err)
    )
    assert gc.isenabled()


def test_an_interrupt_in_the_passes_after_sampling_keeps_the_complete_samples():
    class InterruptedPass(ScriptedSampler):
        finishes = 0

        def kernel_pass(self, inner, calls, preload=0):
            raise KeyboardInterrupt

        def finish(self):
            self.finishes += 1
            super().finish()

    clock = FakeClock()
    sampler = InterruptedPass(clock, lambda i: 1e-3, kernel=1e-3)
    with pytest.raises(KeyboardInterrupt) as info:
        measure_scripted(sampler, clock)
    assert isinstance(info.value, TimingInterrupted)
    result = info.value.result
    assert result.interrupted and result.stop_reason.startswith("median stable")
    assert result.kernel_time is None and result.host_per_call is None
    assert sampler.finishes == 2  # after sampling, and again after the interrupted pass


def test_an_interrupt_before_any_sample_is_the_plain_interrupt():
    with pytest.raises(KeyboardInterrupt) as info:
        run(interrupt_at(0))
    assert not isinstance(info.value, TimingInterrupted)


def measure_scripted(sampler, clock, options=None):
    from gpumagic.timing import measure
    from gpumagic.timing.statement import compile_statement

    return measure(
        compile_statement("pass", globals={}),
        {},
        options or TimingOptions(),
        sampler=sampler,
        wall_clock=clock,
    )


# --- on the host clock, a median that had not settled is not blamed on clocks
# ------------------------------------


class HostScripted(ScriptedSampler):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.backend, self.device = "host", "CPU"


def drifting(i):
    return 1e-3 * (1 + 0.002 * i)


def test_an_unsettled_median_on_the_host_clock_says_what_moves_it_there():
    clock = FakeClock()
    result = measure_scripted(HostScripted(clock, drifting), clock, TimingOptions(time_budget=0.3))
    note = next(n for n in result.notes if "had not settled" in n)
    assert "clock" not in note.lower()
    assert "other work on this machine" in note
    assert note.endswith("A longer run: time_budget=2")
    assert "clock" not in str(result).lower().replace("host clock", "")


def test_an_unsettled_median_on_the_gpu_still_names_its_clocks():
    result, _, _ = run(drifting, TimingOptions(time_budget=0.3))
    note = next(n for n in result.notes if "had not settled" in n)
    assert "clocks may still be changing under sustained load" in note


# --- the launch-bound verdict
# ------------------------------------------------------------------------------------


def verdict(median: float, kernel: float, host: float | None, **kw) -> TimingResult:
    return TimingResult(
        samples=[median] * 9,
        calls_per_sample=60,
        device="Fake GPU",
        backend="cuda-events",
        kernel_time=kernel,
        host_per_call=host,
        **kw,
    )


def test_the_tiny_op_seen_on_the_h100_is_launch_bound():
    # x + 1 on 65536 floats: 16 us per call, kernels 1.17 us (GPU busy 7%), the host pass timed 10
    # us to issue a call
    result, _, _ = run(lambda i: 16e-6, kernel=1.17e-6, host=10e-6)
    assert result.launch_bound, str(result)
    assert "launch-bound: kernels 1.17 \u00b5s, host 10 \u00b5s per call" in result.line()
    text = "\n".join(result.warnings())
    assert "The GPU is idle 93% of the time: the host needs 10 \u00b5s to launch" in text
    assert "synchroniz" not in text


@pytest.mark.parametrize(
    "busy, host_share, launch_bound",
    [
        (0.07, 0.62, True),  # the H100 tiny op
        (
            0.07,
            1.20,
            True,
        ),  # the host pass slower than the samples (README: 19.5 us host, 17.9 us per call)
        (0.49, HOST_SHARE_FOR_LAUNCH_BOUND, True),  # the boundary itself counts
        (0.49, HOST_SHARE_FOR_LAUNCH_BOUND - 0.01, False),
        (
            BUSY_FOR_LAUNCH_BOUND,
            0.79,
            False,
        ),  # a busier GPU needs the host to account for most of the call
        (BUSY_FOR_LAUNCH_BOUND, 0.80, True),
        (0.85, 0.95, True),
        (
            0.89,
            0.85,
            False,
        ),  # the host issues faster than the GPU runs the kernels: not what the GPU waits on
        (0.90, 1.00, False),  # GPU-bound
        (0.30, HOST_SHARE_QUICK - 0.01, False),
    ],
)
def test_launch_bound_verdict_at_and_around_its_boundaries(busy, host_share, launch_bound):
    r = verdict(1.0, busy, host_share)  # one second per call: the shares are exact
    assert r.launch_bound is launch_bound, (busy, host_share, str(r))
    assert ("launch-bound" in r.line()) is launch_bound


def test_a_host_that_issues_quickly_is_not_blamed_for_an_idle_gpu():
    # the host issues a call in 1 us of the 10 us per call: the GPU waits on something other than
    # launches
    r = verdict(10e-6, 2e-6, 1e-6)
    assert not r.launch_bound
    text = "\n".join(r.warnings())
    assert "The GPU is idle 80% of the time between this statement's kernels" in text
    assert "the host issues a call in 1 \u00b5s" in text and "not launch overhead" in text


def test_between_the_two_the_idle_gpu_is_reported_with_both_figures_and_no_cause():
    r = verdict(10e-6, 3e-6, 4e-6)  # busy 30%, host 40%: neither launch-bound nor a quick host
    assert not r.launch_bound
    text = "\n".join(r.warnings())
    assert "The GPU is idle 70% of the time between this statement's kernels" in text
    assert "the host needs 4 \u00b5s of the 10 \u00b5s per call to issue it" in text
    assert "not launch overhead" not in text and "synchroniz" not in text


def test_no_host_figure_no_launch_verdict():
    r = verdict(10e-6, 1e-6, None)
    assert not r.launch_bound
    assert any("idle 90%" in w for w in r.warnings())


# --- settings for torch.profiler's first use, removed
# ------------------------------------------------------------------


def test_the_removed_first_use_settings_are_gone_from_the_options_and_config():
    from gpumagic.notebook.config import GpuMagicsConfig as GpuMagics

    assert not hasattr(TimingOptions(), "skip_cold_kernel_pass")
    assert not hasattr(TimingOptions(), "background_profiler_start")
    assert "skip_cold_kernel_pass" not in GpuMagics.class_trait_names()


# --- the SM clock reader
# -------------------------------------------------------------------------------------------


def test_clock_reader_never_raises_and_no_nvml_means_no_reader(monkeypatch):
    from gpumagic.timing import smclock

    def broken():
        raise OSError("NVML_ERROR_GPU_IS_LOST")

    reader = smclock.ClockReader(broken, broken)
    assert reader.mhz() is None and reader.reasons() is None
    assert smclock.ClockReader(lambda: 1410, lambda: 0x4).mhz() == 1410
    monkeypatch.setattr(smclock, "_NVML", None)
    monkeypatch.setattr(smclock, "_NVML_FAILED", True)
    assert smclock.open_reader("1234", 0) is None


def test_clock_reasons_in_words():
    from gpumagic.timing.smclock import reason_words

    assert reason_words(0x4 | 0x20 | 0x40 | 0x1) == ["power cap", "thermal"]
    assert reason_words(0) == [] and reason_words(None) == []


def test_clock_summary_prevailing_clock_and_median():
    from gpumagic.timing.smclock import summarize_clocks

    samples = [1.0] * 10 + [1.4] * 30
    clocks = [1980] * 10 + [1410, 1425, 1395] * 10
    s = summarize_clocks(samples, clocks)
    assert (s.low, s.high, s.prevailing) == (1395, 1980, 1410)
    assert s.prevailing_median == 1.4 and s.prevailing_samples == 30 and s.has_moved
    assert summarize_clocks([1.0, 1.0], [None, None]) is None
    few = summarize_clocks([1.0] * 8 + [1.4] * 2, [1980] * 4 + [1800] * 4 + [1410] * 2)
    assert (
        few.prevailing_median is None
    )  # too few samples at the prevailing clock to take a median of
