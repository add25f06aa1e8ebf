"""Trace and its nsys-style summaries, on the committed torch.profiler fixtures (captured on an
H100)."""

from __future__ import annotations

import gzip
import json
import statistics
from collections import defaultdict

import pandas as pd
import pytest

from gpumagic import load_trace
from gpumagic.analysis import findings
from gpumagic.trace import COLUMNS, Trace, frame, nesting_depth, union_ns

from ..helpers import DATA


def raw_events(name):
    return json.load(gzip.open(DATA / name))["traceEvents"]


def independent_summary(events, cats):
    """Group by name straight from the JSON, with the statistics module: no gpumagic code
    involved."""
    by = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in cats:
            by[e["name"]].append(round(e["dur"] * 1000))
    total = sum(sum(v) for v in by.values())
    return {
        n: dict(
            total=sum(v),
            count=len(v),
            med=statistics.median(v),
            mn=min(v),
            mx=max(v),
            sd=statistics.stdev(v) if len(v) > 1 else 0.0,
            pct=100 * sum(v) / total,
        )
        for n, v in by.items()
    }


@pytest.mark.parametrize("fixture", ["torch_block.json.gz", "torch_matmul_4096.json.gz"])
def test_kernel_summary_matches_an_independent_computation(fixture):
    t = load_trace(DATA / fixture)
    s = t.kernel_summary()
    ref = independent_summary(raw_events(fixture), {"kernel"})
    assert list(s.columns) == [
        "Time (%)",
        "Total Time (ns)",
        "Instances",
        "Avg (ns)",
        "Med (ns)",
        "Min (ns)",
        "Max (ns)",
        "StdDev (ns)",
        "Name",
    ]
    assert set(s["Name"]) == set(ref)
    for _, r in s.iterrows():
        e = ref[r["Name"]]
        assert (
            abs(r["Total Time (ns)"] - e["total"]) <= e["count"]
        )  # per-event rounding of µs floats
        assert r["Instances"] == e["count"]
        assert r["Med (ns)"] == pytest.approx(e["med"], abs=1)
        assert r["StdDev (ns)"] == pytest.approx(e["sd"], abs=2)
        assert r["Time (%)"] == pytest.approx(e["pct"], abs=0.01)
    assert s["Total Time (ns)"].is_monotonic_decreasing


def test_api_summary_matches_an_independent_computation():
    t = load_trace(DATA / "torch_block.json.gz")
    s = t.api_summary()
    ref = independent_summary(raw_events("torch_block.json.gz"), {"cuda_runtime", "cuda_driver"})
    assert dict(zip(s["Name"], s["Num Calls"])) == {n: e["count"] for n, e in ref.items()}


def test_block_fixture_contents():
    t = load_trace(DATA / "torch_block.json.gz")
    assert len(t.kernels) == 10  # qkv, qkᵀ, div, softmax, attn·v, +x, h·W1, relu, ·W2, +h
    assert t.meta["device"] == "NVIDIA H100 80GB HBM3" and t.meta["sm_count"] == 132
    assert t.meta["compute_capability"] == "9.0"
    assert (t.kernels["end"] > t.kernels["start"]).all()
    assert t.kernels["grid"].notna().all() and t.kernels["registers"].gt(0).all()
    ops = t.ops.set_index("name")
    assert ops.loc["aten::matmul", "depth"].min() == 0 and ops.loc["aten::mm", "depth"].min() == 1
    assert t.nvtx_summary()["Range"].tolist() == ["cell:block"]


def test_busy_plus_idle_is_wall_and_findings_on_the_block():
    t = load_trace(DATA / "torch_block.json.gz")
    t.meta["label"] = "cell:block"
    f = t.figures()
    assert 0 < f["gpu_busy_ns"] <= f["wall_ns"]
    assert f["gpu_util"] > 0.9  # fp32 GEMMs keep the GPU busy
    kinds = {x.kind: x for x in findings(t)}
    assert "ffma_gemm" in kinds and kinds["ffma_gemm"].numbers["share"] > 0.9
    assert "allow_tf32" in kinds["ffma_gemm"].message
    assert "gpu_idle" not in kinds and "tiny_kernels" not in kinds
    assert kinds["top_kernels"].numbers["share"] > 95


def test_op_table_puts_gpu_time_on_the_launching_op():
    t = load_trace(DATA / "torch_block.json.gz")
    ot = t.op_summary().set_index("Name")
    assert ot.loc["aten::mm", "GPU (ns)"] > 0.9 * t.kernel_summary()["Total Time (ns)"].iloc[0]
    assert (ot["Self CPU (ns)"] <= ot["CPU total (ns)"]).all()
    assert ot["GPU (ns)"].sum() <= int((t.kernels["end"] - t.kernels["start"]).sum())


def _synthetic(n_kernels=100, dur=3_000, gap=20_000, launches=True):
    ks = [
        dict(
            name="void at::native::vectorized_elementwise_kernel<4, "
            "at::native::CUDAFunctor_add<float>, "
            "std::array<char*, 3ul> >(int)",
            start=i * (dur + gap),
            end=i * (dur + gap) + dur,
            device=0,
            stream=7,
            correlation=i + 1,
        )
        for i in range(n_kernels)
    ]
    api = (
        [
            dict(
                name="cudaLaunchKernel",
                start=i * (dur + gap) - 5_000,
                end=i * (dur + gap) - 1_000,
                thread=1,
                correlation=i + 1,
            )
            for i in range(n_kernels)
        ]
        if launches
        else []
    )
    ops = [
        dict(
            name="aten::add", start=i * (dur + gap) - 15_000, end=i * (dur + gap), thread=1, depth=0
        )
        for i in range(n_kernels)
    ]
    return Trace(
        kernels=frame("kernels", ks),
        api=frame("api", api),
        ops=frame("ops", ops),
        meta={"device": "Fake"},
    )


