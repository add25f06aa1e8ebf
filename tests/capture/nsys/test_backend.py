"""The nsys path: reading exports (checked row for row against `nsys stats` from the same nsys),
shipping a cell's names, and the orchestration of `%%gpuprofile --nsys` with a stand-in nsys on
every error path."""

from __future__ import annotations

import os
import shutil
import sqlite3

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from gpumagic import load_nsys
from gpumagic.capture.nsys.backend import NsysNotFoundError, find_nsys
from gpumagic.capture.nsys.sqlite import NoCudaDataError, NsysExportError

from ...helpers import DATA, FAKE_NSYS

NSYS = DATA / "nsys"
torch = pytest.importorskip("torch")


REPORTS = [
    ("cuda_gpu_kern_sum", "kernel_summary"),
    ("cuda_api_sum", "api_summary"),
    ("nvtx_sum", "nvtx_summary"),
    ("osrt_sum", "osrt_summary"),
    ("cuda_gpu_mem_time_sum", "memop_summary"),
    ("cuda_gpu_mem_size_sum", "memop_size_summary"),
]


@pytest.mark.parametrize("name", ["matmul", "block"])
@pytest.mark.parametrize("report, method", REPORTS)
def test_summaries_equal_nsys_stats_row_for_row(name, report, method, committed_nsys):
    got = getattr(load_nsys(committed_nsys(name)), method)()
    csv = NSYS / f"{name}.stats_{report}.csv"
    if csv.stat().st_size == 0:  # nsys stats: "SKIPPED: ... does not contain ... data"
        assert got.empty
        return
    ref = pd.read_csv(csv)
    assert list(got.columns) == list(ref.columns)
    assert len(got) == len(ref)
    key = list(ref.columns[-2:]) if report == "nvtx_sum" else [ref.columns[-1]]
    merged = ref.merge(got, on=key, suffixes=("_nsys", "_gm"), validate="one_to_one")
    assert len(merged) == len(ref), "row names differ"
    for col in ref.columns:
        if col in key:
            continue
        a, b = merged[f"{col}_nsys"].astype(float), merged[f"{col}_gm"].astype(float)
        # nsys prints one decimal (three for MB): equal to the printed precision
        tol = 0.0006 if "(MB)" in col else 0.051
        assert ((a - b).abs() <= tol).all(), (col, list(zip(a, b)))
    assert got[got.columns[-1]].tolist() == ref[ref.columns[-1]].tolist() or report == "nvtx_sum"


def test_block_export_contents(committed_nsys):
    t = load_nsys(committed_nsys("block"))
    assert t.meta["device"] == "NVIDIA H100 80GB HBM3" and t.meta["schema_version"] == "3.20.3"
    assert set(t.memops["kind"]) == {"HtoD", "DtoH", "memset"}
    assert {":warmup", ":cell:block", ":qkv", ":ffn"} <= set(t.nvtx["text"])
    assert not t.osrt.empty and t.ops.empty
    inner = t.nvtx[t.nvtx["text"] == ":qkv"]
    assert (inner["depth"] == 1).all()


def test_matmul_capture_holds_only_the_cell(committed_nsys):
    t = load_nsys(committed_nsys("matmul"))
    assert (
        len(t.kernels) == 3
    )  # the three calls inside the range; the warm-up call is outside the capture
    assert t.nvtx["text"].tolist() == [":cell:matmul"]


def test_unreadable_exports_are_explained(tmp_path, committed_nsys):
    zero = tmp_path / "zero.sqlite"
    zero.write_bytes(b"\x00" * 4096)
    with pytest.raises(NsysExportError, match="zeroed file"):
        load_nsys(zero)
    (tmp_path / "text.sqlite").write_text("hello")
    with pytest.raises(NsysExportError, match="not an SQLite file"):
        load_nsys(tmp_path / "text.sqlite")
    old = shutil.copy(committed_nsys("matmul"), tmp_path)
    con = sqlite3.connect(old)
    con.execute("UPDATE META_DATA_EXPORT SET value='2' WHERE name='EXPORT_SCHEMA_VERSION_MAJOR'")
    con.commit()
    con.close()
    with pytest.raises(NsysExportError, match="export schema"):
        load_nsys(old)
    with pytest.raises(NoCudaDataError, match="outside its container"):
        load_nsys(committed_nsys("nocuda"))


