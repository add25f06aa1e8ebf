"""The measurement orchestrator, driven by a scripted sampler and a fake wall clock: no GPU, no real
time."""

from __future__ import annotations

import gc
import math
import random
import subprocess
import sys

import pytest

import gpumagic
from gpumagic.errors import Hint, InvalidOptionError, TimingInterrupted
from gpumagic.timing import (
    HostSampler,
    TimingOptions,
    TimingResult,
    measure,
    tensor_devices,
)
from gpumagic.timing.measure import (
    Calibration,
    KernelFigures,
    Notes,
    calls_per_sample,
    host_pass,
    kernel_pass,
    sample,
)
from gpumagic.timing.statement import compile_statement
from gpumagic.timing.stats import StopRule
from gpumagic.trace.intervals import union_length

from .conftest import FakeClock, ScriptedSampler, run


def test_stops_as_soon_as_the_median_is_stable():
    result, sampler, _ = run(lambda i: 1e-3)
    assert result.stop_reason.startswith("median stable")
    # at least 100 ms measured, and no more than one extra round in flight
    assert 0.1 <= sum(result.samples) * result.calls_per_sample <= 0.13
    assert result.median == pytest.approx(1e-3)
    assert sampler.finished


def test_calls_per_sample_are_calibrated_to_about_a_millisecond():
    result, _, _ = run(lambda i: 2e-6)
    assert result.calls_per_sample == 500
    result, _, _ = run(lambda i: 5e-3)
    assert result.calls_per_sample == 1


def test_noise_runs_until_the_time_budget():
    rng = random.Random(0)
    result, _, clock = run(lambda i: 1e-3 * (1 + rng.gauss(0, 0.2)), TimingOptions(time_budget=0.3))
    assert "time budget of 0.3 s ended" in result.stop_reason
    assert (
        0.3 <= clock.now - 0.2 <= 0.5
    )  # first call 0.2 s, then ~budget (+ one round in flight + warm-up)


def test_unsettled_median_at_budget_end_is_said():
    result, _, _ = run(
        lambda i: 1e-3 * (1 + 0.002 * i), TimingOptions(time_budget=0.3)
    )  # steady drift
    assert any("had not settled" in w and "time_budget" in w for w in result.warnings())


class Throttling(ScriptedSampler):
    """A GPU whose SM clock falls from 1980 to 1410 MHz after ``drop`` samples, and whose calls slow
    down with it."""

    def __init__(self, clock, drop: int = 40, **kw) -> None:
        super().__init__(clock, lambda i: 1e-3 if i < drop else 1.4e-3, **kw)
        self.drop = drop

    def sm_clock(self):
        return 1980 if self.i <= self.drop else 1410

    def clock_reasons(self):
        return 0x4  # SW power cap


def test_sm_clock_change_is_reported_with_the_median_at_the_prevailing_clock():
    clock = FakeClock()
    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(time_budget=0.3),
        sampler=Throttling(clock, kernel=1e-3),
        wall_clock=clock,
    )
    assert r.meta["sm_clock_mhz"] == (1980, 1410)
    assert len(r.sample_clocks) == len(r.samples)
    summary = r.clock_summary
    assert (summary.low, summary.high, summary.prevailing) == (1410, 1980, 1410)
    assert summary.prevailing_median == pytest.approx(1.4e-3)
    assert r.prevailing_median == pytest.approx(1.4e-3)
    assert (
        "SM clock moved 29% (1410-1980 MHz, power cap): 1.4 ms at the prevailing 1410 MHz"
        in r.line()
    )
    note = next(w for w in r.warnings() if "SM clock moved between" in w)
    assert "power cap" in note and "`steady=True`" not in note and "steady=True" in note
    assert Hint("steady", "True") in r.hints
    df = r.to_dataframe()
    assert list(df["sm_clock_mhz"][:2]) == r.sample_clocks[:2]
    assert df.attrs["sm_clock_prevailing"] == 1410


