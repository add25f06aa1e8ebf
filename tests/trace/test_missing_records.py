"""A capture that did not record kernels (CUDA API calls, memory operations, NVTX ranges) says so
and how to record them; it never reads as an idle GPU or as "0 calls". Fixtures: the committed real
block captures with a table (nsys export) or an event category (torch.profiler Chrome trace) taken
out, as a capture without that tracing leaves them.
"""

from __future__ import annotations

import gzip
import json
import pathlib
import re
import sqlite3

import pytest

from gpumagic import load_nsys, load_trace
from gpumagic.render.report import ProfileReport
from gpumagic.trace import COLUMNS, Trace, summaries
from gpumagic.trace.coverage import KINDS

from ..helpers import DATA, gunzip

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
#: A figure of GPU busy or idle time, or a utilisation share: none may be made from records that are
#: not there.
BUSY_OR_IDLE = re.compile(r"\b(idle|busy)\b|\d%", re.IGNORECASE)


def nsys_export(tmp_path: pathlib.Path, *sql: str, name: str = "block") -> str:
    """The committed export, unzipped, with ``sql`` run on it (a DROP TABLE: a capture that did not
    record it)."""
    out = gunzip(DATA / "nsys" / f"{name}.sqlite.gz", tmp_path / f"{name}.sqlite")
    con = sqlite3.connect(out)
    for statement in sql:
        con.execute(statement)
    con.commit()
    con.close()
    return str(out)


def chrome_trace(tmp_path: pathlib.Path, drop) -> str:
    """The committed torch.profiler trace of the block without the events ``drop(event)`` picks."""
    with gzip.open(DATA / "torch_block.json.gz") as f:
        data = json.load(f)
    data["traceEvents"] = [e for e in data["traceEvents"] if not drop(e)]
    out = tmp_path / "trace.json"
    out.write_text(json.dumps(data))
    return str(out)


def cats(*names: str):
    return lambda e: str(e.get("cat", "")).lower() in names


def shown(report: ProfileReport) -> tuple[str, str]:
    """What a user reads: the text report, and the HTML report's text (tags dropped, entities
    undone)."""
    html = re.sub(r"<[^>]+>", " ", report.html(None))
    return str(report), html.replace("&#x27;", "'").replace("&lt;", "<").replace(
        "&gt;", ">"
    ).replace("&amp;", "&")


def test_nsys_export_without_kernels_says_they_were_not_recorded_and_how_to_record_them(tmp_path):
    trace = load_nsys(nsys_export(tmp_path, f"DROP TABLE {KERNEL_TABLE}"))
    report = ProfileReport(trace, timeline=False)
    text, html = shown(report)
    for out in (text, html):
        assert "did not record CUDA kernels" in out and KERNEL_TABLE in out
        assert "nsys profile -t cuda" in out
        assert not BUSY_OR_IDLE.search(out), BUSY_OR_IDLE.search(out)
    assert "CUDA kernels not recorded" in report.summary_line() and "0 kernels" not in text
    (finding,) = report.findings
    assert finding.kind == "kernels_not_recorded" and finding.severity == "error"
    assert finding.numbers["launches"] == 43  # the launches are there: the GPU worked
    assert not trace.recorded("kernels") and trace.recorded("api") and trace.recorded("memops")
    assert trace.figures()["gpu_util"] is None
    assert "kernels not recorded" in repr(trace)
    summary = trace.kernel_summary()
    assert summary.empty and "-t cuda" in summaries.not_recorded(summary)
    back = Trace.from_json(trace.to_json())  # a saved trace still knows
    assert not back.recorded("kernels") and "did not record CUDA kernels" in str(
        ProfileReport(back)
    )


def test_full_exports_report_as_before_and_an_absent_empty_table_is_recorded(tmp_path):
    assert tuple(COLUMNS) == KINDS and all(
        Trace().recorded(k) for k in KINDS
    )  # a Trace built by hand: all of them
    block = load_nsys(nsys_export(tmp_path, name="block"))
    text, html = shown(ProfileReport(block, timeline=False))
    assert all(block.recorded(k) for k in ("kernels", "memops", "api", "nvtx", "osrt"))
    assert (
        "GPU busy 183 ms of 487 ms, the span of its CUDA activity (38%) \u00b7 43 kernels, 5 "
        "memory ops" in text
    )
    assert "The GPU is idle 62%" in text and "not recorded" not in html
    # matmul was captured with -t cuda,nvtx: nsys wrote no memcpy/memset table (there were none) and
    # no OSRT table
    matmul = load_nsys(nsys_export(tmp_path, name="matmul"))
    assert matmul.recorded("memops") and matmul.recorded("kernels") and not matmul.recorded("osrt")
    text, html = shown(ProfileReport(matmul, timeline=False))
    assert (
        "GPU busy 7.97 ms of 8.02 ms, the span of its CUDA activity (99%) \u00b7 3 kernels \u00b7"
        in text
    )
    assert (
        "Memory operations (not recorded)" not in html and "OS runtime calls (not recorded)" in html
    )


