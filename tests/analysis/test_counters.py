"""Hardware counters on kernels (``--counters``): the time-weighted means of nsys' GPU-metric
samples over each kernel name's calls (``trace/counters.py``), the verdicts (``analysis/
counters.py``), the report's section, and the H200 capture in ``tests/data/nsys/gpu_metrics.*``
checked against what the same kernels' counted bytes say."""

from __future__ import annotations

import pandas as pd
import pytest

from gpumagic.analysis.counters import counters_table, verdict
from gpumagic.capture.nsys.backend import load_nsys
from gpumagic.device_peaks.table import lookup
from gpumagic.render.report import ProfileReport
from gpumagic.trace.counters import kernel_counters


def _samples(key: str, values: list[float], period: int = 100) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "timestamp": [period * (i + 1) for i in range(len(values))],
            "key": key,
            "value": values,
        }
    )


def test_a_kernels_figure_is_the_time_weighted_mean_of_the_samples_over_its_run():
    # samples cover (0,100]=10, (100,200]=50, (200,300]=90; a kernel over [50, 250] sees
    # 50 ns at 10, 100 ns at 50 and 50 ns at 90: (500 + 5000 + 4500) / 200 = 50
    kernels = pd.DataFrame({"name": ["k"], "start": [50], "end": [250]})
    got = kernel_counters(kernels, _samples("dram_read", [10, 50, 90]))
    assert got.loc[0, "dram_read"] == pytest.approx(50.0)
    assert got.loc[0, "period_ns"] == 100 and not got.loc[0, "short"]
    assert pd.isna(got.loc[0, "tensor_active"])  # a metric that was not sampled


def test_short_calls_of_one_name_are_read_together_and_marked():
    kernels = pd.DataFrame(
        {"name": ["k", "k", "long"], "start": [10, 110, 0], "end": [30, 130, 300]}
    )
    got = kernel_counters(kernels, _samples("sm_active", [20, 80, 50])).set_index("Name")
    # 20 ns at 20 and 20 ns at 80: a mean of 50 over their 40 ns
    assert got.loc["k", "sm_active"] == pytest.approx(50.0) and got.loc["k", "short"]
    assert got.loc["k", "Instances"] == 2 and got.loc["k", "Total Time (ns)"] == 40
    assert got.loc["long", "sm_active"] == pytest.approx(50.0) and not got.loc["long", "short"]


@pytest.mark.parametrize(
    "row, starts",
    [
        ({"dram_read": 45, "dram_write": 40, "tensor_active": 3}, "memory-bound: DRAM 85% of peak"),
        (
            {"dram_read": 10, "tensor_active": 90, "sm_issue": 20},
            "tensor-core bound: tensor pipe 90%",
        ),
        ({"dram_read": 10, "tensor_active": 5, "sm_issue": 75}, "compute-bound: SM issue 75%"),
        ({"dram_read": 5, "sm_issue": 10, "sm_active": 30}, "SMs idle: 30% of SMs active"),
        ({"dram_read": 20, "sm_issue": 30, "sm_active": 90}, "latency-bound: SM issue 30%"),
    ],
)
def test_each_verdict_says_its_numbers(row, starts):
    assert verdict(row).startswith(starts)
    assert "shared samples" in verdict({**row, "short": True})


def test_the_h200_capture_gives_a_tensor_bound_gemm_and_a_memory_bound_add(committed_nsys):
    trace = load_nsys(committed_nsys("gpu_metrics"))
    table = counters_table(trace).set_index("Name")
    gemm = table.loc[next(n for n in table.index if n.startswith("nvjet"))]
    add = table.loc[next(n for n in table.index if "CUDAFunctor_add" in n)]
    assert gemm["Tensor Active (%)"] >= 50 and gemm["Verdict"].startswith("tensor-core bound")
    assert add["Verdict"].startswith("memory-bound") and add["Tensor Active (%)"] < 10
    assert 1000 < gemm["GPC (MHz)"] < 2100  # the clock in MHz (nsys writes it in Hz)
    # the counters' DRAM throughput against the add's counted traffic: it reads x (256 MiB)
    # and writes y (256 MiB) per call, over its kernel time, as a share of the H200's 4.8 TB/s
    kernels = trace.kernels[trace.kernels["name"].str.contains("CUDAFunctor_add")]
    seconds = float((kernels["end"] - kernels["start"]).mean()) / 1e9
    counted = 2 * (1 << 26) * 4 / seconds / lookup(trace.meta["device"]).bandwidth * 100
    sampled = add["DRAM Read (%)"] + add["DRAM Write (%)"]
    assert abs(sampled / counted - 1) < 0.10, (sampled, counted)


def test_the_report_shows_the_counters_section_and_its_text(committed_nsys):
    rep = ProfileReport(load_nsys(committed_nsys("gpu_metrics")))
    html = rep.html(timeline=None)
    assert (
        "What the silicon says (% of peak; GPU metrics sampled every 100 µs, metric set gh100)"
    ) in html
    assert "metric set gh100: General Metrics for NVIDIA GH100 (any frequency)" in html
    assert "tensor-core bound" in html and "memory-bound" in html
    text = str(rep)
    assert "What the silicon says" in text and "elementwise add (vectorized" in text
    assert list(rep.counters()["Instances"]) == [10, 20]


def test_a_capture_without_counters_has_no_section(committed_nsys):
    rep = ProfileReport(load_nsys(committed_nsys("matmul")))
    assert rep.counters().empty and "What the silicon says" not in rep.html(timeline=None)