def test_a_clock_that_held_adds_nothing_to_the_line():
    clock = FakeClock()

    class Holding(ScriptedSampler):
        def sm_clock(self):
            return 1755

    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(),
        sampler=Holding(clock, lambda i: 1e-3),
        wall_clock=clock,
    )
    assert r.clock_summary.low == r.clock_summary.high == 1755
    assert not r.clock_summary.has_moved and r.prevailing_median is None
    assert "SM clock" not in r.line() and not r.hints


def test_drift_keeps_sampling_until_it_settles():
    # clocks settle: 1.05 ms for the first 30 samples, then 1.00 ms. At 100 samples (the minimum
    # time) the halves still disagree, so sampling goes on until the slow start no longer moves the
    # first half's median.
    result, _, _ = run(lambda i: 1.05e-3 if i < 30 else 1e-3, TimingOptions(time_budget=5.0))
    assert result.stop_reason.startswith("median stable")
    assert len(result.samples) >= 120
    assert result.median == pytest.approx(1e-3)


def test_fixed_calls_and_samples_are_honoured():
    result, sampler, _ = run(lambda i: 1e-3, TimingOptions(calls_per_sample=7, samples=13))
    assert result.calls_per_sample == 7
    assert len(result.samples) == 13 and sampler.enqueued == 13
    assert result.stop_reason == "13 samples requested"


def test_warmup_calls_option_is_exact():
    _, sampler, _ = run(lambda i: 1e-3, TimingOptions(warmup_calls=10))
    assert sum(sampler.batches) == 10
    _, sampler, _ = run(lambda i: 1e-3, TimingOptions(warmup_calls=0))
    assert sampler.batches == []


def test_default_warmup_reaches_its_time_and_call_minimums():
    _, sampler, _ = run(lambda i: 1e-3)
    assert sum(sampler.batches) >= 30  # 30 ms of 1 ms calls
    _, sampler, _ = run(lambda i: 0.1)
    assert sum(sampler.batches) == 3  # at least 3 calls even when they exceed the time


def test_gc_is_disabled_while_sampling_and_restored():
    assert gc.isenabled()
    _, sampler, _ = run(lambda i: 1e-3)
    assert sampler.gc_during_sampling and not any(sampler.gc_during_sampling)
    assert gc.isenabled()


def test_keyboard_interrupt_keeps_what_was_measured():
    def per_call(i):
        if i == 25:
            raise KeyboardInterrupt
        return 1e-3

    clock = FakeClock()
    sampler = ScriptedSampler(clock, per_call)
    options = TimingOptions(time_budget=10, stop_rule=StopRule(min_time=10))
    # raised again (the caller stops too), carrying the partial result
    with pytest.raises(KeyboardInterrupt) as info:
        measure(
            compile_statement("pass", globals={}), {}, options, sampler=sampler, wall_clock=clock
        )
    assert isinstance(info.value, TimingInterrupted)
    result = info.value.result
    # rounds are 10 samples: the two rounds completed before the one that was being issued are kept
    assert result.interrupted and len(result.samples) == 20
    assert "interrupted" in result.line()
    assert sampler.finished and gc.isenabled()


def test_keyboard_interrupt_before_any_sample_propagates():
    with pytest.raises(KeyboardInterrupt):
        run(lambda i: (_ for _ in ()).throw(KeyboardInterrupt))
    assert gc.isenabled()


def test_statement_exception_propagates_and_restores_gc():
    ns = {"n": 0}
    stmt = "n_calls.append(1)\nif len(n_calls) > 50: raise ValueError('boom')"
    ns["n_calls"] = []
    with pytest.raises(ValueError, match="boom"):
        run(lambda i: 1e-3, stmt=stmt, ns=ns)
    assert gc.isenabled()


def test_launch_bound_statement_is_named_in_the_line():
    result, _, _ = run(lambda i: 8e-6, kernel=2.9e-6, host=8e-6)
    assert result.launch_bound
    assert "launch-bound: kernels 2.9 \u00b5s, host 8 \u00b5s per call" in result.line()
    assert any("--graph" in w for w in result.warnings())


def test_gpu_bound_statement_reports_busy_share():
    result, _, _ = run(lambda i: 3.69e-3, kernel=3.66e-3, host=20e-6, first=0.189)
    line = result.line()
    assert not result.launch_bound
    assert "GPU busy 99%" in line and "first call 189 ms" in line
    assert line.startswith("3.69 ms \u00b1 0 ns per call on Fake GPU (median \u00b1 IQR of ")


