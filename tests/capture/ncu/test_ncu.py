"""--ncu on the CPU: the readers against the CSV fixtures, the roofline, the report, and every
orchestration path with a stand-in ncu (tests/fake_ncu) in place of Nsight Compute."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import pathlib
import re
import statistics
import sys
import tempfile
from typing import Any

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from gpumagic.api.ncu import load_ncu
from gpumagic.capture.ncu import backend as ncu
from gpumagic.capture.ncu.read import limiter, read_details_csv, read_raw_csv, to_base
from gpumagic.capture.ncu.tensor import TENSOR_METRICS
from gpumagic.capture.options import NcuOptions
from gpumagic.errors import (
    FileMissingError,
    InvalidOptionError,
    NcuCellError,
    NcuFailedError,
    NcuNotFoundError,
    NcuPermissionError,
    NcuReplayError,
    NcuTimeoutError,
    NoKernelsProfiledError,
)
from gpumagic.render.ncu_view import NcuReport

from ...helpers import DATA, FAKE_NCU, FAKE_NCU_PYTHON, ROOT, settle

NCU = DATA / "ncu"
RAW = (NCU / "tiny.raw.csv").read_text()
DETAILS = (NCU / "tiny.details.csv").read_text()
TENSOR_RAW = (NCU / "tensor.raw.csv").read_text()
TENSOR_DETAILS = (NCU / "tensor.details.csv").read_text()
N = 2048  # tensor.*: one N³ GEMM per math path (tests/data/capture/ncu_tensor_workload.py)


def csv_rows(text: str) -> tuple[list[str], list[str], list[list[str]]]:
    """The CSV as ncu printed it, read independently of gpumagic: header, units row, data rows."""
    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], rows[1], rows[2:]


def csv_value(text: str) -> float:
    return float(text.replace(",", ""))


# --- readers
# --------------------------------------------------------------------------------------------------


def test_reader_gives_the_csvs_durations_and_throughputs():
    header, units, rows = csv_rows(RAW)
    col = {h: i for i, h in enumerate(header)}
    k = read_raw_csv(RAW).kernels()
    assert len(k) == len(rows) == 2
    for (_, got), row in zip(k.iterrows(), rows, strict=True):
        assert got["Name"] == row[col["Kernel Name"]]
        assert units[col["gpu__time_duration.sum"]] == "ns"
        assert got["Duration (ns)"] == csv_value(row[col["gpu__time_duration.sum"]])
        assert got["SM %"] == csv_value(
            row[col["sm__throughput.avg.pct_of_peak_sustained_elapsed"]]
        )
        mem = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
        assert got["Memory %"] == csv_value(row[col[mem]])
        assert got["DRAM bytes/s"] == csv_value(row[col["dram__bytes.sum.per_second"]])


def test_flops_intensity_and_ceilings_follow_ncus_roofline_definitions():
    header, _, rows = csv_rows(RAW)
    col = {h: i for i, h in enumerate(header)}
    data = read_raw_csv(RAW)
    k = data.kernels()

    def m(row: list[str], name: str) -> float:
        return csv_value(row[col[name]])

    for (_, got), row in zip(k.iterrows(), rows, strict=True):
        per = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
        fp32 = (
            m(row, per.format("fadd")) + m(row, per.format("fmul")) + 2 * m(row, per.format("ffma"))
        ) * m(row, "smsp__cycles_elapsed.avg.per_second")
        assert got["fp32 FLOP/s"] == pytest.approx(fp32, rel=1e-12)
        assert got["Intensity (FLOP/B)"] == pytest.approx(
            got["FLOP/s"] / m(row, "dram__bytes.sum.per_second")
        )
    ceil = data.ceilings()  # the median over launches (the clock moves a little between them)
    ffma = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"
    fp32 = [2 * m(r, ffma) * m(r, "sm__cycles_elapsed.avg.per_second") for r in rows]
    assert ceil["fp32"] == pytest.approx(statistics.median(fp32))
    dram = [
        m(r, "dram__bytes.sum.peak_sustained") * m(r, "dram__cycles_elapsed.avg.per_second")
        for r in rows
    ]
    assert ceil["dram"] == pytest.approx(statistics.median(dram))
    # the fixture's matmul: 2·1024³ FLOP in its duration
    assert k.loc[0, "FLOP/s"] * k.loc[0, "Duration (ns)"] * 1e-9 == pytest.approx(
        2 * 1024**3, rel=0.01
    )


def test_limiter_is_ncus_bottleneck_rule():
    assert limiter(72.3, 45.1) == "compute"
    assert limiter(14.2, 71.5) == "memory"
    assert limiter(30.0, 59.9) == "latency"
    assert limiter(75.0, 70.0) == "balanced"
    assert limiter(math.nan, 50.0) is None
    # and the fixture's launches agree with what ncu's own Bottleneck rule said about them
    said = {
        "balanced": (
            "Compute and Memory are well-balanced",
            "This workload is utilizing greater than",
        ),
        "compute": ("Compute is more heavily utilized", "This workload is utilizing greater than"),
        "memory": ("Memory is more heavily utilized", "This workload is utilizing greater than"),
        "latency": ("This workload exhibits low compute", "This kernel grid is too small"),
    }
    k = read_raw_csv(RAW).kernels()
    rules = read_details_csv(DETAILS)
    assert set(k["Limiter"]) == {"balanced", "latency"}  # the 1024² matmul and the add
    for _, r in k.iterrows():
        msg = rules[(rules["ID"] == r["ID"]) & (rules["Rule"] == "SOLBottleneck")]["Message"].iloc[
            0
        ]
        assert msg.startswith(said[r["Limiter"]]), (r["Limiter"], msg)


def test_prefixed_units_are_scaled_to_base_units():
    assert to_base(1.5, "usecond") == (1500.0, "ns")
    assert to_base(2.0, "ms") == (2e6, "ns")
    assert to_base(1.2, "Tbyte/second") == (1.2e12, "byte/second")
    assert to_base(1.2, "Gbyte/s") == (1.2e9, "byte/second")
    assert to_base(1.98, "Ghz") == (1.98e9, "hz")
    assert to_base("NVIDIA H100", "") == ("NVIDIA H100", "")
    # the same report printed without --print-units base reads the same
    header, units, rows = csv_rows(RAW)
    i, j = header.index("gpu__time_duration.sum"), header.index("dram__bytes.sum.per_second")
    units[i], units[j] = "usecond", "Gbyte/second"
    for row in rows:
        row[i] = f"{csv_value(row[i]) / 1e3:,.3f}"
        row[j] = f"{csv_value(row[j]) / 1e9:,.6f}"
    text = io.StringIO()
    csv.writer(text, quoting=csv.QUOTE_ALL).writerows([header, units, *rows])
    scaled = read_raw_csv("==PROF== chatter before the table\n" + text.getvalue()).kernels()
    base = read_raw_csv(RAW).kernels()
    assert list(scaled["Duration (ns)"]) == pytest.approx(list(base["Duration (ns)"]))
    assert list(scaled["DRAM bytes/s"]) == pytest.approx(list(base["DRAM bytes/s"]))


def test_rules_one_row_per_launch_and_rule():
    rules = read_details_csv(DETAILS)
    assert set(rules["ID"]) == {0, 1} and set(rules["Rule"]) == {"SOLBottleneck", "SOLFPRoofline"}
    assert not rules.duplicated(["ID", "Rule", "Message"]).any()
    assert rules["Message"].str.len().gt(40).all()
    assert read_details_csv("no table here").empty


# --- tensor-core work (tensor.raw.csv: bf16, TF32, fp32 FFMA and fp64 GEMMs under the default
# sections + counters) ----


def tensor_rows() -> tuple[dict[str, int], list[list[str]]]:
    header, _, rows = csv_rows(TENSOR_RAW)
    return {h: i for i, h in enumerate(header)}, rows


def ops(col: dict[str, int], row: list[str], src: str) -> float:
    return csv_value(row[col[f"sm__ops_path_tensor_src_{src}.sum"]])


def test_tensor_counters_count_each_gemm_as_2n3_flops():
    col, rows = tensor_rows()
    k = read_raw_csv(TENSOR_RAW).kernels()
    assert len(k) == len(rows) == 4
    seen = set()
    for (_, got), row in zip(k.iterrows(), rows, strict=True):
        counts = {
            p: ops(col, row, src)
            for p, src in (("bf16", "bf16_dst_fp32"), ("tf32", "tf32_dst_fp32"), ("fp64", "fp64"))
        }
        used = [p for p, v in counts.items() if v > 0]
        seconds = got["Duration (ns)"] * 1e-9
        if not used:  # the FFMA GEMM: no tensor work
            assert got["Tensor FLOP/s"] == 0 and got["Math"] == "fp32"
            continue
        (p,) = used
        seen.add(p)
        assert counts[p] == 2 * N**3  # ncu's count: 2 FLOP per multiply-add, exactly
        src = {"bf16": "bf16_dst_fp32", "tf32": "tf32_dst_fp32", "fp64": "fp64"}[p]
        per_cycle = csv_value(row[col[f"sm__ops_path_tensor_src_{src}.sum.per_cycle_elapsed"]])
        hz = csv_value(row[col["sm__cycles_elapsed.avg.per_second"]])
        assert got[f"tensor {p} FLOP/s"] == pytest.approx(
            per_cycle * hz, rel=1e-12
        )  # ncu's own definition
        assert got["Tensor FLOP/s"] * seconds == pytest.approx(2 * N**3, rel=0.05)
        assert got["FLOP/s"] * seconds == pytest.approx(
            2 * N**3, rel=0.05
        )  # the epilogue's FFMA work is tiny
        assert got["Math"] == f"{p} tensor" and got["Limiter"] == "compute"
    assert seen == {"bf16", "tf32", "fp64"}


def test_bf16_gemm_sits_under_its_tensor_roof_and_above_fp32_compute_bound():
    from bokeh.models import GlyphRenderer, Line, Scatter

    from gpumagic.render.roofline import roofline_figure

    col, rows = tensor_rows()
    data = read_raw_csv(TENSOR_RAW)
    data.rules = read_details_csv(TENSOR_DETAILS)
    k, ceil = data.kernels(), data.ceilings()
    i = next(j for j, row in enumerate(rows) if ops(col, row, "bf16_dst_fp32") > 0)
    r = k.loc[i]
    assert ceil["fp32"] < r["FLOP/s"] < ceil["bf16 tensor"]
    assert (
        r["Intensity (FLOP/B)"] > ceil["bf16 tensor"] / ceil["dram"]
    )  # right of the ridge: compute-bound
    assert r["Limiter"] == "compute" and 50 < r["Peak %"] < 100
    said = data.rules[(data.rules["ID"] == r["ID"]) & (data.rules["Rule"] == "SOLBottleneck")][
        "Message"
    ].iloc[0]
    assert said.startswith("Compute is more heavily utilized")  # ncu's own rule agrees
    fig = roofline_figure(k, ceil)
    renderers = [g for g in fig.renderers if isinstance(g, GlyphRenderer)]
    points = next(g for g in renderers if isinstance(g.glyph, Scatter)).data_source.data
    assert points["y"][i] == pytest.approx(r["FLOP/s"]) and points["marker"] == ["circle"] * 4
    roofs = {item.label["value"].rsplit(" ", 2)[0]: item for item in fig.legend.items}
    # the FFMA roofs, DRAM, and the tensor roofs of the precisions some kernel used (not fp16, fp8,
    # int8)
    assert set(roofs) == {"DRAM", "fp32", "fp64", "bf16 tensor", "tf32 tensor", "fp64 tensor"}
    lines = [tuple(g.data_source.data["y"]) for g in renderers if isinstance(g.glyph, Line)]
    assert (ceil["bf16 tensor"], ceil["bf16 tensor"]) in lines and len(lines) == 6


def test_tensor_ceilings_are_the_dense_peaks_at_ncus_clock():
    col, rows = tensor_rows()
    ceil = read_raw_csv(TENSOR_RAW).ceilings()
    hz = [csv_value(r[col["sm__cycles_elapsed.avg.per_second"]]) for r in rows]
    dense = "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained"
    assert ceil["bf16 tensor"] == pytest.approx(
        statistics.median(csv_value(r[col[dense]]) * h for r, h in zip(rows, hz))
    )
    # the source-level peak is the sparse one, twice the dense: the roof is the dense
    sparse = "sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained"
    assert csv_value(rows[0][col[sparse]]) == 2 * csv_value(rows[0][col[dense]])
    # H100 per SM and cycle: bf16 4096, tf32 2048, fp8 8192, fp64 256 (DMMA) against FFMA 2 x 128
    for key, ratio in (
        ("bf16 tensor", 16),
        ("tf32 tensor", 8),
        ("fp8 tensor", 32),
        ("fp64 tensor", 1),
    ):
        assert ceil[key] / ceil["fp32"] == pytest.approx(ratio), key


def test_ffma_gemm_and_old_reports_read_as_before():
    header, units, rows = csv_rows(TENSOR_RAW)
    keep = [i for i, h in enumerate(header) if not h.startswith("sm__ops_path_tensor")]
    text = io.StringIO()
    csv.writer(text, quoting=csv.QUOTE_ALL).writerows(
        [[row[i] for i in keep] for row in (header, units, *rows)]
    )
    without = read_raw_csv(
        text.getvalue()
    ).kernels()  # the same report, as the old default collected it
    full = read_raw_csv(TENSOR_RAW).kernels()
    assert "Tensor FLOP/s" not in without and "Math" not in without
    ffma = full.index[full["Math"] == "fp32"][0]
    for c in without.columns:
        assert without.loc[ffma, c] == full.loc[ffma, c] or (
            pd.isna(without.loc[ffma, c]) and pd.isna(full.loc[ffma, c])
        )
    # what the counters change: without them a tensor-core GEMM counts only its epilogue
    bf16 = full.index[full["Math"] == "bf16 tensor"][0]
    assert without.loc[bf16, "FLOP/s"] < 1e-3 * full.loc[bf16, "FLOP/s"]


def test_tensor_counter_alternatives_are_never_added_twice():
    from gpumagic.capture.ncu.tensor import tensor_rates

    base = {"sm__cycles_elapsed.avg.per_second": [1e9], "gpu__time_duration.sum": [1000.0]}
    split = {
        "sm__ops_path_tensor_src_fp16_dst_fp16.sum": [3e6],
        "sm__ops_path_tensor_src_fp16_dst_fp32.sum": [1e6],
    }
    assert tensor_rates(pd.DataFrame({**base, **split}))["tensor fp16 FLOP/s"][0] == pytest.approx(
        4e12
    )
    both = {
        **base,
        **split,
        "sm__ops_path_tensor_src_fp16.sum": [4e6],
    }  # a chip with the total and the split
    assert tensor_rates(pd.DataFrame(both))["tensor fp16 FLOP/s"][0] == pytest.approx(4e12)
    fp8 = {
        **base,
        "sm__ops_path_tensor_src_fp8_sparsity_off.sum": [2e6],
        "sm__ops_path_tensor_src_fp8_sparsity_on.sum": [1e6],
    }
    rates = tensor_rates(pd.DataFrame(fp8))  # as the tensor roofline section collects fp8 on Hopper
    assert rates["tensor fp8 FLOP/s"][0] == pytest.approx(3e12) and rates["Tensor FLOP/s"][
        0
    ] == pytest.approx(3e12)
    int8 = tensor_rates(pd.DataFrame({**base, "sm__ops_path_tensor_src_int8.sum": [5e6]}))
    assert int8["tensor int8 OP/s"][0] == pytest.approx(5e12) and pd.isna(
        int8["Tensor FLOP/s"][0]
    )  # ops, not FLOPs


def test_report_says_the_math_and_the_tensor_ceilings():
    data = read_raw_csv(TENSOR_RAW)
    data.rules = read_details_csv(TENSOR_DETAILS)
    rep = NcuReport(data, label="cell:tensor")
    text = str(rep)
    assert "Math" in text and "bf16 tensor, 74% of peak" in text and "fp32, 76% of peak" in text
    assert "tensor: the kernel's multiply-adds ran on the tensor cores" in text
    assert "bf16 tensor 811 TFLOP/s" in text and "int8 tensor 1.62 POP/s" in text
    assert "<th style='padding:2px 8px;text-align:right;white-space:nowrap'>Math</th>" in rep.html(
        None
    )
    assert "Math" not in str(
        NcuReport(read_raw_csv(RAW))
    )  # a report without the counters: as before


# --- the roofline and the report
# ------------------------------------------------------------------------------------


def test_roofline_has_one_point_per_kernel_and_the_ceilings():
    from bokeh.models import GlyphRenderer, Line, Scatter

    from gpumagic.render.roofline import roofline_figure

    data = read_raw_csv(RAW)
    k = data.kernels()
    k.loc[len(k)] = k.loc[
        1
    ]  # a third launch that counted no FLOPs (a copy): still a glyph of its own
    k.loc[2, ["FLOP/s", "Intensity (FLOP/B)"]] = [math.nan, math.nan]
    fig = roofline_figure(k, data.ceilings())
    renderers = [r for r in fig.renderers if isinstance(r, GlyphRenderer)]
    points = [r for r in renderers if isinstance(r.glyph, Scatter)]
    assert len(points) == 1 and len(points[0].data_source.data["x"]) == len(k) == 3
    assert points[0].data_source.data["marker"] == ["circle", "circle", "x"]
    lines = [r for r in renderers if isinstance(r.glyph, Line)]
    assert len(lines) == len(data.ceilings())  # fp32, fp64 roofs and the DRAM slope
    ys = points[0].data_source.data["y"]
    assert ys[0] == pytest.approx(k.loc[0, "FLOP/s"]) and max(ys) <= data.ceilings()["fp32"]


def test_report_text_html_and_dataframe():
    data = read_raw_csv(RAW, path="/tmp/x.ncu-rep")
    data.rules = read_details_csv(DETAILS)
    rep = NcuReport(
        data, label="cell:7", notes=["report: /tmp/x.ncu-rep (opens in ncu-ui)"], seconds=12.5
    )
    text = str(rep)
    assert "2 kernel launches profiled on NVIDIA H100 80GB HBM3" in text and "12.5 s" in text
    df = rep.to_dataframe()
    assert list(df["Duration (ns)"]) == sorted(df["Duration (ns)"], reverse=True)
    # decoded names, not the raw ones, in the table
    assert df.loc[0, "Kernel"] != df.loc[0, "Name"] and "gemm" in df.loc[0, "Kernel"].lower()
    assert "elementwise add" in df.loc[1, "Kernel"]
    assert (
        "balanced" in text
        and "latency-bound" in text
        and "Compute and Memory are well-balanced" in text
    )
    assert rep.path == "/tmp/x.ncu-rep"
    html = rep._repr_html_()
    assert "<table class='gm-ncu'>" in html and "<iframe" in html and "SOLBottleneck" in html
    assert "text/html" in rep._repr_mimebundle_()


def test_load_ncu_reads_a_report_with_ncu_and_a_saved_csv(tmp_path, monkeypatch):
    rep_path = tmp_path / "r.ncu-rep"
    rep_path.write_bytes(b"stand-in")
    log = tmp_path / "log"
    monkeypatch.setenv("FAKE_NCU_LOG", str(log))
    rep = load_ncu(rep_path, ncu=FAKE_NCU)
    pages = [a[a.index("--page") + 1] for a in map(json.loads, log.read_text().splitlines())]
    assert sorted(pages) == ["details", "raw"]  # read side by side
    assert all("--print-units" in a for a in map(json.loads, log.read_text().splitlines()))
    assert len(rep.kernels()) == 2 and not rep.rules.empty and rep.path == str(rep_path)
    csv_path = tmp_path / "r.csv"
    csv_path.write_text(RAW)
    from_csv = load_ncu(csv_path).kernels()
    assert list(from_csv["Duration (ns)"]) == list(rep.kernels()["Duration (ns)"])
    with pytest.raises(FileMissingError, match="does not exist"):
        load_ncu(tmp_path / "missing.ncu-rep")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(ncu, "_SEARCH", ("/nonexistent/*/ncu",))
    with pytest.raises(NcuNotFoundError, match="Looked in: PATH"):
        load_ncu(rep_path)


# --- kernel selection
# ------------------------------------------------------------------------------------------------


def test_function_filter_matches_the_top_kernels_in_either_spelling():
    from gpumagic.capture.chrome.reader import load_trace

    names = list(load_trace(DATA / "torch_block.json.gz").kernel_summary()["Name"])
    flt = ncu.function_filter(names[:2])
    assert flt.startswith("regex:")
    pattern = re.compile(flt[len("regex:") :])
    for n in names[:2]:
        base = ncu.function_name(n)
        assert "(" not in base and "<" not in base and "::" not in base
        for spelling in (base, f"cutlass::{base}", f"{base}<int>"):
            assert pattern.search(spelling), spelling
    assert not pattern.search("vectorized_elementwise_kernel") or any(
        "elementwise" in n for n in names[:2]
    )
    assert ncu.function_name("void at::native::(anonymous namespace)::k<4>(int, float*)") == "k"


# --- the capture, with the stand-in ncu
# -------------------------------------------------------------------------------


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """Stand-in ncu settings; temp files go to a directory of the test's own, to check they are
    removed."""
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "ncu.log"))
    monkeypatch.setenv("FAKE_NCU_MODE", "ok")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    opts = NcuOptions(
        ncu_path=FAKE_NCU, profile_dir=str(tmp_path / "profiles"), kernel_filter="regex:gemm"
    )
    return opts, tmp_path


def calls(tmp_path: pathlib.Path) -> list[list[str]]:
    return [json.loads(x) for x in (tmp_path / "ncu.log").read_text().splitlines()]


def runs(tmp_path: pathlib.Path) -> list[list[str]]:
    """The profiling runs among the stand-in's calls (not the report's imports)."""
    return [c for c in calls(tmp_path) if "--nvtx" in c]


def test_capture_runs_the_cell_under_ncu_restricted_to_its_range(fake):
    opts, tmp_path = fake
    marker = tmp_path / "ran.txt"
    ns = {"marker": str(marker), "k": 3}
    got = ncu.capture(
        "open(marker, 'a').write(str(k) + '\\n')\nk * 2",
        "cell:9",
        namespace=ns,
        warmup=2,
        options=opts,
    )
    assert marker.read_text().splitlines() == ["3", "3", "3"]  # 2 warm-up runs + 1 inside the range
    assert ns == {"marker": str(marker), "k": 3}  # the namespace is untouched
    assert repr(got.value) == "6"
    profile = calls(tmp_path)[0]
    joined = " ".join(profile)
    for piece in (
        "--nvtx --nvtx-include cell:9/",
        "--filter-mode per-launch-config --launch-count 1",
        "--kernel-name regex:gemm",
        "--section SpeedOfLight --section SpeedOfLight_RooflineChart --metrics "
        + ",".join(TENSOR_METRICS),
        "--clock-control base",
        "-m gpumagic.capture.child.runner",
    ):
        assert piece in joined, piece
    assert "--kernel-name-base" not in profile  # the user's filter is passed as given
    report = got.files["report"]
    assert os.path.exists(report) and report.endswith(".ncu-rep")
    assert any(report in n for n in got.notes) and any(
        "locked the GPU clocks to base" in n for n in got.notes
    )
    assert len(got.data.kernels()) == 2 and got.seconds > 0
    assert os.listdir(tempfile.tempdir) == []  # the shipped names are gone


def test_the_runs_phases_are_split_by_the_childs_own_marks(fake):
    """ncu's run is not one lump: the child's marks split it (its start under ncu, the torch
    import, CUDA, the warm-up, the profiled runs) and the parent's side adds shipping and reading;
    together they are the capture's wall time, and the note and the report carry them."""
    opts, _ = fake
    got = ncu.capture("x = 1", "cell:2", options=opts)
    names = list(got.phases)
    assert names[:2] == ["shipping", "child start"] and names[-2:] == ["reading", "cleanup"]
    assert {"torch import", "inputs", "warm-up", "capture", "tool stop/flush"} <= set(names)
    assert "ncu" not in names  # the one-lump phase, only where the child wrote no marks
    # every part of the wall time is in a phase: the first pass's exit and the work dir's
    # removal too ("cleanup")
    assert sum(got.phases.values()) == pytest.approx(got.seconds, rel=0.05, abs=0.05)
    took = next(n for n in got.notes if n.startswith("Took "))
    assert "child start" in took and "torch import" in took  # phases under 0.05 s left out


