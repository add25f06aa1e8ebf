"""sweep(): a statement over a grid of parameters, on CPU tensors and scripted clocks; its table and
its plot."""

from __future__ import annotations

import pytest
import torch

from gpumagic.errors import InvalidOptionError, TimingInterrupted
from gpumagic.render.sweep_plot import geometric
from gpumagic.timing import Sampler, TimingOptions, TimingResult
from gpumagic.timing import sweep as sweep_module
from gpumagic.timing.stats import StopRule
from gpumagic.timing.sweep import SweepInterrupted, grid, point_budget, run_sweep, sweep
from gpumagic.timing.sweep_result import Sweep, SweepPoint
from gpumagic.timing.work import Work

H100 = "NVIDIA H100 80GB HBM3"
FAST = {"time_budget": 0.05, "work": False}


def test_the_points_are_every_combination_or_the_zipped_lists():
    assert grid({"n": [1, 2], "d": ["a", "b"]}) == [
        {"n": 1, "d": "a"},
        {"n": 1, "d": "b"},
        {"n": 2, "d": "a"},
        {"n": 2, "d": "b"},
    ]
    assert grid({"n": [1, 2], "d": ["a", "b"]}, zipped=True) == [
        {"n": 1, "d": "a"},
        {"n": 2, "d": "b"},
    ]
    assert grid({"n": range(3)}) == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_unequal_lists_with_zip_name_their_lengths():
    with pytest.raises(InvalidOptionError) as err:
        sweep("n + m", params={"n": [1, 2, 3], "m": [1, 2]}, globals={}, zip=True, **FAST)
    text = str(err.value)
    assert "n has 3" in text and "m has 2" in text and "zip=False" in text
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize(
    "params, words",
    [
        ({}, "at least"),
        ({"n": []}, "at least one value"),
        ({"class": [1]}, "Python names"),
        ({"n": "abc"}, "list"),
    ],
)
def test_parameters_that_cannot_make_points_are_refused(params, words):
    with pytest.raises(InvalidOptionError) as err:
        grid(params)
    assert words in str(err.value) or "must map" in str(err.value)


def test_a_syntax_error_is_raised_before_any_point_runs():
    ran = []
    with pytest.raises(SyntaxError):
        sweep("A @", "ran.append(n)", params={"n": [1, 2]}, globals={"ran": ran}, **FAST)
    with pytest.raises(SyntaxError):
        sweep("ran", "ran.append(n", params={"n": [1, 2]}, globals={"ran": ran}, **FAST)
    assert ran == []


def test_on_cpu_tensors_each_point_builds_its_own_and_the_namespace_is_untouched():
    ns = {"torch": torch, "keep": 1}
    before = dict(ns)
    out = sweep(
        {"mm": "A @ B", "add": "A + B"},
        "A = torch.randn(n, n); B = torch.randn(n, n)",
        params={"n": [16, 32, 64]},
        globals=ns,
        time_budget=0.05,
    )
    assert ns == before  # no n, no A, not even __builtins__
    df = out.to_dataframe()
    assert len(df) == 6 and df["n"].tolist() == [16, 16, 32, 32, 64, 64]
    assert df["label"].tolist() == ["mm", "add"] * 3 and set(df["status"]) == {"ok"}
    for column in (
        "median",
        "iqr",
        "kernel_time",
        "flop_rate",
        "byte_rate",
        "flop_share",
        "byte_share",
        "error",
    ):
        assert column in df.columns
    mm = df[df["label"] == "mm"]
    assert (mm["flop_rate"] == 2 * mm["n"] ** 3 / mm["median"]).all()
    assert df["median"].notna().all() and (df[df["label"] == "add"]["flop_rate"].isna()).all()
    text = str(out)
    assert text.splitlines()[0].startswith(
        "Sweep of 2 statements over 6 measurements on CPU (n: 16 … 64)"
    )
    assert "Statement" in text and "GFLOP/s fp32" in text


def test_a_point_that_fails_is_kept_with_its_error_and_the_rest_go_on():
    out = sweep("1 / (n - 2)", params={"n": [1, 2, 3]}, globals={}, **FAST)
    assert [p.status for p in out.points] == ["ok", "failed", "ok"]
    assert (
        out.points[1].error == "ZeroDivisionError: division by zero"
        and out.points[1].result is None
    )
    df = out.to_dataframe()
    assert df.loc[1, "status"] == "failed" and df.loc[1, "error"].startswith("ZeroDivisionError")
    assert "failed: ZeroDivisionError: division by zero" in str(out)
    assert "1 failed" in out.summary_line()
    page = out.html(figure=None)
    assert "<details open>" in page and "color:#b22222" in page