def test_idle_gpu_without_host_pressure_is_not_called_launch_bound():
    result, _, _ = run(lambda i: 1e-3, kernel=0.5e-3, host=10e-6)
    assert not result.launch_bound
    assert any("idle 50%" in w for w in result.warnings())


def test_first_call_only_reported_when_far_slower():
    result, _, _ = run(lambda i: 1e-3, first=1.5e-3)
    assert "first call" not in result.line()


def test_invalid_options_are_explained():
    with pytest.raises(ValueError, match="--flush-l2 times each call alone"):
        TimingOptions(flush_l2=True, calls_per_sample=10).validate()
    with pytest.raises(ValueError, match="samples must be at least 1"):
        TimingOptions(samples=0).validate()


def test_union_length_counts_overlaps_once():
    assert union_length([(0, 10), (5, 15), (20, 30)]) == 25
    assert union_length([]) == 0
    assert union_length([(0, 10), (2, 3)]) == 10


# --- the real host clock, end to end on the CPU
# --------------------------------------------------------------


def test_gputime_on_cpu_times_real_work_and_says_so():
    torch = pytest.importorskip("torch")
    a = torch.randn(64, 64)
    r = gpumagic.gputime("a @ a", globals={"a": a}, cpu=True, time_budget=0.2)
    assert r.backend == "host" and r.device == "CPU"
    assert " per call on CPU (median \u00b1 IQR of " in r.line()
    # against a plain perf_counter loop taken right after (a relative check: shared CI machines vary
    # tenfold)
    import time

    each = []
    for _ in range(200):
        t0 = time.perf_counter()
        a @ a
        each.append(time.perf_counter() - t0)
    plain = sorted(each)[
        100
    ]  # the median, as gputime reports: a loaded machine's stalls move a mean tenfold
    assert r.median > 1e-7 and 0.1 < r.median / plain < 10, (r.median, plain)
    assert r.kernel_time is None and not r.launch_bound


def test_host_clock_measures_a_known_duration():
    import time

    r = gpumagic.gputime(lambda: time.sleep(0.002), samples=5, warmup_calls=1)
    assert r.calls_per_sample == 1 and len(r.samples) == 5
    assert 0.002 <= r.median < 0.02


def test_cpu_tensors_choose_the_host_clock():
    torch = pytest.importorskip("torch")
    assert tensor_devices([torch.ones(1), [torch.ones(1)], {"m": torch.nn.Linear(1, 1)}]) == {"cpu"}
    assert tensor_devices([1, "x", None]) == set()
    r = gpumagic.gputime("a + 1", globals={"a": torch.ones(4)}, time_budget=0.05)
    assert r.backend == "host"


def test_gputime_uses_the_callers_globals_by_default():
    value = 21  # noqa: F841 - read through the statement below
    global _module_level
    _module_level = 2
    r = gpumagic.gputime("_module_level * 2", samples=3, warmup_calls=0)
    assert len(r.samples) == 3


def test_result_to_dataframe_and_summary():
    result, _, _ = run(lambda i: 1e-3 * (1 + (i % 3) * 1e-4))
    df = result.to_dataframe()
    assert list(df.columns) == ["sample", "calls", "time_per_call_s", "sm_clock_mhz"]
    assert len(df) == len(result.samples)
    assert df.attrs["median"] == pytest.approx(result.median)
    assert math.isclose(df["time_per_call_s"].median(), result.median)


def test_repr_is_the_printed_line_and_html_is_escaped():
    result, _, _ = run(lambda i: 1e-3)
    result.device = "<GPU & co>"
    assert repr(result).splitlines()[0] == result.line()
    html = result._repr_html_()
    assert "&lt;GPU &amp; co&gt;" in html and "<GPU & co>" not in html