def _block_names() -> list[str]:
    """The kernel names of the committed trace the stand-in first pass ranks, longest first."""
    from gpumagic.capture.chrome.reader import load_trace

    table = load_trace(DATA / "torch_block.json.gz").kernel_summary()
    return list(table.sort_values("Total Time (ns)", ascending=False)["Name"])


def _counting_cell(tmp_path: pathlib.Path) -> tuple[str, dict[str, Any], pathlib.Path]:
    marker = tmp_path / "ran.txt"
    return "open(marker, 'a').write('run\\n')", {"marker": str(marker)}, marker


def test_first_pass_picks_the_top_kernels_by_time(fake):
    """More kernel names than ``top``: the process started beside the first pass ends without
    running the cell, and ncu runs again with the top names as its filter."""
    opts, tmp_path = fake
    from dataclasses import replace

    cell, ns, marker = _counting_cell(tmp_path)
    got = ncu.capture(
        cell,
        "cell:1",
        namespace=ns,
        options=replace(opts, kernel_filter=None, python=FAKE_NCU_PYTHON, top=3),
    )
    early, profile = runs(tmp_path)
    assert early[-1] == "--gated" and "--kernel-name" not in early
    assert profile[profile.index("--kernel-name-base") + 1] == "function"
    flt = profile[profile.index("--kernel-name") + 1]
    names = _block_names()
    assert flt == ncu.function_filter(names[:3])
    assert marker.read_text().count("run") == 2  # warm-up and the run: the early process ran none
    assert any(f"top 3 of {len(names)} kernel names" in n for n in got.notes)
    assert list(got.phases)[:4] == ["shipping", "first pass", "early process stop", "child start"]
    assert settle(tmp_path) == []


