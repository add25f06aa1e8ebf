"""Several processes and GPUs: the reader keeps each row's process and GPU, the per-rank figures and
findings, and the views. Checked on a two-process export BUILT from the committed single-GPU one
(two_ranks.py beside this file says how; no real two-rank export is committed yet), against direct
SQL and an interval union written here, not gpumagic's."""

from __future__ import annotations

import re
import sqlite3

import numpy as np
import pandas as pd
import pytest

from gpumagic import load_nsys
from gpumagic.analysis import findings
from gpumagic.analysis.communication import STRAGGLER_MIN_NS, WAIT_SHARE
from gpumagic.analysis.rank_kernels import kernel_ranks, nccl_waits
from gpumagic.analysis.ranks import is_multi, kernel_summary_by_rank, processes, rank_figures
from gpumagic.render.report import ProfileReport
from gpumagic.trace import Trace, frame
from gpumagic.trace.intervals import overlap_by_group, union_by_group, union_ns

from ..helpers import DATA
from . import two_ranks
from .two_ranks import ALL_GATHER, ALL_REDUCE, LABEL, NSYS, PID_A, PID_B, SHIFT

PID_SQL = "globalPid / 16777216 % 16777216"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> str:
    return two_ranks.build(tmp_path_factory.mktemp("ranks") / "two.sqlite")


@pytest.fixture
def two(built) -> Trace:
    t = load_nsys(built)
    t.meta["label"] = LABEL
    return t


def sql(path: str, query: str) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


# --- an independent computation: plain Python over rows read with SQL
# ---------------------------------------------