def test_host_sampler_is_the_default_without_cuda(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    from gpumagic.timing import choose_sampler

    sampler, _notes = choose_sampler(TimingOptions(), [])
    assert isinstance(sampler, HostSampler) and sampler.reason == "CUDA is not available"


# --- the steps of measure(), one at a time
# ---------------------------------------------------------------------


def test_slow_profiler_start_is_a_note_with_a_script_hint():
    class SlowProfiler(ScriptedSampler):
        profiler_startup = 6.5

    clock = FakeClock()
    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(),
        sampler=SlowProfiler(clock, lambda i: 1e-3, kernel=1e-3),
        wall_clock=clock,
    )
    note = next(n for n in r.notes if "first start" in n)
    assert "took 6.5 s" in note and "`kernel_time=False` skips the kernel-time pass" in note
    assert "because CUPTI could not be driven directly" in note  # no reason given: the general one
    assert "%config" not in note
    assert r.hints == [Hint("kernel_time", "False")]
    assert all(h.script() in "\n".join(r.notes) for h in r.hints)


def test_unsettled_median_advises_a_longer_budget_as_a_keyword():
    result, _, _ = run(lambda i: 1e-3 * (1 + 0.002 * i), TimingOptions(time_budget=0.3))
    note = next(n for n in result.notes if "had not settled" in n)
    assert note.endswith("A longer run: time_budget=2") and "%config" not in note
    assert result.hints == [Hint("time_budget", "2")]


def test_a_settled_run_has_no_hints():
    result, _, _ = run(lambda i: 1e-3, kernel=1e-3)
    assert result.hints == [] and result.notes == []


def test_budget_end_with_too_few_samples_is_not_called_unsettled():
    # the budget ends while the rule still wants more measured time: nothing says the median moves
    result, _, _ = run(
        lambda i: 1e-3, TimingOptions(time_budget=0.05, stop_rule=StopRule(min_time=10))
    )
    assert "time budget" in result.stop_reason and "less than" in result.stop_reason
    assert not any("had not settled" in n for n in result.notes) and result.hints == []


def test_host_clock_drops_graph_and_flush_with_notes():
    class HostScripted(ScriptedSampler):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.backend, self.device, self.reason = "host", "CPU", "CUDA is not available"

    clock = FakeClock()
    sampler = HostScripted(clock, lambda i: 1e-3)
    assert not (sampler.on_device or sampler.supports_graph or sampler.supports_flush_l2)
    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(graph=True, flush_l2=False),
        sampler=sampler,
        wall_clock=clock,
    )
    assert r.notes == [
        "--graph needs CUDA (CUDA is not available): timed on the host clock without a graph."
    ]
    assert r.kernel_time is None and r.host_per_call is None  # no device passes on the host clock
    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(flush_l2=True),
        sampler=HostScripted(clock, lambda i: 1e-5),
        wall_clock=clock,
    )
    assert r.notes == ["--flush-l2 needs CUDA (CUDA is not available): ignored."] and not r.flush_l2
    assert r.calls_per_sample > 1  # flush dropped: back-to-back calls again


def test_a_device_clock_keeps_what_it_supports():
    class NoGraph(ScriptedSampler):
        supports_graph = False
        reason = "this clock has no graphs"

    clock = FakeClock()
    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(graph=True),
        sampler=NoGraph(clock, lambda i: 1e-3),
        wall_clock=clock,
    )
    assert any(n.startswith("--graph needs CUDA (this clock has no graphs)") for n in r.notes)
    r, _, _ = run(lambda i: 1e-3, TimingOptions(flush_l2=True))
    assert r.flush_l2 and r.calls_per_sample == 1 and not any("needs CUDA" in n for n in r.notes)


def test_a_statement_returning_cpu_tensors_switches_to_the_host_fallback():
    torch = pytest.importorskip("torch")

    class FallsBack(ScriptedSampler):
        def host_fallback(self, reason):
            return HostSampler(reason)

    ns = {"torch": torch}
    r = measure(
        compile_statement("torch.ones(2)", globals=ns),
        ns,
        TimingOptions(samples=3, warmup_calls=1),
        sampler=FallsBack(FakeClock(), lambda i: 1e-3),
    )
    assert r.backend == "host" and r.device == "CPU"
    assert "The statement returns CPU tensors: timed on the host clock." in r.notes
    # a clock without a fallback (scripted) is kept, and so is any clock when the namespace holds
    # CPU tensors
    r, _, _ = run(lambda i: 1e-3, stmt="torch.ones(2)", ns={"torch": torch})
    assert r.backend == "cuda-events"
    clock = FakeClock()
    ns = {"torch": torch, "a": torch.ones(2)}
    r = measure(
        compile_statement("a + 1", globals=ns),
        ns,
        TimingOptions(),
        sampler=FallsBack(clock, lambda i: 1e-3),
    )
    assert r.backend == "cuda-events"


