"""A whole job's per-rank reports read as one Trace: a directory, a glob or a list of nsys exports
or torch.profiler traces, their ranks, clocks of different hosts aligned, a file that cannot be
read, and the executor.

Fixtures (``tests/data/per_rank/``, ``capture/per_rank.py`` on 2×H100): the straggler step of
``straggler2`` (rank 1 runs 20 fp32 GEMMs, then both all-reduce) captured as a multi-node job
captures it: ``torchrun --no-python nsys profile -o rank%q{RANK}`` (one export per rank) and one
torch.profiler trace per rank.
"""

from __future__ import annotations

import concurrent.futures as cf
import gzip
import json
import os
import pathlib
import sqlite3

import pandas as pd
import pytest

from gpumagic import load_nsys, load_trace
from gpumagic.analysis import findings
from gpumagic.analysis.ranks import kernel_summary_by_rank, rank_figures
from gpumagic.errors import GpuMagicError
from gpumagic.job.reports import expand, is_many, rank_from_name

from ..helpers import DATA

PER_RANK = DATA / "per_rank"


@pytest.fixture(scope="module")
def job(per_rank_nsys):
    return load_nsys(per_rank_nsys)


def test_a_folder_a_glob_and_a_list_give_the_same_job(per_rank_nsys, job):
    folder = per_rank_nsys
    files = sorted(str(p) for p in folder.glob("*.sqlite"))
    for given in (str(folder), str(folder / "rank*.sqlite"), files, tuple(reversed(files))):
        assert is_many(given)
        t = load_nsys(given, executor=cf.ThreadPoolExecutor(2))
        assert t.meta["rank_rule"].startswith("the rank each report records")
        assert rank_figures(t)[["label", "kernels", "busy_ns"]].equals(
            rank_figures(job)[["label", "kernels", "busy_ns"]]
        )
    assert not is_many(files[0])


def test_per_rank_kernel_totals_equal_nsys_stats_of_each_file(job):
    s = kernel_summary_by_rank(job)
    for rank in (0, 1):
        ref = pd.read_csv(PER_RANK / "nsys" / f"rank{rank}.stats_cuda_gpu_kern_sum.csv").set_index(
            "Name"
        )
        mine = s[s["rank"] == rank].set_index("Name")
        assert len(mine) == len(ref)
        for name, row in ref.iterrows():
            assert mine.loc[name, "Total Time (ns)"] == row["Total Time (ns)"], name
            assert mine.loc[name, "Instances"] == row["Instances"], name


def test_the_job_reads_like_the_nproc_capture_of_the_same_work(job, committed_nsys):
    nproc = load_nsys(committed_nsys("straggler2"))
    cols = ["label", "device", "kernels", "nccl_kernels"]
    assert rank_figures(job)[cols].equals(rank_figures(nproc)[cols])  # the same table, row for row
    mine, theirs = rank_figures(job).set_index("label"), rank_figures(nproc).set_index("label")
    assert mine.loc["rank 1", "work_ns"] == pytest.approx(
        theirs.loc["rank 1", "work_ns"], rel=0.01
    )  # the GEMMs
    f = {x.kind: x for x in findings(job)}
    assert f["straggler"].numbers["rank"] == "rank 1" and "Uneven work" in f["straggler"].message
    assert f["job_files"].message.startswith(
        "2 reports read as one job: ranks from the rank each report records"
    )
    assert "one host: clocks shared" in f["job_files"].message


def test_torch_profiler_traces_per_rank(tmp_path):
    t = load_trace(PER_RANK / "torch")
    fig = rank_figures(t)
    assert fig["label"].tolist() == ["rank 0", "rank 1"] and fig["kernels"].tolist() == [1, 21]
    assert t.meta["rank_rule"].startswith("the rank each report records")
    assert {x.kind: x for x in findings(t)}["straggler"].numbers["rank"] == "rank 1"


def chrome_copy(src: pathlib.Path, dst: pathlib.Path, distributed: bool = True) -> None:
    with gzip.open(src) as f:
        data = json.loads(f.read())
    if not distributed:
        data.pop("distributedInfo", None)
    dst.write_text(json.dumps(data))


def test_ranks_from_file_names_else_file_order(tmp_path):
    a, b = tmp_path / "names", tmp_path / "order"
    a.mkdir(), b.mkdir()
    chrome_copy(PER_RANK / "torch" / "rank0.json.gz", a / "trace_7.json", distributed=False)
    chrome_copy(PER_RANK / "torch" / "rank1.json.gz", a / "trace_3.json", distributed=False)
    t = load_trace(a)
    assert t.meta["rank_rule"] == "the rank in each file's name"
    assert rank_figures(t).set_index("label")["kernels"].to_dict() == {"rank 3": 21, "rank 7": 1}
    chrome_copy(PER_RANK / "torch" / "rank0.json.gz", b / "first.json", distributed=False)
    chrome_copy(PER_RANK / "torch" / "rank1.json.gz", b / "second.json", distributed=False)
    t = load_trace(b)
    assert t.meta["rank_rule"].startswith("the order of the files")
    assert rank_figures(t)["kernels"].tolist() == [1, 21]
    assert [
        rank_from_name(p)
        for p in ("rank12.sqlite", "x_rank-4.json.gz", "run_9.json", "plain.sqlite")
    ] == [
        12,
        4,
        9,
        None,
    ]
    # nsys numbers its own reports report1, report2, ...: a count of runs, not ranks
    assert [rank_from_name(p) for p in ("report1.nsys-rep", "report2.sqlite")] == [None, None]
    assert rank_from_name("report_rank3.sqlite") == 3


