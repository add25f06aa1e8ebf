"""One Chrome-trace file holding several ranks, as trace-merging scripts write it (every event
tagged ``args.rank``; pids and correlation ids offset per rank): read as those ranks, with the
figures each rank's own file gives, never as one process on several GPUs. Built here from the two
committed per-rank H100 traces (no merged public file is committed)."""

from __future__ import annotations

import copy
import gzip
import json
import pathlib
from typing import Any

import pytest

from gpumagic.analysis.ranks import processes, rank_figures
from gpumagic.job.merged_ranks import split_by_rank
from gpumagic.job.reports import load_trace
from gpumagic.render.report import ProfileReport

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
RANKS = [DATA / "per_rank" / "torch" / f"rank{r}.json.gz" for r in (0, 1)]
_PROCESS_META = ("process_name", "process_labels", "process_sort_index")


def merged(tag: bool = True) -> dict[str, Any]:
    """The two ranks in one file as a merging script leaves it: process metadata dropped, pids and
    correlation ids offset by rank, ``args.rank`` on every event (``tag``), one header."""
    out, head = [], None
    for r, path in enumerate(RANKS):
        with gzip.open(path) as f:
            data = json.loads(f.read())
        head = head or {
            k: v for k, v in data.items() if k not in ("traceEvents", "distributedInfo")
        }
        for ev in data["traceEvents"]:
            if ev.get("cat") == "Trace" or (
                ev.get("ph") == "M" and ev.get("name") in _PROCESS_META
            ):
                continue
            ev = copy.deepcopy(ev)
            args = ev.setdefault("args", {})
            if tag:
                args["rank"] = r
            if isinstance(ev.get("pid"), int):
                ev["pid"] += r * 100_000
            for key in ("correlation", "External id"):
                if isinstance(args.get(key), int):
                    args[key] += r * 1_000_000
            out.append(ev)
    return {**head, "traceEvents": out}


@pytest.fixture(scope="module")
def per_file():
    return load_trace([str(p) for p in RANKS])


def write(tmp_path: pathlib.Path, data: dict[str, Any]) -> str:
    path = tmp_path / "merged.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_a_merged_file_reads_as_its_ranks_with_each_ranks_own_figures(tmp_path, per_file):
    trace = load_trace(write(tmp_path, merged()))
    assert trace.meta["merged_ranks"] == 2 and "args.rank" in trace.meta["rank_rule"]
    assert processes(trace)["label"].tolist() == ["rank 0", "rank 1"]
    ours, theirs = rank_figures(trace), rank_figures(per_file)
    for col in ("label", "device", "busy_ns", "nccl_ns", "work_ns", "kernels", "nccl_kernels"):
        assert ours[col].tolist() == theirs[col].tolist(), col
    assert ours["span_ns"].tolist() == theirs["span_ns"].tolist()
    text = str(ProfileReport(trace, timeline=False))
    first = text.splitlines()[0]
    assert first.startswith("2 ranks on 2 × NVIDIA H100"), first
    assert "1 process" not in text and "process 0" not in text
    assert "rank 1 is the straggler" in text  # as the per-rank files give it


def test_every_launch_finds_its_own_ranks_kernel(tmp_path):
    trace = load_trace(write(tmp_path, merged()))
    k = trace.kernels
    # each kernel carries the pid of the process that launched it (rank 1's pid is offset)
    by_pid = k.groupby("pid")["name"].count().to_dict()
    assert sorted(by_pid.values()) == [1, 21] and min(by_pid) < 100_000 <= max(by_pid)


def test_untagged_processes_are_split_by_their_launches_and_called_processes(tmp_path, per_file):
    trace = load_trace(write(tmp_path, merged(tag=False)))
    assert trace.meta["merged_ranks"] == 2 and "no event names its rank" in trace.meta["rank_rule"]
    labels = processes(trace)["label"].tolist()
    assert labels == ["process 0", "process 1"]
    busy = sorted(rank_figures(trace)["busy_ns"].tolist())
    assert busy == sorted(rank_figures(per_file)["busy_ns"].tolist())


