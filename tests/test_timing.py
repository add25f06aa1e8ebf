"""The measurement orchestrator, driven by a scripted sampler and a fake wall clock: no GPU, no real time."""

from __future__ import annotations

import gc
import math
import random

import pytest

import gpumagic
from gpumagic.statement import compile_statement
from gpumagic.stats import StopRule
from gpumagic.timing import HostSampler, Sampler, TimingOptions, measure, tensor_devices, union_length


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ScriptedSampler(Sampler):
    """Returns per-call times from ``per_call(i)`` for the i-th sample; advances the fake clock as time passes."""

    def __init__(self, clock: FakeClock, per_call, first: float = 0.2, kernel=None, host=None) -> None:
        self.clock = clock
        self.per_call = per_call
        self.first = first
        self.kernel = kernel
        self.host = host
        self.device = "Fake GPU"
        self.backend = "cuda-events"
        self.i = 0
        self.enqueued = 0
        self.finished = False
        self.batches: list[int] = []
        self.gc_during_sampling: list[bool] = []

    def first_call(self, once):
        self.clock.now += self.first
        return self.first, once()

    def batch(self, inner, n):
        inner(n)
        self.batches.append(n)
        dt = self.per_call(0) * n
        self.clock.now += dt
        return dt, (self.host or self.per_call(0)) * n

    def enqueue(self, inner, k, m):
        inner(k * m)
        self.gc_during_sampling.append(gc.isenabled())
        out = []
        for _ in range(m):
            out.append(self.per_call(self.i) * k)
            self.i += 1
        self.enqueued += m
        return out

    def collect(self, handle):
        self.clock.now += sum(handle)
        return handle

    def salvage(self, handle):
        return handle

    def kernel_pass(self, inner, calls, preload=0):
        return None if self.kernel is None else (self.kernel, 1.0)

    def host_pass(self, inner, calls):
        return self.host if self.host is not None else self.per_call(0)

    def finish(self):
        self.finished = True


def run(per_call, options=None, stmt="pass", ns=None, **kw):
    clock = FakeClock()
    ns = {} if ns is None else ns
    sampler = ScriptedSampler(clock, per_call, **kw)
    result = measure(
        compile_statement(stmt, globals=ns), ns, options or TimingOptions(), sampler=sampler, wall_clock=clock
    )
    return result, sampler, clock


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
    assert 0.3 <= clock.now - 0.2 <= 0.5  # first call 0.2 s, then ~budget (+ one round in flight + warm-up)


def test_unsettled_median_at_budget_end_is_said():
    result, _, _ = run(lambda i: 1e-3 * (1 + 0.002 * i), TimingOptions(time_budget=0.3))  # steady drift
    assert any("had not settled" in w and "time_budget" in w for w in result.warnings())


def test_sm_clock_change_is_reported():
    class Throttling(ScriptedSampler):
        clocks = iter([1980, 1755])

        def sm_clock(self):
            return next(self.clocks)

    clock = FakeClock()
    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(),
        sampler=Throttling(clock, lambda i: 1e-3),
        wall_clock=clock,
    )
    assert r.meta["sm_clock_mhz"] == (1980, 1755)
    assert any("1980 to 1755 MHz" in w for w in r.warnings())


def test_drift_keeps_sampling_until_it_settles():
    # clocks settle: 1.05 ms for the first 30 samples, then 1.00 ms. At 100 samples (the minimum time) the
    # halves still disagree, so sampling goes on until the slow start no longer moves the first half's median.
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

    result, sampler, _ = run(per_call, TimingOptions(time_budget=10, stop_rule=StopRule(min_time=10)))
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


# --- the real host clock, end to end on the CPU --------------------------------------------------------------


def test_gputime_on_cpu_times_real_work_and_says_so():
    torch = pytest.importorskip("torch")
    a = torch.randn(64, 64)
    r = gpumagic.gputime("a @ a", globals={"a": a}, cpu=True, time_budget=0.2)
    assert r.backend == "host" and r.device == "CPU"
    assert " per call on CPU (median \u00b1 IQR of " in r.line()
    assert 1e-7 < r.median < 1e-2
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
    assert list(df.columns) == ["sample", "calls", "time_per_call_s"]
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

    sampler, notes = choose_sampler(TimingOptions(), [])
    assert isinstance(sampler, HostSampler) and sampler.reason == "CUDA is not available"