def test_an_unreadable_file_is_named_and_the_others_load(per_rank_copy):
    folder = per_rank_copy
    (folder / "rank2.sqlite").write_bytes(b"not a database at all" * 100)
    t = load_nsys(folder)
    assert [pathlib.Path(u["path"]).name for u in t.meta["unreadable"]] == ["rank2.sqlite"]
    assert rank_figures(t)["label"].tolist() == ["rank 0", "rank 1"]
    f = {x.kind: x for x in findings(t)}
    assert f["unreadable_reports"].message.startswith(
        "1 of 3 reports could not be read and are left out: rank2.sqlite"
    )
    (folder / "rank0.sqlite").unlink(), (folder / "rank1.sqlite").unlink()
    with pytest.raises(GpuMagicError):  # none readable: the first file's own error
        load_nsys(folder)


def test_an_empty_folder_or_pattern_says_what_it_looked_for(tmp_path):
    with pytest.raises(GpuMagicError, match="in the folder"):
        expand(tmp_path)
    with pytest.raises(GpuMagicError, match="matching the pattern"):
        expand(str(tmp_path / "rank*.sqlite"))


def test_reports_of_different_hosts_are_aligned_on_a_collective(per_rank_copy, job):
    folder = per_rank_copy
    con = sqlite3.connect(folder / "rank1.sqlite")  # another host, its clock 5 s ahead
    con.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + 5000000000")
    con.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = 'node-2' WHERE name = 'Hostname'")
    con.commit()
    con.close()
    raw = load_nsys(folder, align="none")
    assert raw.meta["clock_alignment"]["method"] == "none"
    t = load_nsys(folder)
    clock = t.meta["clock_alignment"]
    assert clock["method"] == "the end of the first collective every rank ran"
    assert clock["collective"] == "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    shift = clock["shifts_ns"]
    pid1 = int(t.kernels.loc[t.kernels["name"].str.contains("xmma"), "pid"].iloc[0])
    assert (
        -5_000_100_000 < shift[pid1] < -4_999_900_000
    )  # the 5 s undone, to within 0.1 ms of the shared clock
    fixed, same = rank_figures(t).set_index("label"), rank_figures(job).set_index("label")
    assert abs(fixed.loc["rank 1", "start"] - same.loc["rank 1", "start"]) < 100_000
    assert {x.kind: x for x in findings(t)}["straggler"].numbers["rank"] == "rank 1"
    assert (
        "clocks aligned on the end of the first collective"
        in {x.kind: x for x in findings(t)}["job_files"].message
    )


def test_a_dask_cluster_reads_the_files_where_dask_is_installed(per_rank_nsys, job):
    distributed = pytest.importorskip("dask.distributed")
    cluster = distributed.LocalCluster(  # the dashboard on a free port: not 8787 in every worker
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
    )
    with cluster, distributed.Client(cluster) as client:
        t = load_nsys(per_rank_nsys, executor=client.get_executor())
    assert rank_figures(t)["kernels"].tolist() == rank_figures(job)["kernels"].tolist()


def test_each_rank_has_its_own_files_device_and_a_kind_one_file_lacks_stays_recorded(tmp_path):
    # two ranks of one job on different GPUs (an H200 and an MI350X, both device 0 in their file),
    # the second rank's file holding no kernel events at all
    with gzip.open(PER_RANK / "torch" / "rank0.json.gz") as f:
        first = json.loads(f.read())
    with gzip.open(PER_RANK / "torch" / "rank1.json.gz") as f:
        second = json.loads(f.read())
    for data, name in ((first, "NVIDIA H200"), (second, "AMD Instinct MI350X")):
        for props in data.get("deviceProperties") or []:
            props["name"] = name
    second["traceEvents"] = [e for e in second["traceEvents"] if e.get("cat") != "kernel"]
    (tmp_path / "rank0.json").write_text(json.dumps(first))
    (tmp_path / "rank1.json").write_text(json.dumps(second))
    t = load_trace(tmp_path)
    assert "kernels" in t.meta["recorded"]
    by_file = {os.path.basename(p): kinds for p, kinds in t.meta["recorded_by_file"].items()}
    assert "kernels" in by_file["rank0.json"]


def test_ranks_on_different_gpus_each_read_their_own_files_device(tmp_path):
    for rank, name in ((0, "NVIDIA H200"), (1, "AMD Instinct MI350X")):
        with gzip.open(PER_RANK / "torch" / f"rank{rank}.json.gz") as f:
            data = json.loads(f.read())
        for props in data.get("deviceProperties") or []:
            props["name"] = name
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(data))
    gpus = rank_figures(load_trace(tmp_path)).set_index("label")["gpu"].to_dict()
    assert gpus == {"rank 0": "NVIDIA H200", "rank 1": "AMD Instinct MI350X"}, gpus
