"""compare(): statements timed interleaved, on scripted clocks (order, stop, interrupt, fairness)
and on CPU tensors."""

from __future__ import annotations

import re

import pytest
import torch

from gpumagic.errors import InvalidOptionError, TimingInterrupted
from gpumagic.render.compare_plot import BAR_COLOR, BASELINE_COLOR
from gpumagic.timing import Sampler, TimingOptions, TimingResult, measure
from gpumagic.timing.compare import ComparisonInterrupted, compare, compare_compiled
from gpumagic.timing.compare_result import INTERLEAVED_NOTE, Comparison, parse_time
from gpumagic.timing.statement import compile_statement
from gpumagic.timing.work import Work

from .conftest import FakeClock

H100 = "NVIDIA H100 80GB HBM3"


class Lane(Sampler):
    """A host-like clock for one statement: ``per_call(now)`` seconds per call at fake time ``now``;
    every enqueue is logged with the statement's name, so the order of the rounds can be read
    back."""

    def __init__(self, name, clock, per_call, log, interrupt_at=None) -> None:
        self.name, self.clock, self.per_call, self.log = name, clock, per_call, log
        self.device, self.backend = "Fake", "host"
        self.interrupt_at = interrupt_at
        self.starts = 0

    def first_call(self, once):
        self.clock.now += 0.01
        return 0.01, once()

    def batch(self, inner, n):
        dt = self.per_call(self.clock.now) * n
        self.clock.now += dt
        return dt, dt

    def start(self, backlog):
        self.starts += 1

    def enqueue(self, inner, k, m):
        self.log.append((self.name, m))
        if self.interrupt_at is not None and len(self.log) >= self.interrupt_at:
            raise KeyboardInterrupt
        return [self.per_call(self.clock.now) * k for _ in range(m)]

    def collect(self, handle):
        self.clock.now += sum(handle)
        return handle

    def salvage(self, handle):
        return handle


def scripted(per_call: dict, options=None, interrupt_at=None, baseline=None):
    clock, log = FakeClock(), []
    samplers = {name: Lane(name, clock, f, log, interrupt_at) for name, f in per_call.items()}
    statements = {name: compile_statement("pass", globals={}) for name in per_call}
    opts = options or TimingOptions(work=False)
    result = compare_compiled(
        statements, {}, opts, baseline=baseline, samplers=samplers, wall_clock=clock
    )
    return result, log, samplers


def test_rounds_take_one_sample_of_each_statement_in_an_order_rotated_each_round():
    result, log, samplers = scripted(
        {"a": lambda t: 1e-3, "b": lambda t: 2e-3, "c": lambda t: 5e-4}
    )
    assert result.orders[:4] == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert all(m == 1 for _, m in log)
    names = [name for name, _ in log]
    for r in range(result.rounds):
        expected = ["abc"[(r + i) % 3] for i in range(3)]
        assert names[3 * r : 3 * r + 3] == expected
    # each sample starts from a fresh boundary: one start per sample
    assert [s.starts for s in samplers.values()] == [result.rounds] * 3
    assert {len(r.samples) for r in result.results.values()} == {result.rounds}
    assert all(r.stop_reason.startswith("median stable") for r in result.results.values())


def test_speedups_are_baseline_median_over_each_median_and_the_table_agrees():
    result, _, _ = scripted(
        {"slow": lambda t: 3e-3, "fast": lambda t: 1e-3, "mid": lambda t: 2.2e-3}
    )
    df = result.to_dataframe()
    med = dict(zip(df["label"], df["median"]))
    sp = dict(zip(df["label"], df["speedup"]))
    assert sp["slow"] == 1.0
    assert sp["fast"] == pytest.approx(med["slow"] / med["fast"]) and sp["fast"] == pytest.approx(
        3.0
    )
    assert sp["mid"] == pytest.approx(3e-3 / 2.2e-3)
    assert df.attrs["baseline"] == "slow" and list(df["baseline"]) == [True, False, False]
    assert_table_speedups_match_printed_medians(result)