def test_find_nsys_says_where_it_looked(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr("gpumagic.capture.nsys.backend._SEARCH", ("/nonexistent/*/nsys",))
    with pytest.raises(
        NsysNotFoundError, match=r"Looked in: PATH, /nonexistent/\*/nsys.*nsys_path='/path/to/nsys'"
    ):
        find_nsys()
    with pytest.raises(NsysNotFoundError, match="configured path '/no/nsys'"):
        find_nsys("/no/nsys")
    assert find_nsys(FAKE_NSYS) == FAKE_NSYS


# --- the magic with the stand-in nsys
# -----------------------------------------------------------------------------


@pytest.fixture
def nsys_ip(ip, tmp_path, monkeypatch):
    log = tmp_path / "nsys.log"
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    monkeypatch.setenv("FAKE_NSYS_MODE", "ok")
    ip.run_line_magic("config", f"GpuMagics.nsys_path = {FAKE_NSYS!r}")
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path / 'profiles')!r}")
    # the one-shot `nsys profile` run; the warm child has tests of its own (test_nsys_warm.py)
    ip.run_line_magic("config", "GpuMagics.nsys_warm_child = False")
    ip.log_path = log
    return ip


def test_nsys_run_ships_variables_runs_the_cell_and_shows_the_report(nsys_ip, tmp_path):
    nsys_ip.user_ns["A"] = torch.arange(4.0)
    nsys_ip.user_ns["marker"] = str(tmp_path / "ran.txt")
    with capture_output() as cap:
        nsys_ip.run_cell_magic(
            "gpuprofile",
            "--nsys -w 2 -o rep --label cell:t --nsys-args '--sample=none'",
            "open(marker, 'a').write(str(float(A.sum())) + '\\n')",
        )
    assert (tmp_path / "ran.txt").read_text().splitlines() == [
        "6.0",
        "6.0",
        "6.0",
    ]  # 2 warm-up + 1 captured
    rep = nsys_ip.user_ns["rep"]
    assert len(rep.trace.kernels) == 3 and rep.trace.meta["backend"] == "nsys"
    assert rep.trace.meta["nsys_trace"] == "cuda,nvtx"  # what the OS-runtime sentence names
    log = nsys_ip.log_path.read_text()
    for piece in (
        "profile -t cuda,nvtx ",
        "--capture-range=nvtx",
        "--nvtx-capture=cell:t",
        "--capture-range-end=stop",
        "--force-overwrite=true",
        "--cuda-graph-trace=node",  # a graph replay's kernels as kernels, not one range
        "--export=sqlite",
        "--sample=none",
        "NSYS_NVTX_PROFILER_REGISTER_ONLY=0",
    ):
        assert piece in log, piece
    paths = [n.split(": ", 1)[1] for n in rep.notes if n.startswith(("report:", "SQLite export:"))]
    assert len(paths) == 2 and all(os.path.exists(p) for p in paths)
    assert "text/html" in cap.outputs[0].data
    assert "A" in nsys_ip.user_ns  # the namespace is left as it was


def test_report_only_is_exported_with_the_same_nsys(nsys_ip, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_MODE", "report")
    nsys_ip.run_cell_magic("gpuprofile", "--nsys -w 0 -o rep", "x = 1")
    assert "export --type sqlite --force-overwrite true" in nsys_ip.log_path.read_text()
    assert len(nsys_ip.user_ns["rep"].trace.kernels) == 3


@pytest.mark.parametrize(
    "mode, message",
    [
        ("noreport", "capture range .* never opened"),
        ("nocuda", "does not contain CUDA trace data"),
        ("fail", "exited with status 1(.|\\n)*failed to start the profiling session"),
        ("newer", "newer Nsight Systems"),
    ],
)
def test_nsys_failures_name_cause_and_fix(nsys_ip, monkeypatch, mode, message):
    monkeypatch.setenv("FAKE_NSYS_MODE", mode)
    with pytest.raises(UsageError, match=message):
        nsys_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "x = 1")


