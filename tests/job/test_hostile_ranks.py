"""A job with one bad rank keeps the others and names the bad file (issue 57, round 3)."""

from __future__ import annotations

import pathlib
import shutil

import pytest

from gpumagic.job import JobReadError, read_job

PER_RANK = pathlib.Path(__file__).parents[1] / "data" / "per_rank" / "torch"


def test_a_rank_nested_past_the_parsers_depth_is_named_and_the_others_read(tmp_path):
    for name in ("rank0.json.gz", "rank1.json.gz"):
        shutil.copy(PER_RANK / name, tmp_path)
    (tmp_path / "rank2.json").write_text('{"traceEvents": ' + "[" * 100_000 + "]" * 100_000 + "}")
    job = read_job(tmp_path)  # was RecursionError, no file named
    assert [u["path"].rsplit("/", 1)[-1] for u in job.meta["unreadable"]] == ["rank2.json"]
    assert job.rank_figures()["label"].tolist() == ["rank 0", "rank 1"]


def test_no_reports_at_all_is_said():
    with pytest.raises(JobReadError, match="no reports given"):  # was IndexError
        read_job([])