def test_calls_per_sample_step():
    assert calls_per_sample(TimingOptions(), 2e-6) == 500
    assert (
        calls_per_sample(TimingOptions(), 1e-6) == 1000
    )  # no extra call from rounding 1e-3 / 1e-6
    assert calls_per_sample(TimingOptions(), 0.0) == TimingOptions.max_calls_per_sample
    assert calls_per_sample(TimingOptions(calls_per_sample=7), 2e-6) == 7
    assert calls_per_sample(TimingOptions(flush_l2=True), 2e-6) == 1


def test_sample_step_stops_on_fixed_samples_and_restores_gc():
    sampler = ScriptedSampler(FakeClock(), lambda i: 1e-3)
    cal = Calibration(per_call=1e-3, host_per_call=1e-5, calls_per_sample=2)
    out = sample(sampler, lambda n: None, TimingOptions(samples=12), cal, sampler.clock)
    assert len(out.samples) == 12 and out.stop_reason == "12 samples requested"
    assert not out.interrupted and out.unsettled is None and gc.isenabled()
    assert sampler.enqueued == 12  # rounds of 5 (10 ms / 2 ms), never more than asked


def test_kernel_pass_step_divides_a_graph_replay_by_its_calls():
    class Replays(ScriptedSampler):
        replays_graph = True

        def kernel_pass(self, inner, calls, preload=0):
            self.asked = (calls, preload)
            return (8e-3, 4.0)  # per replay of k = 4 calls

    sampler = Replays(FakeClock(), lambda i: 1e-3)
    notes = Notes()
    cal = Calibration(per_call=2e-3, host_per_call=1e-5, calls_per_sample=4)
    figures = kernel_pass(sampler, lambda n: None, TimingOptions(), cal, notes)
    assert figures == KernelFigures(kernel_time=2e-3, kernels_per_call=1.0)
    assert sampler.asked[0] == 2  # 10 ms of 8 ms replays
    assert notes.lines == [] and notes.hints == []


def test_kernel_pass_step_turns_a_profiler_error_into_notes():
    class Busy(ScriptedSampler):
        def kernel_pass(self, inner, calls, preload=0):
            raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED\nmore")

    notes = Notes()
    cal = Calibration(per_call=1e-3, host_per_call=1e-5, calls_per_sample=1)
    figures = kernel_pass(
        Busy(FakeClock(), lambda i: 1e-3), lambda n: None, TimingOptions(), cal, notes
    )
    assert figures == KernelFigures()
    assert notes.lines[0].startswith("GPU kernel time unavailable: ")
    assert (
        "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" in notes.lines[0]
        and "more" not in notes.lines[0]
    )


def test_host_pass_step_never_fills_the_launch_queue():
    class Counting(ScriptedSampler):
        def host_pass(self, inner, calls):
            self.calls = calls
            return 1e-6

    sampler = Counting(FakeClock(), lambda i: 1e-3)
    cal = Calibration(per_call=1e-5, host_per_call=1e-7, calls_per_sample=100)
    assert host_pass(sampler, lambda n: None, TimingOptions(), cal, kernels_per_call=4.0) == 1e-6
    assert (
        sampler.calls == 64
    )  # 256 launches / 4 kernels per call, although 2 ms would take 20000 calls
    host_pass(sampler, lambda n: None, TimingOptions(), cal, kernels_per_call=None)
    assert sampler.calls == 256