def test_timeout_stops_nsys_and_says_so(nsys_ip, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_MODE", "hang")
    with pytest.raises(UsageError, match="did not finish within 2 s"):
        nsys_ip.run_cell_magic("gpuprofile", "--nsys --timeout 2", "x = 1")


def test_setup_code_runs_in_the_subprocess(nsys_ip, tmp_path):
    nsys_ip.user_ns["marker"] = str(tmp_path / "setup.txt")
    nsys_ip.run_cell_magic(
        "gpuprofile", "--nsys -w 0 --setup 'k = 41'", "open(marker, 'w').write(str(k + 1))"
    )
    assert (tmp_path / "setup.txt").read_text() == "42"


def test_cell_exception_in_the_subprocess_is_the_cells_error(nsys_ip):
    with capture_output() as cap, pytest.raises(UsageError, match="ZeroDivisionError"):
        nsys_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "1 / 0")
    assert "Traceback" in cap.stderr and "1 / 0" in cap.stderr


def test_nsys_not_found_is_a_usage_error(nsys_ip):
    nsys_ip.run_line_magic("config", "GpuMagics.nsys_path = '/nonexistent/nsys'")
    with pytest.raises(UsageError, match=r"%config GpuMagics\.nsys_path = '/path/to/nsys'"):
        nsys_ip.run_cell_magic("gpuprofile", "--nsys", "x = 1")


def test_nsys_only_options_need_nsys(ip):
    with pytest.raises(UsageError, match="go with --nsys"):
        ip.run_cell_magic("gpuprofile", "--setup 'x=1'", "y = 2")


def test_an_export_with_gpu_metrics_reads_as_nsys_stats_and_keeps_its_samples(committed_nsys):
    """A capture with GPU metrics sampled (``tests/data/nsys/gpu_metrics.*``, H200): the reader's
    kernel table is nsys stats' own, and the export holds the metric samples a counters view
    reads (22 metrics at 10 kHz over the cell's range)."""
    import sqlite3

    path = committed_nsys("gpu_metrics")
    got = load_nsys(path).kernel_summary()
    ref = pd.read_csv(NSYS / "gpu_metrics.stats_cuda_gpu_kern_sum.csv")
    assert list(got["Name"]) == list(ref["Name"])
    assert list(got["Instances"]) == list(ref["Instances"]) == [10, 20]
    assert (got["Total Time (ns)"].astype(float) - ref["Total Time (ns)"]).abs().max() <= 0.051
    con = sqlite3.connect(path)
    try:
        names = dict(con.execute("SELECT metricId, metricName FROM TARGET_INFO_GPU_METRICS"))
        (count, first, last) = con.execute(
            "SELECT COUNT(*), MIN(timestamp), MAX(timestamp) FROM GPU_METRICS"
        ).fetchone()
    finally:
        con.close()
    assert len(names) == 22 and "DRAM Read Bandwidth [Throughput %]" in names.values()
    assert "Tensor Active [Throughput %]" in names.values()
    assert count > 10_000 and last - first > 50_000_000  # > 50 ms of samples


def test_counters_ask_nsys_for_gpu_metrics_and_a_report_without_them_says_why(nsys_ip):
    with capture_output():
        nsys_ip.run_cell_magic("gpuprofile", "--nsys --counters -w 0 -o rep", "x = 1")
    assert "--gpu-metrics-devices=all --gpu-metrics-frequency=10000" in nsys_ip.log_path.read_text()
    rep = nsys_ip.user_ns["rep"]
    # the stand-in's export holds no GPU_METRICS, as a GPU without counter permission leaves it
    said = next(n for n in rep.notes if n.startswith("GPU metrics were asked for (--counters)"))
    assert "NVreg_RestrictProfilingToAdminUsers=0" in said and rep.counters().empty
    with pytest.raises(UsageError, match="--counters and --vs go with the other backends"):
        nsys_ip.run_cell_magic("gpuprofile", "--ncu --counters", "x = 1")