def assert_table_speedups_match_printed_medians(result: Comparison) -> None:
    text = str(result)
    assert INTERLEAVED_NOTE in text
    rows = {}
    for line in text.splitlines()[2:]:
        m = re.match(r"\s+(\S+)\s+(\S+ \S+) ± .*?\s(\S+×)(?: \(baseline\))?$", line)
        if m:
            rows[m.group(1)] = (parse_time(m.group(2)), m.group(3))
    assert set(rows) == set(result.labels)
    base = rows[result.baseline][0]
    for label, (median, shown) in rows.items():
        if label == result.baseline:
            assert shown == "1×"
        else:
            assert shown == f"{base / median:.3g}×", (label, text)


def test_baseline_option_and_a_label_that_is_not_there():
    result, _, _ = scripted({"a": lambda t: 2e-3, "b": lambda t: 1e-3}, baseline="b")
    assert result.baseline == "b"
    assert result.speedup("a") == pytest.approx(0.5)
    assert "1× (baseline)" in next(row[7] for row in result.rows() if row[0] == "b")
    ran = []
    with pytest.raises(InvalidOptionError) as err:
        compare(
            {"a": lambda: ran.append(1), "b": lambda: ran.append(2)}, baseline="c", time_budget=0.05
        )
    assert "baseline" in str(err.value) and "'a', 'b'" in str(err.value) and "'c'" in str(err.value)
    assert ran == []  # nothing ran before the bad label was found


def test_a_clock_that_drops_halfway_does_not_favour_the_statement_timed_second():
    # "a" is truly twice as slow as "b"; at t = 0.2 s the device slows everything by 1.4x.
    def slowing(base):
        return lambda t: base * (1.4 if t > 0.2 else 1.0)

    opts = TimingOptions(work=False, time_budget=0.3)
    result, _, _ = scripted({"a": slowing(2e-3), "b": slowing(1e-3)}, opts)
    assert result.speedup("b") == pytest.approx(2.0, rel=0.05)
    # timed one after the other, the second statement meets the slower clock and the ratio is off by
    # ~1.4x
    clock = FakeClock()
    f_a, f_b = slowing(2e-3), slowing(1e-3)
    first, second = (
        measure(
            compile_statement("pass", globals={}),
            {},
            opts,
            sampler=Lane(n, clock, f, []),
            wall_clock=clock,
        )
        for n, f in (("a", f_a), ("b", f_b))
    )
    assert first.median / second.median == pytest.approx(2 / 1.4, rel=0.05)


def test_a_budget_end_names_the_total_budget_and_what_was_unmet():
    import random

    rng = random.Random(1)
    opts = TimingOptions(work=False, time_budget=0.2)
    result, _, _ = scripted(
        {"steady": lambda t: 1e-3, "noisy": lambda t: 1e-3 * (1 + rng.gauss(0, 0.3))}, opts
    )
    noisy = result.results["noisy"]
    assert "time budget of 0.4 s (2 × 0.2 s) ended" in noisy.stop_reason
    assert any("had not settled" in w for w in noisy.warnings())


def test_ctrl_c_keeps_the_samples_taken_and_raises_with_the_partial_comparison():
    with pytest.raises(ComparisonInterrupted) as err:
        scripted(
            {"a": lambda t: 1e-3, "b": lambda t: 1e-3}, interrupt_at=22
        )  # round 10: "a", then "b" is stopped
    exc = err.value
    assert isinstance(exc, TimingInterrupted) and isinstance(exc, KeyboardInterrupt)
    partial = exc.result
    assert isinstance(partial, Comparison) and partial.interrupted
    assert len(partial.results["a"].samples) == 11 and len(partial.results["b"].samples) == 10
    assert all(r.interrupted for r in partial.results.values())
    assert "interrupted" in str(partial) and "21 samples" in str(exc)
    assert partial.to_dataframe()["samples"].tolist() == [11, 10]


def test_ctrl_c_before_any_sample_is_the_plain_interrupt():
    with pytest.raises(KeyboardInterrupt) as err:
        scripted({"a": lambda t: 1e-3, "b": lambda t: 1e-3}, interrupt_at=1)
    assert not isinstance(err.value, ComparisonInterrupted)


