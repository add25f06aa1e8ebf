"""The job on a Dask cluster of worker processes reading ``file://`` URLs, its summaries saved as
Parquet and reopened without the raw files, and the second pass that reads a rank again."""

from __future__ import annotations

import os
import shutil

import pandas as pd
import pytest

from gpumagic import load_job, read_job
from gpumagic.job import JobRankError


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    with cluster, distributed.Client(cluster) as c:
        yield c


def test_a_cluster_of_processes_reads_file_urls(synthetic, client):
    urls = [f"file://{synthetic / f'rank{i}.sqlite'}" for i in range(6)]
    on_dask = read_job(urls, client=client)
    here = read_job(synthetic)
    pd.testing.assert_frame_equal(on_dask.rank_figures(), here.rank_figures())
    assert on_dask.waits() == here.waits()
    pd.testing.assert_frame_equal(on_dask.kernel_summary(), here.kernel_summary())
    assert on_dask.featured()["straggler"] == "rank 3"
    # every result was released on the cluster once folded
    assert not [k for k in client.who_has() if str(k).startswith("gpumagic-rank-")]


def test_folds_of_a_few_ranks_on_the_cluster_merged_by_the_client(synthetic, client, monkeypatch):
    from gpumagic.job import on_dask

    monkeypatch.setattr(on_dask, "FOLD_RANKS", 4)  # 6 ranks: a fold of 4, a fold of 2
    on_dask_job = read_job(synthetic, client=client)
    here = read_job(synthetic)
    pd.testing.assert_frame_equal(on_dask_job.rank_figures(), here.rank_figures())
    pd.testing.assert_frame_equal(on_dask_job.api_summary(), here.api_summary())
    assert on_dask_job.waits() == here.waits()
    assert on_dask_job.meta["clock_alignment"] == here.meta["clock_alignment"]
    # the summaries and the folds alike released on the cluster once taken
    assert not [k for k in client.who_has() if str(k).startswith("gpumagic-")]


def test_a_folder_url_on_the_cluster(synthetic, client):
    job = read_job(f"file://{synthetic}", client=client)
    assert len(job.rank_figures()) == 6


def test_parquet_round_trip_and_the_second_pass(synthetic, tmp_path):
    raw = tmp_path / "raw"
    shutil.copytree(synthetic, raw)
    job = read_job(raw)
    saved = job.save(tmp_path / "saved")
    again = load_job(saved)
    pd.testing.assert_frame_equal(job.rank_figures(), again.rank_figures())
    pd.testing.assert_frame_equal(job.kernel_summary(), again.kernel_summary())
    pd.testing.assert_frame_equal(job.kernels_by_rank(), again.kernels_by_rank())
    assert job.meta["clock_alignment"] == again.meta["clock_alignment"]
    assert str(job) == str(again)
    straggler = again.rank(3)  # read again from its file, on the job's clock
    fig = again.rank_figures().set_index("label").loc["rank 3"]
    assert int(straggler.kernels["start"].min()) >= int(fig["start"]) - 10**9
    assert straggler.meta["rank_marks"][0]["rank"] == 3
    for f in os.listdir(raw):
        os.remove(raw / f)
    gone = load_job(saved)
    assert str(gone) == str(job)  # the summaries need no raw file
    with pytest.raises(JobRankError, match="cannot be read again"):
        gone.rank(0)