def test_a_cell_of_few_kernel_names_is_profiled_by_the_process_started_beside_the_first_pass(
    fake,
):
    """No more names than ``top``: one ncu run, started before the ranking was known, with no
    name filter (every kernel of the range, which is what the filter would select); the cell runs
    in it once per loop, its start is said to have been hidden, and the phases still add up."""
    opts, tmp_path = fake
    from dataclasses import replace

    cell, ns, marker = _counting_cell(tmp_path)
    names = _block_names()
    got = ncu.capture(
        cell,
        "cell:4",
        namespace=ns,
        options=replace(opts, kernel_filter=None, python=FAKE_NCU_PYTHON, top=len(names)),
    )
    (only,) = runs(tmp_path)
    assert only[-1] == "--gated" and "--kernel-name" not in only
    assert "--nvtx-include" in only  # still only the cell's range
    assert marker.read_text().count("run") == 2
    assert any(
        n.startswith("Profiled: every kernel") and f"saw {len(names)} kernel names" in n
        for n in got.notes
    )
    assert any(
        n.startswith("The profiled process started beside the first pass") for n in got.notes
    )
    rows = list(got.phases)
    assert rows[:3] == ["shipping", "first pass", "child start"]
    assert rows[-2:] == ["reading", "cleanup"]
    assert {"inputs", "warm-up", "capture", "tool stop/flush"} <= set(rows)
    assert "torch import" not in rows  # hidden behind the first pass: in the note, not the sum
    # every part of the wall time is in a phase: the first pass's exit and the work dir's
    # removal too ("cleanup")
    assert sum(got.phases.values()) == pytest.approx(got.seconds, rel=0.05, abs=0.05)
    assert len(got.data.kernels()) == 2
    assert os.listdir(tempfile.tempdir) == [] and settle(tmp_path) == []


