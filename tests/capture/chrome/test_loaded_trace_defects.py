"""Traces from elsewhere read right: one test per defect that public torch.profiler traces showed
(missing values with pandas 3, Kineto's old category names, copies without bytes, advice for
hardware without the feature, the window of a loaded trace, devices gpumagic does not read, CUPTI's
range profiler). Each builds the smallest trace with the feature of the real one
(``tests/test_public_traces.py`` reads the real ones) and fails on the code before the fix."""

from __future__ import annotations

import gzip
import json
import math
import pathlib
import re

import pandas as pd
import pytest

from gpumagic.capture.chrome.reader import load_trace
from gpumagic.render.report import ProfileReport
from gpumagic.trace.launching_ops import kernel_op_precisions, precision_of_types
from gpumagic.trace.summaries import memop_size_summary
from gpumagic.trace.window import WindowError, in_window

SGEMM = "volta_sgemm_128x64_nn"  # an fp32 GEMM on CUDA cores (FFMA), as cuBLAS names it on a V100
A100 = {"name": "NVIDIA A100-SXM4-40GB", "computeMajor": 8, "computeMinor": 0, "numSms": 108}
V100 = {"name": "Tesla V100-SXM2-32GB", "computeMajor": 7, "computeMinor": 0, "numSms": 80}
GP100 = {"name": "Quadro GP100", "computeMajor": 6, "computeMinor": 0, "numSms": 56}
MI250 = {"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "numSms": 104}


def x(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args) -> dict:
    """A complete ('X') event, times in µs as Kineto writes them."""
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def launched(
    ts: float, corr: int, kernel: str = SGEMM, dur: float = 100.0, cat: str = "cuda_runtime"
) -> list[dict]:
    """A launch and its kernel (matched by correlation id)."""
    return [
        x(cat, "cudaLaunchKernel", ts, 5, correlation=corr),
        x("kernel", kernel, ts + 10, dur, tid=7, stream=7, device=0, correlation=corr),
    ]


def write(
    tmp_path: pathlib.Path, events: list[dict], props: dict | None = A100, name: str = "t.json"
) -> str:
    data = {"schemaVersion": 1, "traceEvents": events}
    if props is not None:
        data["deviceProperties"] = [props]
    out = tmp_path / name
    out.write_text(json.dumps(data))
    return str(out)


def shown(report: ProfileReport) -> str:
    """What a user reads: the text report and the HTML report's text."""
    html = re.sub(r"<[^>]+>", " ", report.html(None)).replace("&#x27;", "'").replace("&amp;", "&")
    return str(report) + "\n" + html


# --- missing values are missing (pandas 3)
# --------------------------------------------------------------------------


def test_ops_without_input_types_do_not_crash_the_report(tmp_path):
    """A training step: the forward op records its input types, the backward op
    (``autograd::engine::evaluate_ function: MmBackward0``) none. pandas 3 holds the missing types
    as NaN in a string column; the report raised ``AttributeError: 'float' object has no attribute
    'split'`` in precision_of_types."""
    events = [
        x(
            "cpu_op",
            "aten::mm",
            0,
            50,
            **{"Input type": ["float", "float"], "Input Dims": [[4, 4], [4, 4]]},
        ),
        *launched(1, 1),
        x("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 200, 50),
        *launched(
            201,
            2,
            kernel="void at::native::vectorized_elementwise_kernel<4, "
            "at::native::FillFunctor<float>>",
        ),
    ]
    trace = load_trace(write(tmp_path, events))
    assert trace.ops["dtypes"].isna().sum() == 1  # missing, whatever dtype pandas gives the column
    assert kernel_op_precisions(trace) == {SGEMM: "fp32"}
    ProfileReport(trace, timeline=False)._repr_html_()


@pytest.mark.parametrize("missing", [None, float("nan"), pd.NA, ""])
def test_precision_of_missing_types_is_none(missing):
    assert precision_of_types(missing) is None
    assert precision_of_types("c10::BFloat16, float") == "bf16"


# --- Kineto's old category names
# ------------------------------------------------------------------------------------


def test_old_kineto_category_names_are_read(tmp_path):
    """2021 traces (PyTorch 1.8/1.9) say Runtime, Kernel, Memcpy, Memset and Operator: their calls,
    copies and ops were read as "not recorded"."""
    events = [
        x("Operator", "aten::mm", 0, 50),
        *launched(1, 1, cat="Runtime"),
        x("Runtime", "cudaMemcpyAsync", 120, 5, correlation=2),
        x(
            "Memcpy",
            "Memcpy HtoD (Pageable -> Device)",
            130,
            20,
            tid=7,
            stream=7,
            device=0,
            correlation=2,
            bytes=4096,
        ),
        x("Runtime", "cudaMemsetAsync", 160, 5, correlation=3),
        x(
            "Memset",
            "Memset (Device)",
            170,
            2,
            tid=7,
            stream=7,
            device=0,
            correlation=3,
            bytes=4096,
        ),
    ]
    trace = load_trace(write(tmp_path, events))
    assert (len(trace.ops), len(trace.api), len(trace.kernels), len(trace.memops)) == (1, 3, 1, 2)
    assert sorted(trace.memops["kind"]) == ["HtoD", "memset"]
    assert all(trace.recorded(kind) for kind in ("kernels", "memops", "api", "ops"))
    assert "not recorded" not in shown(ProfileReport(trace, timeline=False))


# --- unknown bytes are unknown
# --------------------------------------------------------------------------------------


def test_copies_without_bytes_are_unknown_not_negative(tmp_path):
    """ROCm's Kineto copies have no ``bytes``: they were filled with -1 and summed into "move -0 MB
    ... -0.0 GB/s"."""
    events = [
        x("cuda_runtime", "hipMemcpyWithStream", 0, 30, correlation=1),
        x(
            "gpu_memcpy",
            "Memcpy HtoD (Host -> Device)",
            5,
            22.441,
            tid=0,
            stream=0,
            device=0,
            correlation=1,
        ),
        x("cuda_runtime", "hipMemcpyWithStream", 40, 30, correlation=2),
        x(
            "gpu_memcpy",
            "Memcpy HtoD (Host -> Device)",
            45,
            15.72,
            tid=0,
            stream=0,
            device=0,
            correlation=2,
        ),
        *launched(
            80, 3, kernel="void at::native::reduce_kernel<512, 1>", dur=10, cat="cuda_runtime"
        ),
    ]
    trace = load_trace(write(tmp_path, events, MI250))
    assert trace.memops["bytes"].isna().all()
    size = memop_size_summary(trace.memops)
    assert math.isnan(size["Total (MB)"].iloc[0]) and size["Count"].iloc[0] == 2
    text = shown(ProfileReport(trace, timeline=False))
    assert "unknown amount" in text
    assert not re.search(r"-\d|-0 MB|nan", text)


def test_copies_with_some_bytes_say_at_least(tmp_path):
    events = [
        x(
            "gpu_memcpy",
            "Memcpy HtoD (Host -> Device)",
            5,
            20,
            tid=0,
            stream=0,
            device=0,
            bytes=3_000_000,
        ),
        x("gpu_memcpy", "Memcpy HtoD (Host -> Device)", 45, 20, tid=0, stream=0, device=0),
        *launched(70, 1, dur=10),
    ]
    report = ProfileReport(load_trace(write(tmp_path, events)), timeline=False)
    assert "move at least 3 MB (1 of 2 without their bytes)" in str(report)


# --- advice by compute capability
# -----------------------------------------------------------------------------------


def ffma_trace(tmp_path, props) -> str:
    return str(ProfileReport(load_trace(write(tmp_path, launched(0, 1), props)), timeline=False))


def test_tf32_advice_only_where_the_gpu_has_tf32(tmp_path):
    """TF32 needs compute capability 8.0: a V100 (7.0), an RTX 2080 Ti (7.5) or a GP100 (6.0) has
    none, and AMD's ``computeMajor`` 9 is gfx9, not Hopper. The advice was given on each."""
    assert "allow_tf32" in ffma_trace(tmp_path, A100)
    v100 = ffma_trace(tmp_path, V100)
    assert "allow_tf32" not in v100 and "has no TF32" in v100 and "compute capability 7.0" in v100
    rtx = ffma_trace(
        tmp_path, {"name": "NVIDIA GeForce RTX 2080 Ti", "computeMajor": 7, "computeMinor": 5}
    )
    assert "allow_tf32" not in rtx and "compute capability 7.5" in rtx
    for props in (
        GP100,
        MI250,
    ):  # no tensor cores (GP100); AMD: PyTorch's TF32 switches are not the ones
        text = ffma_trace(tmp_path, props)
        assert "TF32" not in text and "FFMA" not in text
    unknown = ffma_trace(tmp_path, None)
    assert "On a GPU of compute capability 8.0 or newer" in unknown


def test_no_compatibility_finding_on_amd(tmp_path):
    """An AMD GPU's computeMajor 9 is not NVIDIA's sm90: no SM comparison is made for it."""
    trace = load_trace(
        write(tmp_path, launched(0, 1, kernel="ampere_fp16_s16816gemm_fp16_128x128_ldg8"), MI250)
    )
    assert trace.meta.get("compute_capability") is None and trace.meta["vendor"] == "AMD"
    assert not [
        f for f in ProfileReport(trace, timeline=False).findings if f.kind == "compat_kernel"
    ]


# --- the window of a loaded trace
# -----------------------------------------------------------------------------------


def stepped(tmp_path) -> str:
    """A CUDA call 10 s before two profiler steps whose GPU is busy nearly throughout, and a torch
    op spanning the whole capture: from the first CUDA call the GPU read "idle 100%", and the whole
    capture's CPU time was set beside the window's GPU time."""
    events = [
        x("cpu_op", "aten::to", 0, 10_030_000),  # a whole-capture op
        x("cuda_runtime", "cudaGetDevice", 0, 1),
        x("user_annotation", "ProfilerStep#7", 10_000_000, 1_000),
        x("user_annotation", "ProfilerStep#8", 10_001_000, 1_000),
        x("user_annotation", "## forward ##", 10_001_000, 500),
    ]
    for i in range(20):
        events += launched(10_000_000 + 100 * i, 10 + i, dur=99)
    return write(tmp_path, events, A100)


def test_loaded_trace_defaults_to_its_profiler_steps(tmp_path):
    report = ProfileReport(load_trace(stepped(tmp_path)), timeline=False)
    line = report.summary_line()
    assert "the profiler steps ProfilerStep#7\u2013#8 (2 steps)" in line
    assert not [f for f in report.findings if f.kind == "gpu_idle"]
    fig = report.figures
    assert (
        fig["window"] == "steps" and fig["cpu_ops_ns"] <= fig["wall_ns"]
    )  # one window for every figure


def test_window_choices(tmp_path):
    path = stepped(tmp_path)
    gpu = ProfileReport(load_trace(path, window="gpu"), timeline=False)
    assert "the span of its GPU activity" in gpu.summary_line()
    whole = ProfileReport(load_trace(path), window="capture", timeline=False)
    assert "the whole capture" in whole.summary_line()
    assert [
        f for f in whole.findings if f.kind == "gpu_idle"
    ]  # idle 10 s before the steps: true of the capture
    assert whole.figures["cpu_ops_ns"] <= whole.figures["wall_ns"]
    one = in_window(load_trace(path), "8")
    assert one.meta["window_text"] == "profiler step ProfilerStep#8" and len(one.kernels) == 10
    fwd = in_window(load_trace(path), "## forward ##")
    assert fwd.meta["window_kind"] == "range" and len(fwd.kernels) == 5
    with pytest.raises(WindowError, match="ProfilerStep#7\u2013#8"):
        in_window(load_trace(path), "3-4")
    with pytest.raises(WindowError, match="'## forward ##'"):
        in_window(load_trace(path), "backward")


def test_without_steps_the_window_is_the_gpu_span(tmp_path):
    """No ProfilerStep: from the first GPU operation to the last, not from the first CUDA call 10 s
    earlier."""
    events = [x("cuda_runtime", "cudaGetDevice", 0, 1)]
    for i in range(10):
        events += launched(10_000_000 + 100 * i, 10 + i, dur=99)
    report = ProfileReport(load_trace(write(tmp_path, events)), timeline=False)
    assert "the span of its GPU activity" in report.summary_line()
    assert report.figures["gpu_util"] > 0.95


def test_kernels_launched_in_the_last_step_count_after_it_ends(tmp_path):
    """Launches are asynchronous: a kernel launched in the window that ends after it belongs to it
    (the window's end moves to its end)."""
    events = [x("user_annotation", "ProfilerStep#1", 0, 50), *launched(10, 1, dur=1_000)]
    trace = in_window(load_trace(write(tmp_path, events)))
    assert len(trace.kernels) == 1 and trace.meta["window"][1] >= trace.kernels["end"].max()


# --- devices gpumagic does not read, and CUPTI's range profiler
# ----------------------------------------------------


def test_mtia_is_named_and_left_out(tmp_path):
    """An MTIA trace was told to record CUDA kernels with ProfilerActivity.CUDA."""
    events = [
        x("cpu_op", "aten::mul", 0, 10),
        x("mtia_runtime", "runFunction", 1, 5, correlation=1),
        x("mtia_ccp_events", "customized_fba_mul_const", 8, 3, correlation=1),
    ]
    report = ProfileReport(load_trace(write(tmp_path, events, {"name": "ARTEMIS"})), timeline=False)
    text = shown(report)
    assert "MTIA device activity not read by gpumagic" in report.summary_line()
    assert "ARTEMIS" in text and "left out" in text
    assert "ProfilerActivity.CUDA" not in text and "did not record" not in text


def test_range_profiler_kernels_are_not_called_dropped(tmp_path):
    """CUPTI's range profiler leaves one ``cuda_profiler_range`` event per kernel (its counters) and
    no 'kernel' event: every launch read as a kernel the profiler dropped."""
    events = []
    for i in range(3):
        events += [
            x("cuda_runtime", "cudaLaunchKernel", 100 * i, 5, correlation=i + 1),
            x(
                "cuda_profiler_range",
                SGEMM,
                100 * i + 10,
                121_431,
                tid=0,
                **{"smsp__inst_executed.sum": 1},
            ),
        ]
    trace = load_trace(write(tmp_path, events))
    assert trace.kernels.empty and trace.meta["range_profiler"]["kernels"] == 3
    report = ProfileReport(trace, timeline=False)
    text = shown(report)
    assert "range profiler" in report.summary_line()
    assert not re.search(r"dropped|lost|run it again", text)
    assert [f.kind for f in report.findings] == ["range_profiler"]


def test_gzip_written_trace_reads_back(tmp_path):
    """The same reader for ``.json.gz`` (every public trace here is one)."""
    out = tmp_path / "t.json.gz"
    with gzip.open(out, "wt") as f:
        json.dump({"traceEvents": launched(0, 1), "deviceProperties": [A100]}, f)
    assert len(load_trace(out).kernels) == 1