def test_host_pass_of_a_gpu_bound_statement_queues_little_device_work():
    class Counting(ScriptedSampler):
        def host_pass(self, inner, calls):
            self.calls = calls
            return 1e-5

    sampler = Counting(FakeClock(), lambda i: 2.65e-3)
    # a 2.65 ms matmul issued in 10 us: 2 ms of issuing would be 200 calls, half a second of GPU
    # work to wait for
    cal = Calibration(per_call=2.65e-3, host_per_call=1e-5, calls_per_sample=1)
    host_pass(sampler, lambda n: None, TimingOptions(), cal, kernels_per_call=1.0)
    assert sampler.calls == 4


def test_invalid_options_raise_the_projects_error_with_fields():
    with pytest.raises(InvalidOptionError) as info:
        TimingOptions(calls_per_sample=0).validate()
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.option, err.value, err.reason) == ("calls_per_sample", 0, "must be at least 1")
    assert str(err) == "calls_per_sample must be at least 1, got 0"
    with pytest.raises(InvalidOptionError, match="warmup_calls must be 0 or more, got -1"):
        TimingOptions(warmup_calls=-1).validate()
    with pytest.raises(InvalidOptionError, match="time_budget must be positive, got 0"):
        TimingOptions(time_budget=0).validate()
    with pytest.raises(
        InvalidOptionError, match="--flush-l2 and --graph cannot be combined yet: choose one"
    ):
        TimingOptions(flush_l2=True, graph=True).validate()


def test_result_defaults_are_the_options_defaults():
    r = TimingResult(samples=[1e-3], calls_per_sample=1, device="CPU", backend="host")
    defaults = TimingOptions()
    assert (r.precision, r.first_call_ratio, r.first_call_min) == (
        defaults.precision,
        defaults.first_call_ratio,
        defaults.first_call_min,
    )
    assert r.hints == []


def test_the_timing_package_imports_no_ipython():
    code = (
        "import sys, gpumagic.timing; assert not [m for m in sys.modules if "
        "m.startswith('IPython')]"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- the kernel figure beside the per-call figure
# -----------------------------------------------------------------


def _result(median: float, kernel: float | None, host: float | None = None, **kw) -> TimingResult:
    return TimingResult(
        samples=[median] * 20,
        calls_per_sample=4,
        device="Fake GPU",
        backend="cuda-events",
        kernel_time=kernel,
        kernels_per_call=2.0,
        host_per_call=host,
        **kw,
    )


def test_kernels_and_the_gap_are_shown_when_they_differ_from_the_per_call_time():
    # the 51 µs conv seen on an H200: 55.9 µs per call, kernels 50.8 µs (GPU busy 92 %)
    r = _result(55.9e-6, 50.8e-6, host=12e-6)
    assert (
        "kernels 50.8 \u00b5s of 55.9 \u00b5s per call: 5.1 \u00b5s gaps between kernels"
        in r.line()
    )
    assert "GPU busy" not in r.line() and not r.launch_bound


def test_kernels_close_to_the_per_call_time_read_as_gpu_busy():
    r = _result(1e-3, 0.98e-3, host=10e-6)  # 2 % apart: within the 3 % both figures agree on
    assert "GPU busy 98%" in r.line() and "gaps" not in r.line()


def test_kernels_above_the_per_call_time_say_they_come_from_another_pass():
    r = _result(1e-3, 1.05e-3, host=10e-6)
    assert "kernels 1.05 ms per call in a separate pass, 5% above" in r.line()


def test_the_line_is_built_from_one_list_of_segments():
    r = _result(1e-3, 1e-3, host=10e-6)
    assert r.line().endswith(f"({'; '.join(r._details())})")
    assert r._details()[0].startswith("median \u00b1 IQR of 20 samples \u00d7 4 calls")


# --- first use: every measurement has its kernel pass; a fallback's slow start says why and what to
# install ------


def test_a_gpu_bound_run_always_has_its_kernel_pass():
    result, _, _ = run(
        lambda i: 2.65e-3, kernel=2.6e-3, host=20e-6
    )  # the host far ahead: once skipped while cold
    assert result.kernel_time == pytest.approx(2.6e-3)
    assert "GPU busy" in result.line() and "not measured" not in result.line()


def test_the_fallback_s_slow_start_names_why_and_the_install_that_avoids_it():
    class Fallback(ScriptedSampler):
        profiler_startup = 6.8
        kernel_pass_fallback = 'cupti-python is not installed: `pip install "cupti-python==13.0.*"`'

    clock = FakeClock()
    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(),
        sampler=Fallback(clock, lambda i: 1e-3, kernel=1e-3),
        wall_clock=clock,
    )
    (note,) = [n for n in r.notes if n.startswith("The profiler's first start")]
    assert "took 6.8 s (torch.profiler's start-up, once per process;" in note
    assert 'because cupti-python is not installed: `pip install "cupti-python==13.0.*"`' in note
    assert r.kernel_time == pytest.approx(1e-3)