def test_early_start_off_runs_ncu_once_after_the_first_pass(fake):
    opts, tmp_path = fake
    from dataclasses import replace

    ncu.capture(
        "x = 1",
        "cell:5",
        options=replace(
            opts, kernel_filter=None, python=FAKE_NCU_PYTHON, top=99, early_start=False
        ),
    )
    (only,) = runs(tmp_path)
    assert "--gated" not in only and "--kernel-name" in only


def test_a_cell_error_stops_the_process_started_beside_the_first_pass(fake, monkeypatch):
    """The first pass (the real one here, on the CPU) meets the cell's error: the held process is
    stopped before the error is raised, and nothing of the run is left."""
    opts, tmp_path = fake
    from dataclasses import replace

    with pytest.raises(NcuCellError, match="ZeroDivisionError"):
        ncu.capture("1 / 0", "cell:6", options=replace(opts, kernel_filter=None, top=5))
    (early,) = runs(tmp_path)
    assert early[-1] == "--gated"
    assert os.listdir(tempfile.tempdir) == [] and settle(tmp_path) == []


def test_the_held_process_ends_when_its_parent_is_gone(tmp_path):
    """A process held at the gate whose notebook died (its parent's pid gone) ends by itself,
    having run nothing: no orphan waits for a gate nobody will open."""
    import subprocess

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    env = dict(os.environ, GPUMAGIC_PARENT_PID=str(gone.pid))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-m", "gpumagic.capture.child.runner", str(tmp_path), "--gated"],
        env=env,
        timeout=60,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "value.txt").exists() and not (tmp_path / "error.txt").exists()
    assert (tmp_path / "phases-early.json").exists()


