"""Real torch.profiler traces that nobody here made read right: the corpus of public traces
(Holistic Trace Analysis' test data, MIT; its README lists each file, its source commit and what it
exercises) is loaded and rendered, text and HTML, and what the report says is checked against the
trace's own events: no share above 100%, no negative or "-0" amount, "not recorded" only where the
trace has no such events, TF32 advice only for a GPU with TF32 (compute capability 8.0 or newer), a
device gpumagic does not read (MTIA) named and left out, a range profiler's kernels not called
dropped, and the window the figures are taken over named.

Where HTA's own tests assert a figure for one of these traces, gpumagic's figure is compared with it
(within 1%):
- ``ns_resolution_trace``: 4876 GPU kernels and memory operations in HTA's default window (the work
  launched before the last profiler step; ``test_get_gpu_kernels_with_user_annotations``) =
  gpumagic's window ``"101-104"``;
- ``cupti_profiler``: 77 range-profiler counter rows
  (``test_get_cupti_counter_data_with_operators``) = the 77 kernels gpumagic counts as profiled, one
  per ``cudaLaunchKernel``;
- ``nccl_parser_config``: 21 ``ncclKernel`` kernels (``test_nccl_parser_config``) = gpumagic's NCCL
  kernels.

The corpus is data from another project: it is read from ``$GPUMAGIC_PUBLIC_TRACES``, else
``shared/data/public`` beside the repository (where CI lays ``shared/``), else
``tests/data/public``; without it these tests skip.
"""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import re
from functools import cache

import pytest

from gpumagic import load_trace
from gpumagic.render.report import ProfileReport
from gpumagic.trace.window import in_window, steps

from .helpers import ROOT


def corpus_dir() -> pathlib.Path | None:
    """Where the public traces are (module doc); None where they are not."""
    said = os.environ.get("GPUMAGIC_PUBLIC_TRACES")
    candidates = [pathlib.Path(said)] if said else []
    candidates += [ROOT.parent / "shared" / "data" / "public", ROOT / "tests" / "data" / "public"]
    return next((c for c in candidates if (c / "hta").is_dir()), None)


CORPUS = corpus_dir()
needs_corpus = pytest.mark.skipif(
    CORPUS is None, reason="the public trace corpus is not here (module doc)"
)

#: Each file of the corpus (under ``hta/``, HTA's tests/data path) and what it exercises.
FILES = {
    "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz": (
        "AMD MI250 (ROCm 6.2) training steps; copies without bytes"
    ),
    "trace_file_list/inference_rank_1.json.gz": (
        "old Kineto category names (Kernel, Runtime); inference; rank 1"
    ),
    "cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz": (
        "CUPTI range profiler (cuda_profiler_range)"
    ),
    "mtia_inference_trace/mtia_inference_rank_0.json.gz": (
        "MTIA inference (mtia_ccp_events, mtia_runtime)"
    ),
    "trace_filter/sampled_rank-0.json.gz": (
        "two-rank training job, rank 0 (NCCL all-to-all, send/recv)"
    ),
    "trace_filter/sampled_rank-1.json.gz": "two-rank training job, rank 1",
    "with_gpu_user_annotation/step_based_trace_2543932.json.gz": (
        "Quadro GP100 (compute capability 6.0)"
    ),
    "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz": (
        "V100 DDP training, 5 profiler steps"
    ),
    "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz": (
        "A100 AlexNet inference benchmark"
    ),
    "critical_path/cuda_event_sync/event_sync_trace.json.gz": (
        "A100, CUDA event synchronisation (cuda_sync)"
    ),
    "triton_example/triton_example.json.gz": "torch.compile Triton kernel, cuda_driver launch",
    "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz": "CPU only: no GPU activity recorded",
    "nccl_parser_config/nccl_data.json.gz": (
        "A100 ResNet DDP training, NCCL all-reduce and broadcast"
    ),
    "call_stack/backward_thread.json": "training step with a backward thread, no device properties",
    "large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz": (
        "minimal trace: one kernel, one op"
    ),
}

#: The test's own reading of Kineto's categories (old names included), independent of gpumagic's
#: reader.
_CATEGORY = {
    "runtime": "cuda_runtime",
    "driver": "cuda_driver",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
}
_CATEGORY |= {"operator": "cpu_op", "kernel": "kernel"}
#: What a "not recorded" sentence calls a kind, and the categories that would have recorded it.
_RECORDS = {
    "CUDA kernels": {"kernel"},
    "memory operations": {"gpu_memcpy", "gpu_memset"},
    "CUDA API calls": {"cuda_runtime", "cuda_driver"},
    "torch ops": {"cpu_op"},
}


@cache
def raw(name: str) -> dict:
    """The trace's own JSON: its categories (old names mapped), device properties and step names."""
    path = CORPUS / "hta" / name  # type: ignore[operator]
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    cats = {
        _CATEGORY.get(str(e.get("cat", "")).lower(), str(e.get("cat", "")).lower()) for e in events
    }
    props = (data.get("deviceProperties") or [{}])[0] if isinstance(data, dict) else {}
    cc = (
        (props["computeMajor"], props.get("computeMinor", 0))
        if props.get("computeMajor") is not None
        else None
    )
    amd = "AMD" in str(props.get("name", "")) or any(
        str(e.get("name", "")).startswith("hip") for e in events
    )
    has_steps = any(re.match(r"^ProfilerStep#\d+$", str(e.get("name", ""))) for e in events)
    return {
        "cats": cats,
        "cc": None if amd else cc,
        "amd": amd,
        "steps": has_steps,
        "path": str(path),
    }