def test_on_cpu_tensors_with_real_timing():
    ns = {"A": torch.randn(64, 64), "B": torch.randn(64, 64)}
    before = dict(ns)
    result = compare({"mm": "C = A @ B", "add": "A + B"}, globals=ns, time_budget=0.05)
    assert set(ns) - {"__builtins__"} == set(before)  # the statements' assignments stay local
    assert all(ns[k] is v for k, v in before.items())
    assert result.labels == ["mm", "add"] and result.device == "CPU"
    df = result.to_dataframe()
    assert {
        "label",
        "median",
        "iqr",
        "kernel_time",
        "flop_rate",
        "byte_rate",
        "flop_share",
        "launch_bound",
    } <= set(df.columns)
    assert (
        df.loc[0, "flop_rate"] > 0 and df.loc[1, "byte_rate"] > 0 and df["flop_share"].isna().all()
    )
    assert df.loc[1, "speedup"] == pytest.approx(df.loc[0, "median"] / df.loc[1, "median"])
    assert abs(len(result.results["mm"].samples) - len(result.results["add"].samples)) <= 1
    assert_table_speedups_match_printed_medians(result)
    text = str(result)
    assert (
        "Kernels" not in text and "Launch-bound" not in text
    )  # nothing to say on the host clock: left out
    page = result._repr_html_()
    assert "<table class='gm-compare'>" in page and "text-align:right" in page and "<iframe" in page
    assert "Timed interleaved" in page


def test_a_failing_statement_names_its_label():
    with pytest.raises(ZeroDivisionError) as err:
        compare({"fine": "1 + 1", "broken": "1 / 0"}, globals={}, time_budget=0.05, work=False)
    if hasattr(err.value, "__notes__"):
        assert "'broken'" in err.value.__notes__[0]


def fake(
    median: float, flops: int, precision: str = "bf16", kernel=None, host=None
) -> TimingResult:
    return TimingResult(
        samples=[median] * 20,
        calls_per_sample=1,
        device=H100,
        backend="cuda-events",
        kernel_time=kernel if kernel is not None else median,
        host_per_call=host if host is not None else median / 100,
        work=Work(flops=flops, bytes=3 * 4096 * 4096 * 2, precision_class=precision),
    )


def test_rates_shares_of_peak_and_launch_bound_on_a_known_device():
    flops = 2 * 4096**3
    c = Comparison(
        results={
            "fp32": fake(4.1e-3, flops, "fp32"),
            "bf16": fake(2.0e-4, flops),
            "tiny": fake(2e-5, 1000, kernel=2e-6, host=1.9e-5),
        },
        baseline="fp32",
    )
    rows = {row[0]: row for row in c.rows()}
    assert (
        rows["fp32"][3] == "33.5 TFLOP/s fp32" and rows["fp32"][4] == "50%"
    )  # 67 TFLOP/s FFMA peak
    assert rows["bf16"][3].endswith("bf16") and rows["bf16"][4] == "69%"
    assert rows["tiny"][6] == "yes" and rows["bf16"][6] == "no" and rows["bf16"][5] == "\u2014"
    assert rows["bf16"][7] == "20.5×"
    df = c.to_dataframe()
    assert df.loc[1, "flop_share"] == pytest.approx(flops / 2e-4 / 989.5e12)
    assert df["launch_bound"].tolist() == [False, False, True]


def test_the_bar_chart_has_one_bar_per_statement_and_marks_the_baseline():
    c = Comparison(results={"a": fake(4e-3, 10**9), "b": fake(1e-3, 10**9)}, baseline="b")
    fig = c.figure()
    bars = fig.select_one({"name": "bars"}).data_source.data
    assert bars["label"] == ["a", "b"]
    assert bars["color"] == [BAR_COLOR, BASELINE_COLOR]
    assert bars["value"] == pytest.approx([4.0, 1.0])  # in ms
    assert fig.xaxis.axis_label == "median per call [ms]"
    assert list(fig.y_range.factors) == ["b", "a"]  # first statement on top
    page = c.html("page")
    assert "gm-plot" in page and "<iframe" not in page