def test_options_and_clock_control(fake):
    opts, tmp_path = fake
    from dataclasses import replace

    ncu.capture(
        "x = 1",
        "c",
        options=replace(opts, section_set="roofline", clock_control="none", launch_count=2),
    )
    joined = " ".join(calls(tmp_path)[0])
    assert "--set roofline" in joined and "--section" not in joined
    assert "--clock-control none" in joined and "--launch-count 2" in joined
    ncu.capture("x = 1", "c", options=replace(opts, extra_args="--metrics sm__cycles_elapsed.avg"))
    profile = [c for c in calls(tmp_path) if "--nvtx" in c][-1]
    assert profile.count("--metrics") == 1  # the user's --metrics replaces the tensor counters
    for bad, match in [
        (dict(clock_control="boost"), "'base' or 'none'"),
        (dict(launch_count=0), "at least 1"),
        (dict(top=-1), "0 \\(every kernel\\)"),
        (dict(timeout=0), "positive"),
        (dict(extra_args="'unclosed"), "shell-quoted"),
    ]:
        with pytest.raises(InvalidOptionError, match=match):
            ncu.capture("x = 1", "c", options=replace(opts, **bad))
    with pytest.raises(InvalidOptionError, match="NVTX filter syntax"):
        ncu.capture("x = 1", "a/b", options=opts)