def test_out_of_memory_at_one_point_is_freed_marked_and_the_sweep_goes_on(monkeypatch):
    class OutOfMemoryError(RuntimeError):  # as torch.cuda.OutOfMemoryError is named
        pass

    freed = []
    monkeypatch.setattr(sweep_module, "free_memory", lambda: freed.append(True))

    def alloc(n):
        if n == 64:
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")
        return n

    out = sweep(
        "x = big", "big = alloc(n)", params={"n": [16, 64, 32]}, globals={"alloc": alloc}, **FAST
    )
    assert [p.status for p in out.points] == ["ok", "out of memory", "ok"]
    assert out.points[1].error.startswith("OutOfMemoryError: CUDA out of memory")
    assert freed == [True]
    assert sweep_module.is_out_of_memory(RuntimeError("DefaultCPUAllocator: out of memory"))
    assert not sweep_module.is_out_of_memory(RuntimeError("shapes cannot be multiplied"))


def test_ctrl_c_keeps_the_points_done_and_raises_with_the_partial_sweep():
    def maybe_stop(n):
        if n == 3:
            raise KeyboardInterrupt
        return n

    with pytest.raises(SweepInterrupted) as err:
        sweep(
            "y = v",
            "v = maybe_stop(n)",
            params={"n": [1, 2, 3, 4]},
            globals={"maybe_stop": maybe_stop},
            **FAST,
        )
    exc = err.value
    assert isinstance(exc, KeyboardInterrupt) and isinstance(exc, TimingInterrupted)
    partial = exc.result
    assert partial.interrupted and [p.status for p in partial.points] == ["ok", "ok", "interrupted"]
    assert "2 of 4" in str(exc) and "interrupted after 2 of 4" in str(partial)


class Scripted(Sampler):
    """Host-like clock on a fake time line; ``stop_after`` samples raises KeyboardInterrupt inside a
    round."""

    def __init__(self, clock, per_call, stop_after=None) -> None:
        self.clock, self.per_call, self.stop_after = clock, per_call, stop_after
        self.device, self.backend, self.taken = "Fake", "host", 0

    def first_call(self, once):
        return 0.001, once()

    def batch(self, inner, n):
        self.clock[0] += self.per_call() * n
        return self.per_call() * n, self.per_call() * n

    def enqueue(self, inner, k, m):
        return {"k": k, "m": m, "done": []}

    def collect(self, handle):
        for _ in range(handle["m"] - len(handle["done"])):
            if self.stop_after is not None and self.taken >= self.stop_after:
                raise KeyboardInterrupt
            d = self.per_call() * handle["k"]
            self.clock[0] += d
            handle["done"].append(d)
            self.taken += 1
        return handle["done"]

    def salvage(self, handle):
        return handle["done"]


def test_ctrl_c_while_sampling_keeps_that_points_samples():
    now = [0.0]
    samplers = {1: Scripted(now, lambda: 1e-3), 2: Scripted(now, lambda: 1e-3, stop_after=15)}
    with pytest.raises(SweepInterrupted) as err:
        run_sweep(
            {"s": "pass"},
            None,
            grid({"n": [1, 2]}),
            {},
            TimingOptions(work=False),
            sampler_for=lambda point, label: samplers[point["n"]],
            wall_clock=lambda: now[0],
        )
    last = err.value.result.points[-1]
    assert (
        last.status == "interrupted" and len(last.result.samples) == 15 and last.result.interrupted
    )


def test_fast_points_get_a_shorter_budget():
    opts = TimingOptions(time_budget=0.5)
    assert point_budget(opts, calls_per_sample=500, per_call=2e-6) == pytest.approx(
        0.2
    )  # 1 ms samples
    assert point_budget(opts, calls_per_sample=1, per_call=3e-3) == pytest.approx(0.3)
    assert point_budget(opts, calls_per_sample=1, per_call=20e-3) == pytest.approx(0.5)
    assert point_budget(TimingOptions(time_budget=2), 500, 2e-6) == pytest.approx(
        0.8
    )  # the advice lengthens it
    # and the sampling of a noisy fast point ends there
    import random

    rng, now = random.Random(3), [0.0]
    sampler = Scripted(now, lambda: 1e-3 * (1 + rng.gauss(0, 0.3)))
    out = run_sweep(
        {"s": "pass"},
        None,
        [{"n": 1}],
        {},
        TimingOptions(work=False),
        sampler_for=lambda point, label: sampler,
        wall_clock=lambda: now[0],
    )
    assert "time budget of 0.2 s ended" in out.points[0].result.stop_reason
    assert out.to_dataframe()["stop_reason"][0].startswith("time budget of 0.2 s ended")
    assert (
        "1 of 1 points ended at their time budget with their median known only to more than ±1%"
        in str(out)
    )
    assert "time_budget=2" in str(out)
    assert [h.script() for h in out.hints] == ["time_budget=2"]