# --- --steady: wait for the clock to settle before sampling
# --------------------------------------------------------


class Cooling(ScriptedSampler):
    """Per-call time that rises for ``settle_at`` s of running (the clock falling under a power
    cap), then holds."""

    def __init__(self, clock, settle_at: float, noise: float = 0.0, **kw) -> None:
        super().__init__(clock, lambda i: 1e-3, **kw)
        self.settle_at = settle_at
        self.ran = 0.0
        self.rng = random.Random(1)
        self.noise = noise

    def _now_per_call(self) -> float:
        slow = min(self.ran, self.settle_at) / max(self.settle_at, 1e-9)
        return 1.6e-3 + 0.08e-3 * slow + self.rng.gauss(0, self.noise)

    def batch(self, inner, n):
        dt = self._now_per_call() * n
        self.ran += dt
        self.clock.now += dt
        self.batches.append(n)
        return dt, 20e-6 * n

    def sm_clock(self):
        return int(1980 - 500 * min(self.ran, self.settle_at) / max(self.settle_at, 1e-9))


def test_steady_runs_until_the_per_call_time_settles_then_samples():
    clock = FakeClock()
    sampler = Cooling(clock, settle_at=2.5, kernel=1.68e-3, host=20e-6)
    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(steady=True),
        sampler=sampler,
        wall_clock=clock,
    )
    found = r.steadiness
    assert found.settled and 2.5 <= found.seconds <= 3.5, found
    assert found.per_call == pytest.approx(1.68e-3, rel=1e-3)
    assert found.clock == (1980, 1480)
    assert "steady at SM 1480 MHz after" in r.line()
    assert r.summary()["steady_settled"] is True


def test_steady_waits_at_least_its_minimum_and_gives_up_at_its_cap():
    clock = FakeClock()
    held = Cooling(clock, settle_at=0.0)
    from gpumagic.timing.measure import settle_clocks
    from gpumagic.timing.steps import Notes

    notes = Notes()
    found = settle_clocks(
        held, lambda n: None, TimingOptions(steady=True, steady_min_time=1.0), 1.6e-3, notes, clock
    )
    assert found.settled and 1.0 <= found.seconds < 1.1 and not notes.lines
    clock = FakeClock()
    noisy = Cooling(
        clock, settle_at=0.0, noise=0.05e-3
    )  # 3 % noise per batch never settles within 0.5 %
    found = settle_clocks(
        noisy, lambda n: None, TimingOptions(steady=True, steady_time=3.0), 1.6e-3, notes, clock
    )
    assert not found.settled and 3.0 <= found.seconds < 3.1
    assert notes.lines and notes.lines[0].startswith(
        "--steady: the per-call time had not settled after 3.0 s (the last"
    )
    assert found.unmet == "spread"


def test_steady_clock_trend_alone_keeps_it_waiting():
    from gpumagic.timing.steady import STEADY_WINDOW, window_settled

    n = 2 * STEADY_WINDOW
    flat = [1e-3] * n
    assert window_settled(flat, [1500] * n, 0.005) == (True, 0.0, "")
    falling = [1800] * STEADY_WINDOW + [1600] * STEADY_WINDOW
    assert window_settled(flat, falling, 0.005) == (False, 0.0, "clock")
    assert window_settled(flat, [None] * n, 0.005)[0] is True  # no clock: the times decide
    assert (
        window_settled(flat[:-1], [1500] * (n - 1), 0.005)[2] == "batches"
    )  # two full windows first
    # a slow drift: each window tight (0.3 %), yet the second sits 0.36 % above the first
    drifting = [1e-3 * (1 + 0.0006 * i) for i in range(n)]
    settled, spread, unmet = window_settled(drifting, [None] * n, 0.005)
    assert not settled and spread < 0.005 and unmet == "drift"
    noisy = [1e-3, 1.01e-3] * STEADY_WINDOW
    assert window_settled(noisy, [None] * n, 0.005)[2] == "spread"