@pytest.mark.parametrize(
    "mode, error, message",
    [
        (
            "perm",
            NcuPermissionError,
            "NVreg_RestrictProfilingToAdminUsers=0(.|\\n)*--cap-add SYS_ADMIN",
        ),
        (
            "nomatch",
            NoKernelsProfiledError,
            "No kernels were profiled: no kernel inside the NVTX range 'c' matched",
        ),
        (
            "replay",
            NcuReplayError,
            "replay failed(.|\\n)*--replay-mode application(.|\\n)*Files kept: .*ncu-rep",
        ),
        ("fail", NcuFailedError, "exited with status 1(.|\\n)*not recognized"),
    ],
)
def test_ncu_failures_name_cause_and_fix(fake, monkeypatch, mode, error, message):
    opts, _ = fake
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    with pytest.raises(error, match=message):
        ncu.capture("x = 1", "c", options=opts)
    assert os.listdir(tempfile.tempdir) == []


def test_timeout_stops_ncu_and_says_so(fake, monkeypatch):
    opts, _ = fake
    from dataclasses import replace

    monkeypatch.setenv("FAKE_NCU_MODE", "hang")
    with pytest.raises(NcuTimeoutError, match="did not finish within 2 s"):
        ncu.capture("x = 1", "c", options=replace(opts, timeout=2))
    assert os.listdir(tempfile.tempdir) == []


