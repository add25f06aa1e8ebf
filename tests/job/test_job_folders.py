"""A job's folder as the multi-host recipe leaves it, and reports that cannot be one job.

Built in a temporary folder from the committed per-rank fixtures (``tests/data/per_rank/``: one nsys
export and one torch.profiler trace per rank of a 2-rank job on 2×H100 where rank 1 runs 20 fp32
GEMMs before an all-reduce that rank 0 enters at once): both kinds per rank in one folder, as demo
09's recipe writes them (``rank%q{RANK}`` from nsys, with its ``.nsys-rep`` beside the ``.sqlite``;
``rank{R}.json`` from torch.profiler); and copies whose clocks, run ids or world sizes say they are
not one job.
"""

from __future__ import annotations

import gzip
import json
import pathlib
import shutil
import sqlite3
import warnings

import pytest

from gpumagic import load_nsys, load_trace
from gpumagic.analysis import findings
from gpumagic.analysis.ranks import rank_figures
from gpumagic.errors import GpuMagicError
from gpumagic.job.reports import JobMismatchWarning, load_reports

from ..helpers import DATA

PER_RANK = DATA / "per_rank"
HOUR = 3600 * 10**9


def chrome_copy(rank: int, dst: pathlib.Path, change=None) -> pathlib.Path:
    data = json.loads(gzip.decompress((PER_RANK / "torch" / f"rank{rank}.json.gz").read_bytes()))
    if change:
        change(data)
    dst.write_text(json.dumps(data))
    return dst


@pytest.fixture
def mixed(tmp_path: pathlib.Path, per_rank_nsys: pathlib.Path) -> pathlib.Path:
    """rank{0,1}.nsys-rep, rank{0,1}.sqlite and rank{0,1}.json in one folder."""
    folder = tmp_path / "job"
    folder.mkdir()
    for rank in (0, 1):
        shutil.copy(per_rank_nsys / f"rank{rank}.sqlite", folder)
        (folder / f"rank{rank}.nsys-rep").write_bytes(b"")  # read from the .sqlite beside it
        chrome_copy(rank, folder / f"rank{rank}.json")
    return folder


def by_kind(trace) -> dict:
    return {f.kind: f for f in findings(trace)}


def test_load_nsys_of_a_mixed_folder_reads_the_exports_and_names_the_traces(mixed):
    t = load_nsys(mixed)
    fig = rank_figures(t)
    assert fig["label"].tolist() == ["rank 0", "rank 1"] and fig["kernels"].tolist() == [1, 21]
    assert t.meta["rank_rule"].startswith("the rank each report records")
    assert [pathlib.Path(s["path"]).name for s in t.meta["skipped"]] == ["rank0.json", "rank1.json"]
    f = by_kind(t)
    note = f["skipped_reports"].message
    assert note.startswith("Left out 2 torch.profiler (Chrome) traces (rank0.json, rank1.json)")
    assert "both kinds for every rank" in note and "not 4 ranks" in note
    assert f"gpumagic.load_trace({str(mixed)!r})" in note
    assert not any(
        k.endswith("not_recorded") for k in f
    )  # the exports record kernels, memops and API calls
    assert f["straggler"].numbers["rank"] == "rank 1"


def test_load_trace_of_a_mixed_folder_reads_the_traces_and_names_the_exports(mixed):
    t = load_trace(mixed)
    assert rank_figures(t)["kernels"].tolist() == [1, 21]
    assert t.meta["backend"] == "torch.profiler"
    assert [pathlib.Path(s["path"]).name for s in t.meta["skipped"]] == [
        "rank0.sqlite",
        "rank1.sqlite",
    ]
    note = by_kind(t)["skipped_reports"].message
    assert note.startswith("Left out 2 nsys exports (rank0.sqlite, rank1.sqlite)")
    assert f"gpumagic.load_nsys({str(mixed)!r})" in note


def test_a_folder_of_the_other_kind_only_says_which_reader_reads_it(per_rank_copy):
    folder = per_rank_copy
    with pytest.raises(
        GpuMagicError, match=r"holds 2 nsys exports and no torch.profiler .* gpumagic.load_nsys"
    ):
        load_trace(folder)
    with pytest.raises(GpuMagicError, match="both nsys exports and Chrome traces"):
        chrome_copy(0, folder / "rank0.json")
        load_reports(folder)


def test_one_job_gives_no_warning(per_rank_nsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error", JobMismatchWarning)
        t = load_nsys(per_rank_nsys)
    assert t.meta["job_mismatch"] == [] and "job_mismatch" not in by_kind(t)


def test_exports_of_two_runs_hours_apart_are_said_not_one_job(per_rank_copy):
    # another torchrun, 204 hours later, on the same host
    con = sqlite3.connect(per_rank_copy / "rank1.sqlite")
    con.execute(f"UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + {204 * HOUR}")
    con.execute(
        "UPDATE META_DATA_CAPTURE SET value = 'TORCHELASTIC_RUN_ID=\"0d1e2f\"' WHERE value "
        "LIKE 'TORCHELASTIC_RUN_ID=%'"
    )
    con.commit()
    con.close()
    with pytest.warns(JobMismatchWarning, match="may not be one job"):
        t = load_nsys(per_rank_copy)
    reasons = t.meta["job_mismatch"]
    assert any(
        r.startswith("their TORCHELASTIC_RUN_ID values differ (deb303e0-") for r in reasons
    ), reasons
    assert (
        "their recorded clocks are 204 hours apart (rank 1 starts 204 hours after rank 0)"
        in reasons
    )
    f = by_kind(t)["job_mismatch"]
    assert f.severity == "warn" and f.message.startswith(
        "These 2 reports may not be one job: their TORCHELASTIC"
    )
    assert findings(t)[0].kind == "job_mismatch"  # said before any figure that compares the ranks


def test_traces_of_different_world_sizes_and_hosts_apart_are_said_not_one_job(tmp_path):
    def other_job(data):
        data["distributedInfo"]["world_size"] = 8
        data["baseTimeNanoseconds"] += 30 * HOUR

    chrome_copy(0, tmp_path / "rank0.json")
    chrome_copy(1, tmp_path / "rank1.json", other_job)
    with pytest.warns(JobMismatchWarning):
        t = load_trace(
            tmp_path
        )  # different hosts as far as the traces say: aligned on the all-reduce, and warned
    reasons = t.meta["job_mismatch"]
    assert "their world sizes differ (2 on rank 0; 8 on rank 1)" in reasons
    assert any(r.startswith("their recorded clocks are 30 hours apart") for r in reasons)


def test_traces_without_a_common_collective_are_said_not_one_job(tmp_path):
    def all_gather(data):
        for ev in data["traceEvents"]:
            if isinstance(ev.get("name"), str) and "AllReduce" in ev["name"]:
                ev["name"] = ev["name"].replace("AllReduce_Sum_f32", "AllGather")

    chrome_copy(0, tmp_path / "rank0.json")
    chrome_copy(1, tmp_path / "rank1.json", all_gather)
    with pytest.warns(JobMismatchWarning):
        t = load_trace(tmp_path)
    assert any(r.startswith("no NCCL collective is common") for r in t.meta["job_mismatch"])
    reading = by_kind(t)["job_files"].message
    assert "clocks as recorded, not aligned (no NCCL collective that every rank ran)" in reading
    assert "over -1 later" not in reading and "(None)" not in reading