def test_geometric_sizes():
    assert (
        geometric([256, 512, 1024, 2048])
        and geometric([1, 10, 100])
        and geometric([4096, 1024, 2048])
    )
    assert (
        not geometric([100, 200, 300]) and not geometric([1, 2]) and not geometric(["a", "b", "c"])
    )
    assert not geometric([1, 2, 8, 16])  # ratios 2, 4, 2: not constant
    assert not geometric([0, 1, 2])


def fake(n: int, seconds: float, precision: str) -> TimingResult:
    return TimingResult(
        samples=[seconds] * 20,
        calls_per_sample=1,
        device=H100,
        backend="cuda-events",
        work=Work(flops=2 * n**3, bytes=3 * n * n * 2, precision_class=precision),
    )


def fake_sweep(sizes, failed_at=None) -> Sweep:
    points = []
    for n in sizes:
        for label, precision, rate in (("bf16", "bf16", 600e12), ("fp32", "fp32", 50e12)):
            if n == failed_at and label == "bf16":
                points.append(
                    SweepPoint({"n": n}, label, None, "out of memory", "OutOfMemoryError: CUDA out")
                )
                continue
            seconds = 2 * n**3 / rate * (1 + 4096 / n)  # small sizes far from the peak
            points.append(SweepPoint({"n": n}, label, fake(n, seconds, precision)))
    return Sweep(points=points, params=["n"], labels=["bf16", "fp32"], planned=len(points))


def test_the_plot_has_a_line_per_statement_the_peaks_and_log_axes_for_geometric_sizes():
    from bokeh.models import LogScale

    out = fake_sweep([256, 512, 1024, 2048, 4096, 8192], failed_at=8192)
    assert out.metric() == "flop"
    fig = out.figure()
    lines = fig.select({"name": "series"})
    assert len(lines) == 2
    assert sorted(r.glyph.line_color for r in lines) == sorted({r.glyph.line_color for r in lines})
    peaks = fig.select({"name": "peak"})
    assert len(peaks) == 2
    assert sorted(r.data_source.data["y"][0] for r in peaks) == pytest.approx(
        [67.0, 989.5]
    )  # TFLOP/s, datasheet
    assert isinstance(fig.x_scale, LogScale) and isinstance(fig.y_scale, LogScale)
    assert list(fig.xaxis[0].ticker.ticks) == [
        256,
        512,
        1024,
        2048,
        4096,
        8192,
    ]  # the sizes run, not 1000..9000
    assert fig.xaxis[0].major_label_overrides[8192] == "8192"
    assert fig.yaxis.axis_label == "TFLOP/s"
    legend = [item.label.value for item in fig.legend.items]
    assert "bf16 tensor-core peak 990 TFLOP/s" in legend and "FFMA peak 67 TFLOP/s" in legend
    crosses = fig.select_one({"name": "failed"}).data_source.data
    assert crosses["x"] == [8192] and "out of memory" in crosses["params"][0]
    bf16 = next(r for r in lines if r.data_source.data["series"][0] == "bf16").data_source.data
    assert bf16["x"] == [256, 512, 1024, 2048, 4096]
    # 600 TFLOP/s / 17 at n=256; 3·256²·2 bytes in 2·256³ / 35.3e12 s: the exact figures, both rates
    assert (
        bf16["rate"][0]
        == "35.3 TFLOP/s bf16 = 4% of bf16 tensor-core peak; 414 GB/s = 12% of HBM bandwidth"
    )
    assert bf16["median"][0].endswith("± 0 ns")


def test_linear_sizes_keep_linear_axes_and_time_is_plotted_where_no_work_was_counted():
    from bokeh.models import LinearScale

    def timed(n):
        return TimingResult(
            samples=[n * 1e-6] * 5, calls_per_sample=1, device="CPU", backend="host"
        )

    points = [SweepPoint({"n": n}, "s", timed(n)) for n in (100, 200, 300)]
    out = Sweep(points=points, params=["n"], labels=["s"])
    assert out.metric() == "time"
    fig = out.figure()
    assert isinstance(fig.x_scale, LinearScale) and fig.yaxis.axis_label == "time per call [µs]"
    assert not fig.select({"name": "peak"})
    assert fig.select_one({"name": "series"}).data_source.data["y"] == pytest.approx(
        [100, 200, 300]
    )


