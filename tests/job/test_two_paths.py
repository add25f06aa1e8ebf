"""Two paths, one answer: a job read rank by rank (``gpumagic.read_job``: each rank reduced where
it is read, the summaries folded) gives the figures of the same files stacked into one Trace
(``gpumagic.load_nsys`` / ``load_trace``), exactly where they are exact and within the sketch's
stated error where approximate (medians)."""

from __future__ import annotations

import concurrent.futures as cf
import sqlite3

import numpy as np
import pandas as pd
import pytest

from gpumagic import load_nsys, load_trace, read_job
from gpumagic.analysis import findings
from gpumagic.analysis.rank_kernels import waits_by_rank
from gpumagic.analysis.ranks import kernel_summary_by_rank, rank_figures
from gpumagic.job.sketch import ALPHA

from .conftest import PER_RANK

EXACT = {
    "Total Time (ns)",
    "Instances",
    "Num Calls",
    "Count",
    "Min (ns)",
    "Max (ns)",
    "Total (MB)",
    "Min (MB)",
    "Max (MB)",
}


def same_summary(full: pd.DataFrame, mine: pd.DataFrame, keys: list[str]) -> None:
    """The job's summary equals the Trace's: the same names, exact columns equal, averages and
    standard deviations to float rounding, medians within the sketch's relative error."""
    assert len(full) == len(mine)
    a, b = full.set_index(keys).sort_index(), mine.set_index(keys).sort_index()
    assert list(a.index) == list(b.index)
    for col in a.columns:
        x, y = a[col].astype(float).to_numpy(), b[col].astype(float).to_numpy()
        if col in EXACT:
            np.testing.assert_array_equal(x, y, err_msg=col)
        elif col.startswith("Med"):
            assert np.all(np.abs(y - x) <= ALPHA * np.abs(x) + 1e-9), col
        else:
            np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9, err_msg=col)


def same_job(trace, job) -> None:
    pd.testing.assert_frame_equal(rank_figures(trace), job.rank_figures(), check_dtype=False)
    assert waits_by_rank(trace) == job.waits()
    same_summary(trace.kernel_summary(), job.kernel_summary(), ["Name"])
    same_summary(trace.api_summary(), job.api_summary(), ["Name"])
    same_summary(trace.osrt_summary(), job.osrt_summary(), ["Name"])
    same_summary(trace.nvtx_summary(), job.nvtx_summary(), ["Style", "Range"])
    same_summary(trace.memop_summary(), job.memop_summary(), ["Operation"])
    same_summary(trace.memop_size_summary(), job.memop_size_summary(), ["Operation"])
    by_rank = kernel_summary_by_rank(trace)
    mine = job.kernels_by_rank()
    cols = ["rank", "Name", "Instances", "Total Time (ns)", "Min (ns)", "Max (ns)"]
    a = by_rank[cols].sort_values(["rank", "Name"]).reset_index(drop=True)
    b = mine.assign(Name=mine["Name"].astype(str))[cols].sort_values(["rank", "Name"])
    pd.testing.assert_frame_equal(a, b.reset_index(drop=True), check_dtype=False)
    for key in ("rank_rule", "job_mismatch", "clock_alignment"):
        assert trace.meta[key] == job.meta[key], key
    theirs = {f.kind: f for f in findings(trace)}
    mine_f = {f.kind: f for f in job.findings()}
    for kind in ("job_files", "straggler", "comm_exposed"):
        assert (kind in theirs) == (kind in mine_f), kind
        if kind in theirs:
            assert theirs[kind].message == mine_f[kind].message, kind


def test_the_committed_per_rank_exports(exports):
    trace, job = load_nsys(exports), read_job(exports, executor=cf.ThreadPoolExecutor(2))
    same_job(trace, job)
    assert job.featured() == {"straggler": "rank 1", "fastest": "rank 0"}


def test_the_committed_per_rank_torch_traces():
    trace, job = load_trace(PER_RANK / "torch"), read_job(PER_RANK / "torch", kind="chrome")
    pd.testing.assert_frame_equal(rank_figures(trace), job.rank_figures(), check_dtype=False)
    assert waits_by_rank(trace) == job.waits()
    same_summary(trace.kernel_summary(), job.kernel_summary(), ["Name"])
    assert {f.kind: f for f in job.findings()}["straggler"].numbers["rank"] == "rank 1"


def test_reports_of_different_hosts_are_aligned_alike(exports):
    con = sqlite3.connect(exports / "rank1.sqlite")  # another host, its clock 5 s ahead
    con.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + 5000000000")
    con.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = 'node-2' WHERE name = 'Hostname'")
    con.commit()
    con.close()
    trace, job = load_nsys(exports), read_job(exports)
    assert job.meta["clock_alignment"]["method"] == "the end of the first collective every rank ran"
    same_job(trace, job)


def test_a_synthetic_job_of_two_hosts_and_a_straggler(synthetic):
    trace, job = load_nsys(synthetic), read_job(synthetic)
    same_job(trace, job)
    assert job.featured()["straggler"] == "rank 3"
    assert job.meta["clock_alignment"]["residual_ns"] == 0
    assert len(job.meta["clock_alignment"]["shifts_ns"]) == 6


def test_an_unreadable_file_is_named_and_the_others_fold(exports):
    (exports / "rank2.sqlite").write_bytes(b"not a database" * 100)
    job = read_job(exports)
    assert [u["path"].rsplit("/", 1)[-1] for u in job.meta["unreadable"]] == ["rank2.sqlite"]
    assert job.rank_figures()["label"].tolist() == ["rank 0", "rank 1"]
    f = {x.kind: x for x in job.findings()}
    assert f["unreadable_reports"].message.startswith("1 of 3 reports could not be read")


def test_progress_counts_every_rank(synthetic):
    seen = []
    read_job(
        synthetic, executor=cf.ThreadPoolExecutor(2), progress=lambda d, n: seen.append((d, n))
    )
    assert seen == [(i, 6) for i in range(1, 7)]


def test_a_rank_not_in_the_job_is_named():
    from gpumagic.job import JobRankError

    job = read_job(PER_RANK / "torch", kind="chrome")
    with pytest.raises(JobRankError, match="rank 9 is not in this job"):
        job.rank(9)


def test_load_nsys_of_many_reports_points_to_read_job(exports, monkeypatch):
    from gpumagic.job import report_kinds, reports

    monkeypatch.setattr(report_kinds, "MANY_REPORTS", 1)
    with pytest.warns(reports.ManyReportsWarning, match="read_job"):
        trace = load_nsys(exports)
    assert len(rank_figures(trace)) == 2  # still the one Trace of every rank


def test_load_nsys_of_too_many_reports_stops_before_reading_and_says_read_job(exports, monkeypatch):
    from gpumagic.job import report_kinds, reports

    monkeypatch.setattr(report_kinds, "TOO_MANY_REPORTS", 1)
    read = []
    monkeypatch.setattr(reports, "_read_all", lambda *a, **k: read.append(a) or ([], []))
    with pytest.raises(report_kinds.TooManyReportsError, match=r"gpumagic\.read_job\(path\)"):
        load_nsys(exports)
    assert not read  # nothing read: the machine is not filled first
    job = read_job(exports)  # the advice works on the same files
    assert len(job.ranks) == 2