def merged(intervals: list[tuple[int, int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def covered(intervals: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in merged(intervals))


def both(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """How long some interval of a and some of b run at once (two-pointer walk over the merged
    lists)."""
    a, b = merged(a), merged(b)
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def by_sql(path: str, pid: int) -> dict[str, int]:
    """One process's range, busy, NCCL and overlap, from the file alone."""
    gpu = sql(
        path,
        f"SELECT k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
        f"ON s.id = k.demangledName "
        f"WHERE {PID_SQL} = {pid}",
    )
    mem = sql(
        path,
        f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE {PID_SQL} = {pid} "
        f"UNION ALL SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE {PID_SQL} = {pid}",
    )
    lo, hi = sql(
        path,
        "SELECT MIN(n.start), MAX(n.end) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = "
        "n.textId "
        f"WHERE COALESCE(n.text, s.value) = '{LABEL}' AND n.globalTid / 16777216 % 16777216 = "
        f"{pid}",
    )[0]
    hi = max([hi] + [e for s, e, *_ in gpu + mem if s >= lo])

    def cut(rows):
        return [(min(max(s, lo), hi), min(max(e, lo), hi)) for s, e, *_ in rows]

    nccl = cut([r for r in gpu if r[2].startswith("nccl")])
    compute = cut([r for r in gpu if not r[2].startswith("nccl")])
    return {
        "start": lo,
        "end": hi,
        "busy": covered(cut(gpu) + cut(mem)),
        "nccl": covered(nccl),
        "overlap": both(nccl, compute),
    }


# --- the reader
# --------------------------------------------------------------------------------------------------


def test_reader_keeps_each_rows_process_and_gpu(built, two):
    assert [p["pid"] for p in two.meta["processes"]] == [PID_A, PID_B]
    assert [g["id"] for g in two.meta["gpus"]] == [0, 1]
    for table, sql_table in (
        ("kernels", "CUPTI_ACTIVITY_KIND_KERNEL"),
        ("memops", "CUPTI_ACTIVITY_KIND_MEMCPY"),
        ("api", "CUPTI_ACTIVITY_KIND_RUNTIME"),
        ("osrt", "OSRT_API"),
    ):
        col = "globalTid" if table in ("api", "osrt") else "globalPid"
        where = " WHERE eventClass = 27" if table == "osrt" else ""
        ref = dict(
            sql(
                built,
                f"SELECT {col} / 16777216 % 16777216, COUNT(*) FROM {sql_table}{where} GROUP BY 1",
            )
        )
        got = getattr(two, table)["pid"].value_counts().to_dict()
        if table == "memops":  # memcpys and memsets
            for pid, n in sql(
                built, f"SELECT {PID_SQL}, COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMSET GROUP BY 1"
            ):
                ref[pid] += n
        assert got == ref, table
    k = two.kernels
    assert set(zip(k["pid"], k["device"])) == {(PID_A, 0), (PID_B, 1)}
    nv = two.nvtx
    assert set(nv.loc[nv["text"] == f":{LABEL}", "pid"]) == {PID_A, PID_B}
    assert two.kernels["pid"].dtype.kind == "i"  # an int column, no Python object per row


def test_ranks_come_from_the_launchers_marks_else_from_process_order(tmp_path, two):
    p = processes(two)
    assert p["label"].tolist() == ["rank 0", "rank 1"] and p["pid"].tolist() == [
        PID_B,
        PID_A,
    ]  # marks, not order
    assert p["world"].tolist() == [2, 2] and p["name"].tolist() == ["python3", "python3"]
    plain = load_nsys(two_ranks.build(tmp_path / "plain.sqlite", marks=False))
    q = processes(plain)
    assert q["label"].tolist() == ["process 0", "process 1"]  # never called ranks without the marks
    assert q["pid"].tolist() == [
        PID_A,
        PID_B,
    ]  # by first GPU activity: the copy runs SHIFT ns later
    assert plain.meta["rank_marks"] == []


def test_a_single_process_export_has_no_ranks(committed_nsys):
    t = load_nsys(committed_nsys("block"))
    assert not is_multi(t) and "rank_marks" not in t.meta
    assert all(
        (getattr(t, table)["pid"] == 810).all()
        for table in ("kernels", "memops", "api", "nvtx", "osrt")
    )
    assert t.gpu_busy_ns() == union_ns(*t._gpu_arrays())


# --- per-rank figures against the file
# --------------------------------------------------------------------------


def test_per_rank_kernel_summaries_equal_sql_per_process(built, two):
    s = kernel_summary_by_rank(two)
    ref = sql(
        built,
        f"SELECT {PID_SQL}, s.value, COUNT(*), SUM(k.end - k.start), MIN(k.end - k.start), "
        f"MAX(k.end - k.start) "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName GROUP "
        "BY 1, 2",
    )
    got = {
        (int(r["pid"]), r["Name"]): (
            int(r["Instances"]),
            int(r["Total Time (ns)"]),
            int(r["Min (ns)"]),
            int(r["Max (ns)"]),
        )
        for _, r in s.iterrows()
    }
    assert got == {(pid, name): tuple(v) for pid, name, *v in ref}
    assert s.groupby("pid")["Time (%)"].sum().round(6).tolist() == [100.0, 100.0]
    assert s["rank_label"].iloc[0] == "rank 0" and s["pid"].iloc[0] == PID_B  # rank order
    whole = two.kernel_summary()  # every process together is still nsys stats' table
    assert int(whole["Instances"].sum()) == int(s["Instances"].sum()) == len(two.kernels)


def test_busy_nccl_and_overlap_equal_an_independent_union(built, two):
    fig = rank_figures(two).set_index("pid")
    for pid in (PID_A, PID_B):
        ref = by_sql(built, pid)
        row = fig.loc[pid]
        assert (row["start"], row["end"]) == (ref["start"], ref["end"])
        assert (row["busy_ns"], row["nccl_ns"], row["overlap_ns"]) == (
            ref["busy"],
            ref["nccl"],
            ref["overlap"],
        )
        assert row["nccl_share"] == pytest.approx(ref["nccl"] / ref["busy"])
        assert row["overlap_share"] == pytest.approx(ref["overlap"] / ref["nccl"])
    # what the fixture was built to hold: on the first process a 4 ms all-reduce inside a GEMM (all
    # of it overlapped) and a 1 ms all-gather after the last kernel; on the copy a 20 ms all-reduce
    # after its last kernel
    a, b = fig.loc[PID_A], fig.loc[PID_B]
    assert (a["nccl_ns"], a["overlap_ns"], a["nccl_kernels"]) == (5_000_000, 4_000_000, 2)
    assert b["nccl_ns"] == 21_000_000 and 0 < b["overlap_ns"] < 1_000_000
    assert (a["device"], b["device"]) == (0, 1) and a["window"] == b["window"] == "nvtx"
    assert (
        b["span_skew_ns"]
        == (4_121_900_000 + SHIFT - b["start"]) - (4_105_700_000 - a["start"])
        == 16_200_000
    )
    assert a["span_skew_ns"] == 0 and b["span_skew"] == pytest.approx(16_200_000 / a["span_ns"])
    assert b["busy_skew_ns"] == b["busy_ns"] - a["busy_ns"] > 0


def test_gpu_busy_is_summed_over_gpus_not_one_union_over_both(two):
    fig = rank_figures(two)
    starts, ends = two._gpu_arrays()
    assert two.gpu_busy_ns() > union_ns(
        starts, ends
    )  # the two GPUs run at the same time: a union would merge them
    k, m = two.kernels, two.memops
    per = sum(
        union_ns(
            np.r_[k.loc[k["pid"] == p, "start"], m.loc[m["pid"] == p, "start"]],
            np.r_[k.loc[k["pid"] == p, "end"], m.loc[m["pid"] == p, "end"]],
        )
        for p in (PID_A, PID_B)
    )
    assert two.gpu_busy_ns() == per
    assert (fig["busy_ns"] <= fig["span_ns"]).all()
    figures = two.figures()
    assert figures["gpus"] == 2
    assert (
        figures["gpu_util"] is None
    )  # one window's wall over two GPUs' busy time would read above 100%


# --- findings
# --------------------------------------------------------------------------------------------------


def test_findings_name_the_exposed_communication_and_the_straggler(two):
    f = {x.kind: x for x in findings(two)}
    # rank 0's 21 ms all-reduce waited 16 ms for rank 1's (4 ms: the transfer); 5 ms moving data is
    # 3% of its GPU work, so no communication finding: the wait is the straggler's
    assert "comm_exposed" not in f
    slow = f["straggler"]
    assert slow.numbers["rank"] == "rank 1" and slow.numbers["wait_ns"] == [16_000_000]
    assert (
        "rank 0 spends 16 ms more inside NCCL" in slow.message
        and "late on the host" in slow.message
    )
    assert "gpu_idle" not in f  # each GPU is busy most of its own range
    assert not any(
        w in x.message for x in f.values() for w in ("protocol", "transport", "LL128", "Simple")
    )


def pair(nccl_a: int, nccl_b: int, work_b: int = 1_000_000) -> Trace:
    """Two processes on two GPUs: 1 ms of compute each (``work_b`` on the second), then an
    all-reduce each."""

    def k(pid, dev, name, start, dur):
        return dict(
            name=name, start=start, end=start + dur, device=dev, stream=7, correlation=0, pid=pid
        )

    rows = [k(1, 0, "gemm_a", 0, 1_000_000), k(2, 1, "gemm_b", 0, work_b)]
    rows += [k(1, 0, ALL_REDUCE, 1_000_000, nccl_a), k(2, 1, ALL_REDUCE, work_b, nccl_b)]
    return Trace(kernels=frame("kernels", rows))


def test_exposed_communication_counts_the_time_moving_data_not_waiting():
    even = {
        x.kind: x for x in findings(pair(3_000_000, 3_000_000))
    }  # the same all-reduce on both: no wait
    comm = even["comm_exposed"]
    assert comm.numbers["ranks"] == ["process 0", "process 1"] and comm.numbers["wait_ns"] == [0, 0]
    assert "process 0 (GPU 0): 3 ms of NCCL moving data (75% of its GPU busy time" in comm.message
    late = {
        x.kind: x for x in findings(pair(3_000_000 + 2_000_000, 3_000_000))
    }  # process 0 waits 2 ms
    comm = late["comm_exposed"]
    assert comm.numbers["nccl_ns"][0] == 3_000_000 and comm.numbers["wait_ns"][0] == 2_000_000
    assert "it also waited 2 ms for other ranks" in comm.message


def test_the_straggler_is_the_rank_with_the_least_nccl_time_past_both_thresholds():
    wait = STRAGGLER_MIN_NS + 100_000
    f = {x.kind: x for x in findings(pair(100_000 + wait, 100_000, work_b=1_000_000))}
    assert f["straggler"].numbers["rank"] == "process 1" and f["straggler"].numbers["wait_ns"] == [
        wait
    ]
    assert "process 0 spends" in f["straggler"].message  # no marks: processes, not ranks
    uneven = {x.kind: x for x in findings(pair(100_000 + wait, 100_000, work_b=1_600_000))}
    msg = uneven["straggler"].message
    assert "against process 0's 1 ms: 600 µs more" in msg and "Uneven work" in msg
    assert uneven["straggler"].numbers["extra_work_ns"] == 600_000
    short = {x.kind for x in findings(pair(100_000 + STRAGGLER_MIN_NS - 1, 100_000))}
    assert "straggler" not in short
    # a wait long enough but under WAIT_SHARE of the waiting rank's range
    t = pair(100_000 + wait, 100_000)
    early = dict(
        name="gemm_a",
        start=-int(2 * wait / WAIT_SHARE),
        end=-1,
        device=0,
        stream=7,
        correlation=0,
        pid=1,
    )
    t.kernels = frame(
        "kernels", pd.concat([t.kernels, frame("kernels", [early])], ignore_index=True)
    )
    assert "straggler" not in {x.kind for x in findings(t)}


def test_idle_gpus_are_named_per_rank_not_as_one_gpu():
    t = pair(100_000, 100_000)
    nvtx = [
        dict(text=":c", start=-9_000_000, end=3_000_000, thread=1, depth=0, pid=p) for p in (1, 2)
    ]
    t.nvtx = frame("nvtx", nvtx)
    t.meta["label"] = "c"
    idle = {x.kind: x for x in findings(t)}["gpu_idle"]
    assert idle.message.startswith(
        "GPUs idle most of the cell's NVTX range in each process, in both processes: process "
        "0 (GPU 0)"
    )
    assert idle.numbers["ranks"] == ["process 0", "process 1"]
    assert (
        idle.numbers["busy_ns"] == [1_100_000, 1_100_000]
        and idle.numbers["wall_ns"] == [12_000_000] * 2
    )


def test_host_waits_are_counted_per_rank_each_without_its_own_closing_sync():
    t = pair(100_000, 100_000)
    api = []
    for pid, waits in ((1, 3), (2, 0)):
        api += [
            dict(
                name="cudaStreamSynchronize",
                start=i * 300_000,
                end=i * 300_000 + 200_000,
                thread=pid,
                pid=pid,
            )
            for i in range(waits)
        ]
        api.append(
            dict(name="cudaDeviceSynchronize", start=1_050_000, end=1_100_000, thread=pid, pid=pid)
        )
    t.api = frame("api", api)
    sync = {x.kind: x for x in findings(t)}["host_sync"]
    assert (
        sync.numbers["ranks"] == ["process 0"]
        and sync.numbers["calls"] == [3]
        and sync.numbers["ns"] == [600_000]
    )
    assert (
        "process 0 3 times (cudaStreamSynchronize ×3), 600 µs" in sync.message
    )  # each one's own sync left out


def test_a_lost_kernel_of_one_process_is_not_hidden_by_anothers_correlation_id():
    ks = [
        dict(name="k", start=0, end=10, device=d, stream=7, correlation=5, pid=p)
        for p, d in ((1, 0), (2, 1))
    ]
    api = [
        dict(name="cudaLaunchKernel", start=0, end=1, thread=1, correlation=c, pid=1)
        for c in (5, 6)
    ]
    api.append(dict(name="cudaLaunchKernel", start=0, end=1, thread=2, correlation=5, pid=2))
    api.append(dict(name="cudaLaunchKernel", start=0, end=1, thread=2, correlation=6, pid=2))
    ks.append(dict(name="k", start=20, end=30, device=1, stream=7, correlation=6, pid=2))
    t = Trace(kernels=frame("kernels", ks), api=frame("api", api))
    missing = {x.kind: x for x in findings(t)}["kernels_missing"]
    assert missing.numbers == {"missing": 1, "launches": 4}


# --- views
# --------------------------------------------------------------------------------------------------


def test_the_two_rank_report_shows_ranks_not_one_gpu(two):
    r = ProfileReport(two, label=LABEL, timeline=False)
    line = r.summary_line()
    assert line.startswith(
        "2 ranks on 2 \u00d7 NVIDIA H100 80GB HBM3 \u00b7 the cell's NVTX range per rank: 140 ms"
    )
    assert " of " not in line.split("\u00b7")[2]  # no "GPU busy X of Y wall" over both GPUs
    html = r.html(None)
    table = html[html.index("<table class='gm-ranks'") :]
    table = table[: table.index("</table>")]
    assert table.count("<tr>") == 3 and "+16.2 ms (12%)" in table and "fastest" in table
    assert html.index("gm-ranks") < html.index("gm-kernels-by-rank")
    df = r.to_dataframe()
    assert {"rank", "rank_label", "pid", "Short", "Family"} <= set(df.columns)
    nccl = df[df["Family"] == "nccl"].set_index(["rank", "Name"])["Total Time (ns)"]
    assert nccl[(0, ALL_REDUCE)] == 20_000_000 and nccl[(1, ALL_REDUCE)] == 4_000_000
    assert nccl[(0, ALL_GATHER)] == nccl[(1, ALL_GATHER)] == 1_000_000
    text = str(r)
    assert "rank 0        1    156 ms" in text and "+16.2 ms (12%)" in text


def test_the_timeline_groups_lanes_by_rank(two):
    from gpumagic.render.timeline import _rows
    from gpumagic.render.timeline_lanes import lanes as _lanes

    labels = [label for label, _, _ in _lanes(two)]
    assert labels == [
        f"rank {r} \u00b7 {lane}"
        for r in (0, 1)
        for lane in ("ranges (thread 810)", "CUDA API (thread 810)", "stream 7", "stream 20")
    ]
    rows, _, _, _, bands = _rows(two, 2000)
    assert len(bands) == 2 and bands[0][1] == bands[1][0]  # one band per rank, touching
    gpu = rows[rows["group"].isin(["nccl"])]
    assert gpu["count"].sum() == 4


def test_the_single_gpu_report_has_no_rank_section(committed_nsys):
    from gpumagic import load_trace

    for t in (
        load_nsys(committed_nsys("block")),
        load_trace(DATA / "torch_block.json.gz"),
    ):
        t.meta["label"] = LABEL
        r = ProfileReport(t, label=LABEL)
        html = r.html(None)
        assert (
            not r.multi
            and "gm-ranks" not in html
            and "rank 0" not in html
            and "by rank" not in html
        )
        assert r.summary_line().startswith(t.meta["device"] + " \u00b7 GPU busy")
        assert "rank" not in r.to_dataframe().columns


def test_one_process_on_two_gpus_is_shown_per_gpu_without_skew():
    from gpumagic import load_trace
    from gpumagic.render.timeline_lanes import lanes as _lanes

    t = load_trace(DATA / "torch_block.json.gz")  # torch.profiler: no process ids
    t.meta["label"] = LABEL
    k = t.kernels.copy()
    k.loc[k.index[::2], "device"] = 1
    t.kernels = k
    r = ProfileReport(t, label=LABEL, timeline=False)
    assert r.multi and r.summary_line().startswith("1 process on 2 \u00d7 NVIDIA H100 80GB HBM3")
    fig = rank_figures(t)
    assert fig["label"].tolist() == ["process 0", "process 0"] and fig["device"].tolist() == [0, 1]
    m = t.memops
    for dev, row in fig.set_index("device").iterrows():
        mine = pd.concat([k[k["device"] == dev], m[m["device"] == dev]])[["start", "end"]]
        assert row["kernels"] == int((k["device"] == dev).sum())
        assert row["busy_ns"] == covered(
            list(mine.itertuples(index=False))
        )  # the window holds every one
    html = r.html(None)
    table = html[html.index("gm-ranks") :].split("</table>")[0]
    assert (
        "fastest" not in table and "skew" not in table
    )  # skew is between processes: none with one
    assert ">Process<" in table  # one unmarked process
    assert (
        ">PID<" not in table and ">NCCL<" not in table
    )  # no process ids in a torch trace, no NCCL kernels
    assert (
        "Per GPU" in html
        and "gm-kernels-by-rank" not in html
        and "rank" not in r.to_dataframe().columns
    )
    lanes = [label for label, _, _ in _lanes(t)]
    assert lanes[-2:] == ["GPU 0 \u00b7 stream 7", "GPU 1 \u00b7 stream 7"]


def test_a_trace_keeps_its_processes_through_json(two):
    back = Trace.from_json(two.to_json())
    pd.testing.assert_frame_equal(rank_figures(back), rank_figures(two))


# --- interval helpers
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("groups", [1, 5])  # one group: a rank's own report, its own path
def test_grouped_unions_and_overlaps_equal_counting_covered_nanoseconds(groups):
    rng = np.random.default_rng(7)
    n = 400
    s = rng.integers(0, 2_000, n)
    e = s + rng.integers(0, 60, n)
    codes = rng.integers(0, groups, n)
    side = rng.random(n) < 0.5
    got = union_by_group(codes, s, e, groups)
    ov = overlap_by_group(
        codes[side], (s[side], e[side]), codes[~side], (s[~side], e[~side]), groups
    )
    for g in range(groups):
        cover_a, cover_b = np.zeros(2_100, bool), np.zeros(2_100, bool)
        for i in np.flatnonzero(codes == g):
            (cover_a if side[i] else cover_b)[s[i] : e[i]] = True
        assert got[g] == (cover_a | cover_b).sum()
        assert ov[g] == (cover_a & cover_b).sum()


# --- the real two-rank capture (tests/data/nsys/ddp2.*: a DDP step on two GPUs)
# ------------------------------------


@pytest.fixture(scope="module")
def ddp2(committed_nsys) -> Trace:
    return load_nsys(committed_nsys("ddp2"))


def test_ddp2_per_rank_kernel_summaries_add_up_to_nsys_stats(ddp2):
    ref = pd.read_csv(NSYS / "ddp2.stats_cuda_gpu_kern_sum.csv").set_index("Name")
    s = kernel_summary_by_rank(ddp2)
    assert s["rank"].nunique() == 2 and processes(ddp2)["label"].tolist() == ["rank 0", "rank 1"]
    summed = s.groupby("Name").agg(
        n=("Instances", "sum"),
        total=("Total Time (ns)", "sum"),
        lo=("Min (ns)", "min"),
        hi=("Max (ns)", "max"),
    )
    assert sorted(summed.index) == sorted(ref.index)
    for name, r in summed.iterrows():  # nsys stats prints one decimal
        want = ref.loc[name]
        assert r["n"] == want["Instances"] and abs(r["total"] - want["Total Time (ns)"]) <= 0.051, (
            name
        )
        assert (r["lo"], r["hi"]) == (want["Min (ns)"], want["Max (ns)"]), name


def test_ddp2_both_ranks_communicate(ddp2):
    fig = rank_figures(ddp2)
    assert fig["label"].tolist() == ["rank 0", "rank 1"] and fig["device"].nunique() == 2
    assert (
        (fig["nccl_ns"] > 0).all()
        and (fig["nccl_share"] > 0).all()
        and (fig["nccl_share"] < 1).all()
    )
    assert (fig["busy_ns"] <= fig["span_ns"]).all()
    line = ProfileReport(ddp2, timeline=False).summary_line()
    assert line.startswith("2 ranks on 2 \u00d7 ") and " of " not in line.split("\u00b7")[2]


def test_a_chrome_trace_of_two_processes_keeps_their_lanes_apart(two, tmp_path):
    from gpumagic.capture.chrome.reader import chrome_trace_events

    events = chrome_trace_events(two)["traceEvents"]
    gpu = {e["pid"] for e in events if e["cat"] == "kernel"}
    assert gpu == {f"GPU \u00b7 pid {PID_A}", f"GPU \u00b7 pid {PID_B}"}
    per_pid = {p: sum(e["pid"] == p for e in events if e["cat"] == "kernel") for p in gpu}
    k = two.kernels
    assert per_pid == {f"GPU \u00b7 pid {p}": int((k["pid"] == p).sum()) for p in (PID_A, PID_B)}


# --- a real straggler (tests/data/nsys/straggler2.*: rank 1 runs 20 fp32 GEMMs, rank 0 waits in the
# all-reduce) ---


@pytest.fixture(scope="module")
def straggler2(committed_nsys) -> Trace:
    return load_nsys(committed_nsys("straggler2"))


def test_straggler2_kernel_summaries_per_rank_add_up_to_nsys_stats(straggler2):
    ref = pd.read_csv(NSYS / "straggler2.stats_cuda_gpu_kern_sum.csv").set_index("Name")
    s = kernel_summary_by_rank(straggler2)
    for name, total in s.groupby("Name")["Total Time (ns)"].sum().items():
        assert total == ref.loc[name, "Total Time (ns)"], name


def test_straggler2_findings_are_per_rank_and_never_a_share_above_the_whole(straggler2):
    f = {x.kind: x for x in findings(straggler2)}
    slow = f["straggler"]
    assert (
        slow.numbers["rank"] == "rank 1"
        and "Uneven work" in slow.message
        and "late on the host" not in slow.message
    )
    assert slow.numbers["extra_work_ns"] > 50_000_000  # the 20 GEMMs: 52.9 ms
    for x in f.values():
        shares = [int(p) for p in re.findall(r"(\d+)%", x.message)]
        assert all(p <= 100 for p in shares), (x.kind, x.message)
    ffma = f["ffma_gemm"]
    assert (
        ffma.numbers["ranks"] == ["rank 1"] and ffma.numbers["share"][0] > 0.99
    )  # of rank 1's kernel time
    assert "rank 1: 52.9 ms, >99% of its kernel time" in ffma.message
    top = f["top_kernels"]
    assert (
        "rank 0: NCCL AllReduce fp32 100%" in top.message
    )  # its 215 µs of transfer, not its 52.9 ms of waiting
    assert "left out: rank 0 52.9 ms" in top.message
    waits = nccl_waits(straggler2)
    places, labels = kernel_ranks(straggler2)
    assert labels == ["rank 0", "rank 1"]
    assert (
        int(waits[places == 1].sum()) == 0
        and 52_000_000 < int(waits[places == 0].sum()) < 54_000_000
    )
    comm = f.get("comm_exposed")
    assert comm is None or comm.numbers["nccl_ns"][0] < 1_000_000  # the transfer, never the wait