def test_cell_exception_is_the_cells_error(fake):
    opts, _ = fake
    with pytest.raises(NcuCellError, match="ZeroDivisionError") as info:
        ncu.capture("1 / 0", "c", options=opts)
    assert "1 / 0" in info.value.traceback


def test_find_ncu_says_where_it_looked(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(ncu, "_SEARCH", ("/nonexistent/*/ncu",))
    with pytest.raises(NcuNotFoundError, match="Looked in: PATH, /nonexistent/\\*/ncu") as info:
        ncu.find_ncu()
    assert info.value.hints[0].setting == "ncu_path"
    with pytest.raises(NcuNotFoundError, match="configured path '/no/ncu'"):
        ncu.find_ncu("/no/ncu")
    assert ncu.find_ncu(FAKE_NCU) == FAKE_NCU


# --- the magic
# --------------------------------------------------------------------------------------------------


def test_magic_without_a_gpu_says_ncu_needs_one(ip):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(UsageError, match="--ncu needs a CUDA GPU"):
        ip.run_cell_magic("gpuprofile", "--ncu", "y = 2")
    assert "y" not in ip.user_ns


def test_magic_with_stand_in_ncu_shows_the_report(ip, fake, monkeypatch):
    import torch

    opts, tmp_path = fake
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    ip.run_line_magic("config", f"GpuMagics.ncu_path = {FAKE_NCU!r}")
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {opts.profile_dir!r}")
    with capture_output() as cap:
        ip.run_cell_magic(
            "gpuprofile", "--ncu -w 0 --kernels regex:gemm --no-clock-control -o rep", "y = 2"
        )
    rep = ip.user_ns["rep"]
    assert isinstance(rep, NcuReport) and len(rep.kernels()) == 2
    assert "y" not in ip.user_ns  # the cell ran in the subprocess only
    assert "text/html" in cap.outputs[0].data and "--clock-control none" in " ".join(
        calls(tmp_path)[0]
    )
    ip.run_line_magic("config", "GpuMagics.ncu_path = '/nonexistent/ncu'")
    with pytest.raises(UsageError, match=r"%config GpuMagics\.ncu_path = '/path/to/ncu'"):
        ip.run_cell_magic("gpuprofile", "--ncu", "y = 2")
    with pytest.raises(UsageError, match="go with --ncu"):
        ip.run_cell_magic("gpuprofile", "--kernels regex:x", "y = 2")


def test_first_pass_without_cuda_kernels_stops_before_ncu(fake):
    opts, tmp_path = fake
    from dataclasses import replace

    with pytest.raises(NoKernelsProfiledError, match=r"first pass .* saw no CUDA kernel"):
        ncu.capture(
            "import torch\ny = torch.ones(3) + 1", "c", options=replace(opts, kernel_filter=None)
        )
    # ncu profiled nothing: the one run is the process held beside the first pass, stopped there
    assert [r[-1] for r in runs(tmp_path)] == ["--gated"]
    assert not list((tmp_path / "profiles").glob("*.ncu-rep"))
    assert os.listdir(tempfile.tempdir) == [] and settle(tmp_path) == []


def test_first_pass_cell_error_and_unshippable_names(fake):
    opts, tmp_path = fake
    from dataclasses import replace

    from gpumagic.errors import ShippingError

    ranked = replace(opts, kernel_filter=None)
    with pytest.raises(
        NcuCellError, match="ZeroDivisionError"
    ):  # raised in the first pass: ncu profiles nothing
        ncu.capture("1 / 0", "c", options=ranked)
    # the first pass and the process held beside it, both already started, are stopped
    with pytest.raises(ShippingError, match="g: a generator"):
        ncu.capture("next(g)", "c", namespace={"g": (i for i in "ab")}, options=ranked)
    # held, never let through (the second may be stopped before the stand-in wrote its log)
    assert [r[-1] for r in runs(tmp_path)] in (["--gated"], ["--gated", "--gated"])
    assert not list((tmp_path / "profiles").glob("*.ncu-rep"))
    assert os.listdir(tempfile.tempdir) == [] and settle(tmp_path) == []


def test_an_int8_gemm_is_a_point_under_the_int8_tensor_roof_in_op_per_second():
    from bokeh.models import GlyphRenderer, Scatter

    from gpumagic.render.roofline import roofline_figure

    base = {
        "Duration (ns)": [50_000.0, 8_000.0],
        "SM %": [80.0, 10.0],
        "Memory %": [30.0, 90.0],
        "Limiter": [None] * 2,
    }
    kernels = pd.DataFrame(
        {
            "Name": [
                "cutlass_80_tensorop_i16832gemm_s8_128x256_128x3_tn_align16",
                "vectorized_elementwise_kernel",
            ],
            **base,
            "FLOP/s": [math.nan, 1e11],
            "Intensity (FLOP/B)": [math.nan, 0.1],
            "DRAM bytes/s": [1e12, 1e12],
            "Tensor FLOP/s": [math.nan, math.nan],
            "tensor int8 OP/s": [6e14, 0.0],
        }
    )
    ceil = {"fp32": 5e13, "int8 tensor": 1.6e15, "dram": 3e12}
    fig = roofline_figure(kernels, ceil)
    renderers = [g for g in fig.renderers if isinstance(g, GlyphRenderer)]
    points = next(g for g in renderers if isinstance(g.glyph, Scatter)).data_source.data
    assert points["marker"] == ["circle", "circle"]
    assert points["y"][0] == pytest.approx(6e14) and points["x"][0] == pytest.approx(
        600.0
    )  # OP/s over DRAM B/s
    assert (
        "int8 on the tensor cores" in points["flops_text"][0] and "OP/byte" in points["ai_text"][0]
    )
    roofs = [item.label["value"] for item in fig.legend.items]
    assert any(r.startswith("int8 tensor") and r.endswith("OP/s") for r in roofs)
    assert "int8: OP/s" in fig.yaxis[0].axis_label