def test_nsys_export_without_cuda_api_calls_says_so_not_zero_calls(tmp_path):
    trace = load_nsys(nsys_export(tmp_path, "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME"))
    report = ProfileReport(trace, timeline=False)
    text, html = shown(report)
    assert "did not record CUDA API calls" in text and "nsys profile -t cuda" in text
    assert "CUDA API calls (not recorded)" in html and "0 API calls" not in repr(trace)
    assert "API calls not recorded" in repr(trace)
    assert not trace.recorded("api") and trace.recorded("kernels")
    summary = trace.api_summary()
    assert summary.empty and "CUPTI_ACTIVITY_KIND_RUNTIME" in summaries.not_recorded(summary)
    assert (
        "43 kernels, 5 memory ops" in report.summary_line()
    )  # what it did record is still reported


def test_nsys_export_without_memory_operations_gives_no_gpu_time(tmp_path):
    drop = ("DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY", "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET")
    trace = load_nsys(
        nsys_export(tmp_path, *drop)
    )  # its API calls copied memory: not an absent-because-none table
    report = ProfileReport(trace, timeline=False)
    text, html = shown(report)
    assert "did not record memory operations" in text and "nsys profile -t cuda" in text
    assert "Memory operations (not recorded)" in html
    assert (
        "memory operations not recorded" in report.summary_line()
        and "43 kernels" in report.summary_line()
    )
    assert not BUSY_OR_IDLE.search(report.summary_line())
    assert not any(f.kind == "gpu_idle" for f in report.findings)
    assert not trace.recorded("memops") and trace.recorded("kernels")


def untraced(table: str, event_type: str) -> tuple[str, str]:
    """The SQL that makes an export look as if nsys had not traced ``event_type``: no ``table``,
    and no capture record of that event type."""
    return (
        f"DROP TABLE {table}",
        "DELETE FROM META_DATA_CAPTURE WHERE name = 'CAPTURE_EVENT_TYPE' "
        f"AND value = '{event_type}'",
    )


def test_nsys_export_without_nvtx_says_so_and_nvtx_traced_without_ranges_is_recorded(tmp_path):
    trace = load_nsys(nsys_export(tmp_path, *untraced("NVTX_EVENTS", "NvtxEvents")))
    _, html = shown(ProfileReport(trace, timeline=False))
    assert "NVTX ranges (not recorded)" in html and "nsys profile -t cuda,nvtx" in html
    assert not trace.recorded("nvtx")
    assert "NVTX_EVENTS" in summaries.not_recorded(trace.nvtx_summary())
    # -t nvtx and no range opened: nsys writes no table, and that is "none", not "not recorded"
    traced = load_nsys(nsys_export(tmp_path, "DROP TABLE NVTX_EVENTS"))
    assert traced.recorded("nvtx") and summaries.not_recorded(traced.nvtx_summary()) is None
    assert "NVTX ranges (not recorded)" not in shown(ProfileReport(traced, timeline=False))[1]


def test_an_nsys_capture_without_osrt_says_how_to_bring_it_back(tmp_path):
    """--nsys leaves osrt out of its trace by default (~3 s of nsys' stop): its report's OS
    runtime section says so and names the setting that brings it back; an export made outside
    gpumagic gets nsys' own advice, not gpumagic's setting."""
    from gpumagic.capture.options import NsysOptions

    assert "osrt" not in NsysOptions().trace.split(",")
    trace = load_nsys(nsys_export(tmp_path, *untraced("OSRT_API", "OSRuntime")))
    _, html = shown(ProfileReport(trace, timeline=False))
    assert "OS runtime calls (not recorded)" in html and "nsys profile -t cuda,nvtx,osrt" in html
    assert "GpuMagics" not in html and "~3 s" not in summaries.not_recorded(trace.osrt_summary())
    mine = load_nsys(nsys_export(tmp_path, *untraced("OSRT_API", "OSRuntime")))
    mine.meta["nsys_trace"] = "cuda,nvtx"  # what gpumagic's --nsys capture records
    said = summaries.not_recorded(mine.osrt_summary())
    assert "--nsys traced cuda,nvtx" in said and "~3 s" in said
    assert 'GpuMagics.nsys_trace (NsysOptions.trace in a script) = "cuda,nvtx,osrt"' in said
    # osrt was asked for and still not recorded: not told to ask for it again
    asked = load_nsys(nsys_export(tmp_path, *untraced("OSRT_API", "OSRuntime")))
    asked.meta["nsys_trace"] = "cuda,nvtx,osrt"
    said = summaries.not_recorded(asked.osrt_summary())
    assert "GpuMagics" not in said and "osrt,osrt" not in said and "OSRT_API" in said
    assert not trace.recorded("osrt")