def test_counters_leave_a_users_own_gpu_metrics_switches_alone():
    from gpumagic.capture.options import NsysOptions

    own = NsysOptions(counters=True, extra_args="--gpu-metrics-devices=0 --gpu-metrics-set=gh100")
    assert own.tool_args() == ["--gpu-metrics-devices=0", "--gpu-metrics-set=gh100"]
    assert NsysOptions().tool_args() == []


def test_the_fix_a_missing_nsys_names_for_load_nsys_is_its_own_keyword(tmp_path, monkeypatch):
    import re

    import gpumagic
    from gpumagic.capture.nsys import backend as nsys_mod
    from gpumagic.errors import NsysNotFoundError

    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"not really")
    monkeypatch.setattr(nsys_mod, "_SEARCH", [])
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("GPUMAGIC_NSYS", raising=False)
    with pytest.raises(NsysNotFoundError) as info:
        gpumagic.load_nsys(report)
    fix = re.search(r"point to it: (\w+)='/path/to/nsys'", str(info.value))
    assert fix and fix.group(1) == "nsys"
    # the call it names is accepted: the path given is the one looked for
    with pytest.raises(NsysNotFoundError, match="not found at the configured path '/path/to/nsys'"):
        gpumagic.load_nsys(report, **{fix.group(1): "/path/to/nsys"})


def test_an_nsys_2023_export_whose_metadata_table_has_its_older_name_is_read(
    committed_nsys, tmp_path
):
    import shutil
    import sqlite3

    old = tmp_path / "old.sqlite"
    shutil.copy(committed_nsys("gpu_metrics"), old)
    con = sqlite3.connect(old)
    con.execute("ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA")
    con.commit()
    con.close()
    trace = load_nsys(old)
    assert len(trace.kernels) == 30 and trace.meta["nsys_version"]


def test_a_trimmed_export_without_optional_kernel_columns_reads_and_reports(
    committed_nsys, tmp_path
):
    import shutil
    import sqlite3

    from gpumagic.render.report import ProfileReport

    trimmed = tmp_path / "trimmed.sqlite"
    shutil.copy(committed_nsys("gpu_metrics"), trimmed)
    con = sqlite3.connect(trimmed)
    for column in ("registersPerThread", "staticSharedMemory", "dynamicSharedMemory"):
        con.execute(f"ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN {column}")
    con.commit()
    con.close()
    trace = load_nsys(trimmed)
    assert len(trace.kernels) == 30 and set(trace.kernels["registers"]) == {-1}
    assert "cuBLAS nvjet" in str(ProfileReport(trace))  # the report reads, no damaged-file error


def test_a_profile_dir_that_is_a_file_is_refused_before_nsys_runs(nsys_ip, tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("")
    nsys_ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(taken)!r}")
    nsys_ip.user_ns["marker"] = str(tmp_path / "ran.txt")
    fix = r"it is a file, not a directory\)\. Give a directory you can write to: %config GpuMagics"
    with pytest.raises(UsageError, match=fix) as err:  # was FileNotFoundError after the run
        nsys_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "open(marker, 'w')")
    assert str(taken) in str(err.value) and not (tmp_path / "ran.txt").exists()
    assert not nsys_ip.log_path.exists()  # nsys never started


def test_a_profile_dir_without_write_permission_is_refused(tmp_path, monkeypatch):
    from gpumagic.capture.options import ProfileDirError, ready_profile_dir
    from gpumagic.errors import UnwritablePathError

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("tempfile.mkstemp", refused)  # a read-only folder, even for root
    with pytest.raises(ProfileDirError, match="no permission to write there") as err:
        ready_profile_dir(str(tmp_path / "profiles"))
    assert isinstance(err.value, UnwritablePathError) and err.value.path.endswith("profiles")