def test_the_html_carries_the_plot_and_the_table():
    page = fake_sweep([256, 1024, 4096])._repr_html_()
    assert "<iframe" in page and "<table class='gm-sweep'>" in page and "TFLOP/s" in page
    bundle = fake_sweep([256, 1024])._repr_mimebundle_()
    assert "gm-plot" in bundle["text/html"] and bundle["text/plain"].startswith(
        "Sweep of 2 statements"
    )


def test_where_the_time_went_to_the_profilers_first_start_is_said_once_with_the_point():
    from gpumagic.timing.passes import PROFILER_START, SKIP_KERNEL_PASS

    out = fake_sweep([256, 512])
    first = out.points[0].result
    first.notes.append(
        f"{PROFILER_START} 6.2 s (CUPTI start-up, once per process); `kernel_time=False` skips it."
    )
    first.hints.append(SKIP_KERNEL_PASS)
    said = out.warnings()
    assert said[0].startswith(f"{out.points[0].label} at n=256: {PROFILER_START} 6.2 s")
    assert sum(PROFILER_START in w for w in said) == 1
    assert SKIP_KERNEL_PASS in out.hints
    assert f"{PROFILER_START} 6.2 s" in str(out)


def test_a_point_that_ended_at_its_budget_with_its_median_within_a_percent_is_not_warned_about():
    import random

    rng, now = random.Random(5), [0.0]
    sampler = Scripted(
        now, lambda: 1e-3 * (1 + rng.gauss(0, 0.02))
    )  # 2% noise: the median is known to ~0.3%
    opts = TimingOptions(
        work=False, stop_rule=StopRule(rel_ci=1e-6)
    )  # the stop rule never satisfied
    clock = {"sampler_for": lambda point, label: sampler, "wall_clock": lambda: now[0]}
    out = run_sweep({"s": "pass"}, None, [{"n": 1}], {}, opts, **clock)
    assert out.points[0].result.stop_reason.startswith("time budget")
    assert out.warnings() == []
    assert "ended at their time budget" not in str(out)


def test_a_sweep_table_keeps_one_unit_the_plots():
    out = fake_sweep([256, 512, 1024])
    assert out.metric() == "flop"
    rates = [row[out._head().index("Rate")] for row in out.rows()]
    assert all(
        "FLOP/s" in r for r in rates
    )  # even where bytes sit nearer their ceiling (small bf16 matmuls)


def test_the_legend_sits_beside_the_plot_where_no_curve_or_peak_line_runs():
    fig = fake_sweep([256, 512, 1024]).figure()
    assert fig.legend[0] in fig.right and fig.legend[0] not in fig.center


def test_a_long_sweep_says_its_estimate_at_once_then_each_point_as_it_finishes():
    now, said = [0.0], []

    class Stopping(Scripted):
        def first_call(self, once):
            if len(said) > 3:  # Ctrl-C once a few points have been said
                raise KeyboardInterrupt
            return super().first_call(once)

    def step(point, label):
        return Stopping(now, lambda: 1e-3)

    with pytest.raises(SweepInterrupted) as err:  # was silent until the end, ~3 h later
        run_sweep(
            {"s": "pass"},
            None,
            grid({"n": range(100_000)}),
            {},
            TimingOptions(work=False, time_budget=0.1),
            sampler_for=step,
            wall_clock=lambda: now[0],
            progress=said.append,
        )
    assert said[0].startswith("Sweep of 100,000 measurements: about ") and " h " in said[0]
    assert "(from the first)" in said[0] and "Ctrl-C keeps those done" in said[0]
    assert said[1].startswith("[1/100,000] n=0: 1 ms; about ") and said[1].endswith(" left")
    assert said[3].startswith("[3/100,000] n=2: ")
    assert [p.status for p in err.value.result.points] == ["ok", "ok", "ok", "interrupted"]


def test_a_short_sweep_says_nothing_while_it_runs():
    now, said = [0.0], []
    run_sweep(
        {"s": "pass"},
        None,
        grid({"n": [1, 2, 3]}),
        {},
        TimingOptions(work=False, time_budget=0.1),
        sampler_for=lambda point, label: Scripted(now, lambda: 1e-3),
        wall_clock=lambda: now[0],
        progress=said.append,
    )
    assert said == []