def test_steady_on_the_host_clock_is_a_note():
    r = gpumagic.gputime("sum(range(50))", globals={}, steady=True, time_budget=0.05)
    assert r.steadiness is None and any("--steady waits for a GPU's clock" in n for n in r.notes)


def test_a_kernel_pass_at_another_clock_claims_no_gaps():
    # seen on the H100: samples at 1065 MHz read 1.76 ms, the short kernel pass ran at 1395 MHz and
    # read 1.65 ms
    r = _result(1.76e-3, 1.65e-3, host=20e-6, sample_clocks=[1065] * 20, kernel_clock=1395)
    assert "kernels 1.65 ms per call at SM 1395 MHz, samples at 1065 MHz" in r.line()
    assert "gaps" not in r.line()
    same = _result(1.76e-3, 1.65e-3, host=20e-6, sample_clocks=[1065] * 20, kernel_clock=1080)
    assert (
        "110 \u00b5s gaps between kernels" in same.line()
    )  # within 2 % of the samples' clock: a real gap
    close = _result(1.66e-3, 1.65e-3, host=20e-6, sample_clocks=[1065] * 20, kernel_clock=1395)
    assert "GPU busy 99%" in close.line()


def test_kernels_are_set_against_the_median_at_the_prevailing_clock_when_it_moved():
    r = TimingResult(
        samples=[1.5e-3] * 10 + [1.8e-3] * 30,
        calls_per_sample=1,
        device="Fake GPU",
        backend="cuda-events",
        kernel_time=1.79e-3,
        kernels_per_call=1.0,
        host_per_call=20e-6,
        sample_clocks=[1800] * 10 + [1300] * 30,
        kernel_clock=1300,
    )
    assert r.median == pytest.approx(1.8e-3) or r.median > 1.6e-3
    assert "GPU busy" in r.line() and "gaps" not in r.line(), r.line()
    assert "1.8 ms at the prevailing 1300 MHz" in r.line()


def test_kernel_pass_step_under_nsys_or_a_users_capture_says_so_once():
    from gpumagic.gpu_activity.cupti_direct import TOOL_HOLDS_CUPTI, CuptiRefused

    for reason in (TOOL_HOLDS_CUPTI, "a torch.profiler capture is running in this process"):

        class Held(ScriptedSampler):
            def kernel_pass(self, inner, calls, preload=0, reason=reason):
                raise CuptiRefused(reason, lasting=False)

        notes = Notes()
        cal = Calibration(per_call=1e-3, host_per_call=1e-5, calls_per_sample=1)
        figures = kernel_pass(
            Held(FakeClock(), lambda i: 1e-3), lambda n: None, TimingOptions(), cal, notes
        )
        assert figures == KernelFigures()
        assert notes.lines == [
            f"GPU kernel time not measured: {reason}."
        ]  # no "no GPU activity" beside it


def test_under_nsys_the_kernel_pass_refuses_at_once_instead_of_starting_torch_profiler(monkeypatch):
    from gpumagic import gpu_activity
    from gpumagic.gpu_activity import cupti_direct

    monkeypatch.setattr(
        cupti_direct, "refusal", lambda: cupti_direct.CuptiRefused(cupti_direct.TOOL_HOLDS_CUPTI)
    )
    monkeypatch.setattr(cupti_direct, "torch_profiler_running", lambda: False)
    monkeypatch.setattr(gpu_activity, "profiler_state", lambda: "cold")
    started = []
    monkeypatch.setattr(gpu_activity, "_torch_profiler", lambda device: started.append(device))
    with (
        pytest.raises(cupti_direct.CuptiRefused, match="its own report"),
        gpu_activity.recording("cuda:0"),
    ):
        pass
    assert started == []