def _sampled(trace, period: int = 100_000, seed: int = 0):
    """``trace`` with DRAM-read and tensor samples of its own (random values every ``period``
    ns over its window), as ``attach_counters`` leaves an nsys capture."""
    import numpy as np

    a, b = trace.window()
    ts = np.arange(a - period, b + 2 * period, period)
    rng = np.random.default_rng(seed)
    parts = [
        pd.DataFrame({"timestamp": ts, "gpu": 0, "key": k, "value": rng.uniform(0, 100, len(ts))})
        for k in ("dram_read", "tensor_active")
    ]
    trace.meta["counter_samples"] = pd.concat(parts, ignore_index=True)
    trace.meta["counters_period_ns"] = float(period)
    return trace


def _by_hand(samples, key, kernels):
    """The time-weighted mean of ``key`` over ``kernels`` (start, end), each sample's value held
    over the period before its time: summed overlap by overlap, with no running integral."""
    mine = samples[samples["key"] == key].sort_values("timestamp")
    ts, vs = mine["timestamp"].tolist(), mine["value"].tolist()
    num = den = 0.0
    for start, end in kernels:
        den += end - start
        for i in range(1, len(ts)):
            lo, hi = max(start, ts[i - 1]), min(end, ts[i])
            if hi > lo:
                num += (hi - lo) * vs[i]
    return num / den


def test_counters_per_module_hold_its_kernels_and_its_childrens_by_pass():
    from gpumagic import load_trace
    from gpumagic.analysis.counters import code_counters
    from gpumagic.trace.by_code import attribution

    from ..helpers import ROOT

    trace = _sampled(load_trace(ROOT / "tests/data/attribution/gpt_modules.json.gz"))
    got = code_counters(trace, "module").set_index(["Module", "Pass"])
    items = attribution(trace, memops=False).items
    spans = list(zip(trace.kernels["start"], trace.kernels["end"]))
    samples = trace.meta["counter_samples"]
    for module, backward in [("GPT_0.Block_1", True), ("GPT_0.Block_0.Attention_0", False)]:
        inside = items["module"].fillna("").str.startswith(module) & (items["backward"] == backward)
        picked = [spans[i] for i in inside[inside].index]
        row = got.loc[(module, "backward" if backward else "forward")]
        assert row["Kernels"] == len(picked)
        assert row["DRAM Read (%)"] == pytest.approx(_by_hand(samples, "dram_read", picked))
        assert row["Tensor Active (%)"] == pytest.approx(_by_hand(samples, "tensor_active", picked))
    # the top module holds every kernel that ran in a module, forward and backward
    top = got.loc["GPT_0"]
    assert int(top["Kernels"].sum()) == int(items["module"].notna().sum())
    assert got["Verdict"].str.len().gt(0).all()
    # a line's row: its forward work and the backward that work made
    lines = code_counters(trace, "line")
    assert int(lines["Time (ns)"].sum()) == int(items.loc[items["line"].notna(), "dur"].sum())


def test_a_module_whose_kernels_leave_its_samples_mostly_idle_is_told_so():
    import numpy as np

    from gpumagic import load_trace
    from gpumagic.analysis.counters import code_counters

    from ..helpers import ROOT

    # the committed GPT step keeps the GPU busy a small part of each 100 µs period: its modules'
    # counters are mostly the idle GPU's, and each verdict says how much of them is its own
    trace = _sampled(load_trace(ROOT / "tests/data/attribution/gpt_modules.json.gz"))
    row = code_counters(trace, "module").iloc[0]
    assert "of the sampling periods they touch (the rest: idle or other work)" in row["Verdict"]
    busy = (trace.kernels["end"] - trace.kernels["start"]).sum()
    span = np.subtract(*trace.window()[::-1])
    assert busy / span < 0.5


def test_the_report_shows_counters_by_module_and_line_with_their_verdicts():
    from gpumagic import load_trace

    from ..helpers import ROOT

    trace = _sampled(load_trace(ROOT / "tests/data/attribution/gpt_modules.json.gz"))
    trace.meta["counters"] = [
        {"Name": "k", "Instances": 1, "Total Time (ns)": 1.0, "dram_read": 90.0, "short": False}
    ]
    rep = ProfileReport(trace)
    html = rep.html(timeline=None)
    assert "By module (its kernels and, for a module, its children" in html
    assert "By line" in html and "GPT_0" in html
    assert "  By module:" in str(rep)
    assert list(rep.counters("module").columns[:2]) == ["Module", "Pass"]
    with pytest.raises(ValueError, match="by must be"):
        rep.counters("stream")


def test_the_timeline_draws_the_sampled_metrics_as_lanes_under_the_gpu(committed_nsys):
    from gpumagic.render import counter_lanes
    from gpumagic.render.timeline import timeline_figure

    trace = load_nsys(committed_nsys("gpu_metrics"))
    fig = timeline_figure(trace)
    labels = set(fig.yaxis.major_label_overrides.values())
    assert {"SMs active (0-100%)", "Tensor pipe active (0-100%)"} <= labels
    assert "DRAM read + write (0-100%)" in labels
    lanes, _ = counter_lanes.plan_lanes(trace, trace.window()[0], 0.0)
    tensor = next(lane for lane in lanes if lane.label.startswith("Tensor"))
    # the GEMMs run after the adds: the tensor lane is low first and high later
    half = len(tensor.x) // 2
    assert tensor.parts[0][:20].mean() < 20 < tensor.parts[0][half:].mean()
    # a long capture is binned: at most MAX_POINTS samples a lane
    many = trace.meta["counter_samples"]
    assert (
        len(
            counter_lanes._binned(
                many["timestamp"].to_numpy(float).repeat(40),
                many["value"].to_numpy(float).repeat(40),
                100.0,
            )[0]
        )
        <= 2 * counter_lanes.MAX_POINTS
    )
    plain = timeline_figure(load_nsys(committed_nsys("matmul")))
    assert not any("0-100%" in v for v in plain.yaxis.major_label_overrides.values())