def test_findings_on_a_launch_bound_trace():
    kinds = {x.kind: x for x in findings(_synthetic())}
    assert "tiny_kernels" in kinds and "Launch-bound" in kinds["tiny_kernels"].message
    assert "gpu_idle" in kinds and "Overhead-bound" in kinds["gpu_idle"].message
    assert kinds["gpu_idle"].numbers["idle"] > 0.8


def test_launches_without_kernels_are_an_error_not_zero_ms():
    t = _synthetic(launches=True)
    t.kernels = t.kernels.iloc[0:0]
    (f,) = findings(t)
    assert f.kind == "kernels_dropped" and f.severity == "error"


def test_missing_kernels_are_reported():
    t = _synthetic()
    t.kernels = t.kernels.iloc[10:]
    kinds = {x.kind: x for x in findings(t)}
    assert kinds["kernels_missing"].numbers == {"missing": 10, "launches": 100}


def test_json_round_trip_keeps_the_summaries():
    t = load_trace(DATA / "torch_block.json.gz")
    back = Trace.from_json(t.to_json())
    pd.testing.assert_frame_equal(back.kernel_summary(), t.kernel_summary())
    assert back.meta["device"] == t.meta["device"]


def test_empty_trace_summaries_have_nsys_columns():
    t = Trace()
    assert list(t.kernel_summary().columns)[-1] == "Name" and t.kernel_summary().empty
    assert list(t.nvtx_summary().columns)[-2:] == ["Style", "Range"]
    assert t.memop_size_summary().columns[0] == "Total (MB)"
    assert findings(t)[0].kind in ("no_gpu_work", "no_gpu")
    assert set(COLUMNS) == {"kernels", "memops", "api", "ops", "nvtx", "osrt"}


def test_union_and_nesting_helpers():
    import random

    assert union_ns([0, 5, 20], [10, 15, 30]) == 25
    rng = random.Random(3)
    for _ in range(300):  # against counting covered nanoseconds one by one
        iv = [
            (s, s + rng.randint(0, 30))
            for s in (rng.randint(0, 200) for _ in range(rng.randint(0, 25)))
        ]
        covered = set().union(*(range(s, e) for s, e in iv)) if iv else set()
        assert union_ns([s for s, _ in iv], [e for _, e in iv]) == len(covered)
    df = pd.DataFrame({"start": [0, 1, 2, 10], "end": [9, 8, 3, 11], "thread": [1, 1, 1, 1]})
    assert nesting_depth(df).tolist() == [0, 1, 2, 0]


def test_load_trace_rejects_what_it_cannot_read(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a readable Chrome-trace JSON"):
        load_trace(bad)
    (tmp_path / "y.json").write_text('{"traceEvents": 3}')
    with pytest.raises(ValueError, match="no 'traceEvents' list"):
        load_trace(tmp_path / "y.json")


def test_summaries_and_figures_are_computed_once_per_trace(monkeypatch):
    from gpumagic.render.report import ProfileReport
    from gpumagic.trace import summaries

    t = load_trace(DATA / "torch_block.json.gz")
    t.meta["label"] = "cell:block"
    calls: list[str] = []
    real = summaries.duration_summary
    monkeypatch.setattr(
        summaries,
        "duration_summary",
        lambda df, *a, **k: calls.append(a[0][-1]) or real(df, *a, **k),
    )
    r = ProfileReport(t, timeline=False)
    r._repr_html_()
    str(r)
    r.to_dataframe()
    assert calls.count("name") == 2  # kernels once, API calls once, however many views read them
    first = t.kernel_summary()
    first.loc[0, "Instances"] = -1  # a caller's edit must not reach the next answer
    assert t.kernel_summary().loc[0, "Instances"] != -1
    assert t.figures()["gpu_busy_ns"] == t.gpu_busy_ns() > 0


def test_analysis_window_is_the_cells_range_else_its_cuda_activity_never_the_process(
    committed_nsys,
):
    from gpumagic import load_nsys

    t = load_nsys(committed_nsys("block"))  # a whole program: Python start-up, warm-up, the cell
    start, end = t.window()
    f = t.figures()
    assert f["window"] == "cuda" and f["window_text"] == "the span of its CUDA activity"
    assert f["wall_ns"] < (end - start) / 5  # 0.49 s of CUDA activity in a 4.45 s process
    gpu = t.gpu_intervals()
    assert f["wall_ns"] >= int(gpu["end"].max() - gpu["start"].min())
    t2 = load_nsys(committed_nsys("block"))
    t2.meta["label"] = "cell:block"
    f2 = t2.figures()
    assert f2["window"] == "nvtx" and f2["wall_ns"] < f["wall_ns"]
    cpu_only = Trace(
        ops=frame("ops", [dict(name="aten::add", start=10, end=30, thread=1, depth=0)])
    )
    assert cpu_only.figures()["window"] == "capture"


def test_a_replaced_table_drops_the_kept_answers():
    t = load_trace(DATA / "torch_block.json.gz")
    assert len(t.kernel_summary()) == 7 and t.gpu_busy_ns() > 0
    t.kernels = t.kernels.iloc[0:0]
    t.memops = t.memops.iloc[0:0]
    assert t.kernel_summary().empty and t.gpu_busy_ns() == 0