@cache
def rendered(name: str) -> tuple[ProfileReport, str, str]:
    """The report of one file, its text, and the text of its HTML (the full notebook HTML rendered
    once as well)."""
    report = ProfileReport(load_trace(raw(name)["path"]))
    assert "<div class='gm-report'" in report._repr_html_()
    html = re.sub(r"<[^>]+>", " ", report.html(None))
    html = (
        html.replace("&#x27;", "'").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    )
    return report, str(report), html


def statements(report: ProfileReport) -> str:
    """What the report asserts in sentences: the summary line, the findings and notes (not the
    tables' names)."""
    return "\n".join([report.summary_line(), *(f.message for f in report.findings), *report.notes])


@needs_corpus
@pytest.mark.parametrize("name", list(FILES))
def test_renders_and_agrees_with_its_data(name):
    facts = raw(name)
    report, text, html = rendered(name)
    said = statements(report)
    both = text + "\n" + html

    shares = [float(s) for s in re.findall(r"(?<![\w.])(\d+(?:\.\d+)?)\s?%", said)]
    assert all(s <= 100 for s in shares), said
    assert not re.search(r"(?<![\w#])-\d+(?:\.\d+)?\s?(?:MB|GB|kB|B|GB/s|µs|ms|ns|s|%)\b", said), (
        said
    )
    assert "-0 MB" not in both and not re.search(r"\bnan\b", said)

    for noun, cats in _RECORDS.items():
        if re.search(rf"did not record {noun}|{noun}( and [a-zA-Z ]+)? not recorded", said):
            assert not (facts["cats"] & cats), (
                f"says {noun} not recorded, but the trace has {facts['cats'] & cats}"
            )

    if (
        "allow_tf32" in both
    ):  # TF32 exists from compute capability 8.0; unknown hardware gets conditional advice
        assert facts["cc"] is None or facts["cc"] >= (8, 0), name
        assert facts["cc"] is not None or "compute capability 8.0 or newer" in said
    assert not (facts["amd"] and "TF32" in said)

    if any(c.startswith("mtia_") for c in facts["cats"]):
        assert "MTIA" in report.summary_line() and "left out" in said
        assert "ProfilerActivity.CUDA" not in both and "CUDA kernels" not in said
    if "cuda_profiler_range" in facts["cats"]:
        assert "range profiler" in report.summary_line()
        assert not re.search(r"dropped|lost them|run it again", both)

    if "GPU busy" in report.summary_line():  # a figure over a window: the window is named
        window = "profiler step" if facts["steps"] else "the span of its GPU activity"
        assert window in report.summary_line()


@needs_corpus
def test_corpus_is_whole():
    """Every file the README lists is here, and nothing heavier than a few MB."""
    missing = [n for n in FILES if not (CORPUS / "hta" / n).is_file()]  # type: ignore[operator]
    assert not missing
    assert sum((CORPUS / "hta" / n).stat().st_size for n in FILES) < 4_000_000  # type: ignore[operator]
    assert (CORPUS / "LICENSE-HTA").is_file() and (CORPUS / "README.md").is_file()  # type: ignore[operator]


# --- HTA's asserted figures
# ------------------------------------------------------------------------------------------


def close(ours: float, theirs: float) -> bool:
    """Within 1% of HTA's figure."""
    return abs(ours - theirs) <= 0.01 * abs(theirs)


@needs_corpus
def test_gpu_operations_in_htas_window_agree():
    """HTA (``test_get_gpu_kernels_with_user_annotations``): 4876 GPU kernels and memory operations
    on rank 0 of ``ns_resolution_trace``, in its default window: the CPU events before the last
    profiler step and the GPU work they launched. The trace launches nothing before its first step,
    so that is gpumagic's window of steps 101-104."""
    trace = load_trace(
        raw("ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")["path"]
    )
    assert (trace.api["start"] < steps(trace)["start"].min()).sum() == 0
    windowed = in_window(trace, "101-104")
    assert close(len(windowed.kernels) + len(windowed.memops), 4876)
    assert "ProfilerStep#101\u2013#104 (4 steps)" in windowed.meta["window_text"]


@needs_corpus
def test_range_profiler_kernels_agree():
    """HTA (``test_get_cupti_counter_data_with_operators``): 77 counter rows in the CUPTI
    range-profiler trace."""
    trace = load_trace(
        raw("cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz")["path"]
    )
    assert close(trace.meta["range_profiler"]["kernels"], 77)
    launches = trace.api[trace.api["name"] == "cudaLaunchKernel"]
    assert (
        len(launches) == trace.meta["range_profiler"]["kernels"]
    )  # one profiled kernel per launch: none dropped


@needs_corpus
def test_nccl_kernels_agree():
    """HTA (``test_nccl_parser_config``): 21 ``ncclKernel`` kernels in ``nccl_parser_config``'s
    whole trace."""
    trace = load_trace(raw("nccl_parser_config/nccl_data.json.gz")["path"])
    assert close(int(trace.kernels["name"].str.contains("ncclKernel").sum()), 21)


@needs_corpus
def test_two_ranks_read_as_one_job():
    """The two sampled ranks of one job, read together: both ranks, and every statement within its
    own numbers."""
    trace = load_trace([raw(f"trace_filter/sampled_rank-{r}.json.gz")["path"] for r in (0, 1)])
    report = ProfileReport(trace)
    assert report._repr_html_()
    said = statements(report)
    assert "rank 0" in said and "rank 1" in said
    assert all(float(s) <= 100 for s in re.findall(r"(?<![\w.])(\d+(?:\.\d+)?)\s?%", said))
