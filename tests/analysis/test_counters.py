"""Hardware counters on kernels (``--counters``): the time-weighted means of nsys' GPU-metric
samples over each kernel name's calls (``trace/counters.py``), the verdicts (``analysis/
counters.py``), the report's section, and the H200 capture in ``tests/data/nsys/gpu_metrics.*``
checked against what the same kernels' counted bytes say."""

from __future__ import annotations

import pandas as pd
import pytest

from gpumagic.analysis.counters import counters_table, verdict
from gpumagic.capture.nsys import load_nsys
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
    assert "What the silicon says (GPU metrics sampled every 100 µs, % of peak)" in html
    assert "tensor-core bound" in html and "memory-bound" in html
    text = str(rep)
    assert "What the silicon says" in text and "elementwise add (vectorized" in text
    assert list(rep.counters()["Instances"]) == [10, 20]


def test_a_capture_without_counters_has_no_section(committed_nsys):
    rep = ProfileReport(load_nsys(committed_nsys("matmul")))
    assert rep.counters().empty and "What the silicon says" not in rep.html(timeline=None)