def test_empty_kernel_table_after_launches_is_an_error_not_an_idle_gpu(tmp_path):
    trace = load_nsys(
        nsys_export(tmp_path, f"DELETE FROM {KERNEL_TABLE}")
    )  # recorded, and none came back
    report = ProfileReport(trace, timeline=False)
    assert [f.kind for f in report.findings] == ["kernels_dropped"]
    assert "idle" not in str(report)
    assert trace.recorded("kernels")


@pytest.mark.parametrize(
    "drop",
    [
        cats("kernel"),  # the kernel events alone
        cats(
            "kernel",
            "gpu_memcpy",
            "gpu_memset",
            "cuda_runtime",
            "cuda_driver",
            "gpu_user_annotation",
            "ac2g",
        ),
    ],
    ids=["no-kernel-events", "cpu-activity-only"],
)
def test_chrome_trace_without_kernels_says_they_were_not_recorded(tmp_path, drop):
    trace = load_trace(chrome_trace(tmp_path, drop))
    report = ProfileReport(trace, timeline=False)
    text, html = shown(report)
    for out in (text, html):
        assert "did not record CUDA kernels" in out and "'kernel' events" in out
        assert "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]" in out
        assert not BUSY_OR_IDLE.search(out), BUSY_OR_IDLE.search(out)
    assert not trace.recorded("kernels") and "launched no GPU work" not in text
    assert report.findings[0].kind == "kernels_not_recorded"


def test_chrome_trace_without_cuda_api_calls_leaves_op_gpu_time_unknown_not_zero(tmp_path):
    trace = load_trace(chrome_trace(tmp_path, cats("cuda_runtime", "cuda_driver")))
    text, html = shown(ProfileReport(trace, timeline=False))
    assert "did not record CUDA API calls" in text and "ProfilerActivity.CUDA" in text
    assert "CUDA API calls (not recorded)" in html
    ops = trace.op_summary()
    assert (
        not ops.empty and ops["GPU (ns)"].isna().all()
    )  # which op launched what is unknown, not 0 ns
    assert not trace.recorded("api") and trace.recorded("kernels")
    assert "did not record CUDA API calls" in summaries.not_recorded(ops)


def test_chrome_trace_of_a_genuinely_idle_gpu_is_reported_as_such(tmp_path):
    def gpu_work(e):
        cat = str(e.get("cat", "")).lower()
        name = str(e.get("name", ""))
        return cat in ("kernel", "gpu_memset", "gpu_memcpy") or (
            cat in ("cuda_runtime", "cuda_driver")
            and re.match(r"cu(da)?(Launch|Memset|Memcpy)", name)
        )

    trace = load_trace(
        chrome_trace(tmp_path, gpu_work)
    )  # CUDA recorded; the API calls launched nothing
    report = ProfileReport(trace, timeline=False)
    assert trace.recorded("kernels") and trace.recorded("memops") and trace.recorded("api")
    assert [f.kind for f in report.findings] == ["no_gpu_work"]
    assert "not recorded" not in shown(report)[1]


def test_two_ranks_without_kernel_records_give_no_per_rank_busy_table(tmp_path):
    from gpumagic.render.ranks_view import rank_table_html

    from ..analysis.two_ranks import build

    path = build(tmp_path / "two.sqlite")
    con = sqlite3.connect(path)
    con.execute(f"DROP TABLE {KERNEL_TABLE}")
    con.commit()
    con.close()
    trace = load_nsys(path)
    html = rank_table_html(trace)
    assert "No per-rank GPU busy figures" in html and "-t cuda" in html and "gm-ranks" not in html


def test_copies_are_a_share_of_kernel_time_where_memory_operations_were_not_recorded():
    from gpumagic.analysis.kernel_mix import copies
    from gpumagic.trace import frame

    k = [
        dict(
            name="void at::native::copy_kernel<float>()",
            start=0,
            end=60,
            device=0,
            stream=7,
            correlation=1,
        ),
        dict(name="gemm", start=60, end=100, device=0, stream=7, correlation=2),
    ]
    trace = Trace(kernels=frame("kernels", k), meta={"recorded": ["kernels", "api"]})
    (found,) = copies(trace)
    assert "60% of kernel time; memory operations were not recorded" in found.message