def test_a_plain_file_is_not_split():
    with gzip.open(RANKS[1]) as f:
        data = json.loads(f.read())
    assert split_by_rank(data["traceEvents"]) is None
    assert "merged_ranks" not in load_trace(str(RANKS[1])).meta


def test_the_parsed_events_are_freed_before_the_collector_is_back_on(tmp_path, monkeypatch):
    """A large file's parsed events (a dict each) are dropped while the garbage collector is still
    paused: switched back on with them alive, its first collection walks every one of them (0.35 s
    of a 140 MB trace's load)."""
    import gc

    from gpumagic.capture.chrome import events as chrome_events

    alive_at_enable = []

    class Watch:
        def __getattr__(self, name):
            return getattr(gc, name)

        def enable(self):
            alive_at_enable.append(gc.get_count()[0])  # tracked objects made since, less freed
            gc.enable()

    n_events = 20_000
    events = [x("user_annotation", f"r{i % 7}", 10.0 * i, 5, 1, 1) for i in range(n_events)]
    path = tmp_path / "many.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(chrome_events, "gc", Watch())
    assert gc.isenabled()
    load_trace(str(path))
    assert gc.isenabled() and len(alive_at_enable) == 1
    assert alive_at_enable[0] < n_events / 2, (alive_at_enable, n_events)


def test_untagged_hip_launches_from_two_processes_are_split(tmp_path):
    """ROCm's launch category (hip_runtime) counts as a launching process, as CUDA's does."""
    events = [
        ev
        for r in range(2)
        for i in range(3)
        for ev in launched("k", 1000.0 + i * 5000, 50, 100 + r, r, r * 1000 + i, "hipLaunchKernel")
    ]
    path = tmp_path / "hip2.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = load_trace(str(path))
    assert trace.meta.get("merged_ranks") == 2


def x(cat: str, name: str, ts: float, dur: float, pid: int, tid: int, **args: Any) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def launched(
    kernel: str,
    ts: float,
    dur: float,
    pid: int,
    device: int,
    corr: int,
    api: str = "cudaLaunchKernel",
    **args: Any,
) -> list[dict]:
    """A launch call of process ``pid`` (``hip*``: ROCm's category) and the kernel it launched on
    ``device``, stream 7, 10 µs later, linked by ``corr``; ``args`` on both."""
    cat = "hip_runtime" if api.startswith("hip") else "cuda_runtime"
    return [
        x(cat, api, ts, 5, pid, 1, correlation=corr, **args),
        x("kernel", kernel, ts + 10, dur, device, 7, device=device, stream=7, correlation=corr,
          **args),
    ]  # fmt: skip


def test_an_nccl_only_file_is_not_told_to_hide_communication_behind_compute(tmp_path):
    nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    events = [
        ev
        for r in range(2)
        for i in range(3)
        for ev in launched(nccl, 1000.0 + i * 5000, 4000, 100 + r, r, r * 1000 + i, rank=r)
    ]
    trace = load_trace(write(tmp_path, {"schemaVersion": 1, "traceEvents": events}))
    report = ProfileReport(trace, timeline=False)
    kinds = {f.kind for f in report.findings}
    assert "comm_exposed" not in kinds
    assert str(report).splitlines()[0].startswith("2 ranks")


def test_one_process_on_two_gpus_says_its_busy_time_is_a_sum(tmp_path):
    events = [
        ev
        for dev in range(2)
        for i in range(2)
        for ev in launched("void gemm_kernel()", 1000.0 + i * 2000, 1500, 1, dev, dev * 10 + i)
    ]
    trace = load_trace(write(tmp_path, {"schemaVersion": 1, "traceEvents": events}))
    first = str(ProfileReport(trace, timeline=False)).splitlines()[0]
    assert "GPU busy 6 ms (summed over its GPUs)" in first, first