def test_a_note_the_statements_share_is_said_once_with_their_numbers():
    a, b, c = fake(1e-3, 10**9), fake(2e-3, 10**9), fake(3e-3, 10**9)
    for r, share in ((a, 2), (b, 8), (c, 16)):
        r.notes.append(
            f"GPU kernel time not measured: the host issues a call in {share}% of the "
            f"per-call time."
        )
    c.notes.append("Only this one has this note.")
    cmp = Comparison(results={"fp32": a, "tf32": b, "bf16": c}, baseline="fp32")
    said = cmp.warnings()
    shared = [w for w in said if "kernel time not measured" in w]
    assert shared == [
        "fp32, tf32, bf16: GPU kernel time not measured: the host issues a call in 2/8/16% "
        "of the per-call time."
    ]
    assert "bf16: Only this one has this note." in said
    b.notes[-1] = "GPU kernel time not measured: the host issues a call in 2% of the per-call time."
    c.notes[-2] = b.notes[-1]
    assert (
        "fp32, tf32, bf16: GPU kernel time not measured: the host issues a call in 2% of"
        in cmp.warnings()[0]
    )


class Failing(Lane):
    """A lane whose statement raises at its ``fail_at``-th sample."""

    def __init__(self, *args, fail_at) -> None:
        super().__init__(*args)
        self.fail_at, self.sampled = fail_at, 0

    def enqueue(self, inner, k, m):
        self.sampled += 1
        if self.sampled >= self.fail_at:
            raise ValueError("raised at its 3,000th call")
        return super().enqueue(inner, k, m)


def test_a_statement_failing_in_its_samples_keeps_the_others_and_names_its_error():
    from gpumagic.timing.compare import ComparisonFailed

    clock, log = FakeClock(), []
    samplers = {name: Lane(name, clock, lambda t: 1e-3, log) for name in ("a", "c")}
    samplers["b"] = Failing("b", clock, lambda t: 2e-3, log, fail_at=6)
    statements = {name: compile_statement("pass", globals={}) for name in ("a", "b", "c")}
    with pytest.raises(ComparisonFailed) as err:  # was the ValueError alone: every result lost
        compare_compiled(
            statements, {}, TimingOptions(work=False), samplers=samplers, wall_clock=clock
        )
    exc = err.value
    assert isinstance(exc.__cause__, ValueError) and exc.error is exc.__cause__ and exc.label == "b"
    assert "'b' raised ValueError: raised at its 3,000th call after 5 of its samples" in str(exc)
    partial = exc.result
    assert partial.failed == {"b": "ValueError: raised at its 3,000th call"}
    assert [len(partial.results[k].samples) for k in "abc"] == [6, 5, 6]  # round 6: c, a, b
    rows = {row[0]: row for row in partial.rows()}
    assert rows["b"][1] == "failed: ValueError: raised at its 3,000th call"
    assert (
        rows["c"][1].startswith("1 ms")
        and rows["c"][-1] == "1\u00d7"
        and "'b' failed" in str(partial)
    )
    df = partial.to_dataframe()
    assert df["error"].isna().tolist() == [True, False, True]
    assert df.loc[1, "error"] == "ValueError: raised at its 3,000th call"
    assert df["median"].isna().tolist() == [False, True, False] and not partial.interrupted


def test_a_statement_failing_before_any_sample_is_its_own_error():
    clock, log = FakeClock(), []
    samplers = {"b": Failing("b", clock, lambda t: 1e-3, log, fail_at=1)}
    samplers["a"] = Lane("a", clock, lambda t: 1e-3, log)
    statements = {name: compile_statement("pass", globals={}) for name in ("b", "a")}
    with pytest.raises(ValueError, match="3,000th"):
        compare_compiled(
            statements, {}, TimingOptions(work=False), samplers=samplers, wall_clock=clock
        )
