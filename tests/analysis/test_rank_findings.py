"""Per-rank findings that follow their own numbers: the straggler's cause from its GPU work against
the other ranks' work and the wait it is to explain (never against its range), every rank of the job
in a per-rank finding, and no "cell" in a report that was loaded from files.

The straggler cases are the committed per-rank job (``tests/data/per_rank/nsys``: rank 1 runs 20
fp32 GEMMs, 52.9 ms, before an all-reduce that rank 0 enters at once and waits 67.4 ms in), copied
and changed in the test: rank 1's process also made a CUDA call 2 s before the step (its range then
holds 2 s of host time), or its GEMMs removed (nothing left for it to be late for on the GPU).
"""

from __future__ import annotations

import pathlib
import re
import sqlite3

import pytest

from gpumagic import load_nsys
from gpumagic.analysis import findings
from gpumagic.analysis.communication import straggler
from gpumagic.analysis.pace import gpu_idle
from gpumagic.analysis.ranks import rank_figures
from gpumagic.trace import Trace, frame

from ..helpers import DATA

PER_RANK = DATA / "per_rank"
EARLY_NS = 2_000_000_000
GEMM = "sgemm_128x64_nn"  # any fp32 GEMM name: the cases below only need non-NCCL work
ALL_REDUCE = (
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
)


def early_cuda_call(path: pathlib.Path) -> None:
    """The process made a CUDA call EARLY_NS before its first recorded one: every row moves EARLY_NS
    later on the session's clock and the session starts EARLY_NS earlier (the same UTC times), and a
    cudaGetDeviceCount opens it."""
    con = sqlite3.connect(path)
    for table, cols in {
        "NVTX_EVENTS": ("start", "end"),
        "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end"),
        "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end"),
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": ("start", "end"),
        "SCHED_EVENTS": ("start",),
        "COMPOSITE_EVENTS": ("start",),
    }.items():
        con.execute(f"UPDATE {table} SET " + ", ".join(f"{c} = {c} + {EARLY_NS}" for c in cols))
    con.execute(f"UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs - {EARLY_NS}")
    name = con.execute("SELECT MAX(id) + 1 FROM StringIds").fetchone()[0]
    con.execute("INSERT INTO StringIds (id, value) VALUES (?, 'cudaGetDeviceCount_v3020')", (name,))
    con.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, "
        "correlationId, nameId, "
        "returnValue) SELECT 1000, 3000, eventClass, globalTid, 0, ?, 0 FROM "
        "CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1",
        (name,),
    )
    con.commit()
    con.close()


def without_gemms(path: pathlib.Path) -> None:
    """Rank 1's GEMMs and their launches gone: it reaches the all-reduce late with no GPU work to
    show for it."""
    con = sqlite3.connect(path)
    gone = (
        "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id "
        "= k.demangledName "
    )
    gone += "WHERE s.value NOT LIKE 'nccl%'"
    con.execute(f"DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId IN ({gone})")
    con.execute(f"DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId IN ({gone})")
    con.commit()
    con.close()


def no_large_within(message: str) -> None:
    """Never "within X of the other ranks'" where X is more than a noise-sized figure."""
    for figure in re.findall(r"within ([\d.]+ (?:ns|µs|ms|s)) of the other ranks", message):
        assert figure.endswith(("ns", "µs")), message


def test_uneven_work_is_said_when_the_extra_work_covers_most_of_the_wait_whatever_the_range(
    per_rank_copy,
):
    folder = per_rank_copy
    early_cuda_call(folder / "rank1.sqlite")
    t = load_nsys(folder)
    fig = rank_figures(t).set_index("label")
    assert fig.loc["rank 1", "span_ns"] > EARLY_NS  # the range holds the 2 s before the step
    f = straggler(t)[0]
    assert f.numbers["rank"] == "rank 1"
    msg = f.message
    assert "Uneven work per rank" in msg and "late on the host" not in msg, msg
    assert (
        "Its GPU work (kernels other than NCCL, and copies) is 52.9 ms against rank 0's 0 "
        "ns: 52.9 ms more, 79%" in msg
    )
    assert "of the 67.4 ms rank 0 waits for it" in msg
    assert f.numbers["extra_share_of_wait"] == pytest.approx(52.9 / 67.4, rel=0.01)
    no_large_within(msg)


def test_the_committed_job_concludes_uneven_work(per_rank_nsys):
    f = straggler(load_nsys(per_rank_nsys))[0]
    assert "52.9 ms more, 79% of the 67.4 ms rank 0 waits for it. Uneven work per rank" in f.message
    no_large_within(f.message)


def test_a_straggler_without_extra_gpu_work_is_late_on_the_host(per_rank_copy):
    folder = per_rank_copy
    without_gemms(folder / "rank1.sqlite")
    t = load_nsys(folder)
    f = straggler(t)[0]
    assert f.numbers["rank"] == "rank 1" and f.numbers["extra_work_ns"] == 0
    assert "is 0 ns against rank 0's 0 ns: the same, against the" in f.message
    assert "So it is late on the host, not on the GPU" in f.message and "Uneven" not in f.message
    no_large_within(f.message)


def synthetic(work: list[int], arrive: list[int]) -> Trace:
    """Ranks that each work ``work[r]`` ns on the GPU, starting at 0, and enter one all-reduce at
    ``arrive[r]`` (the host may be late past its work); the all-reduce ends 100 µs after the last
    arrival."""
    end = max(arrive) + 100_000
    rows, marks = [], []
    for r, (w, a) in enumerate(zip(work, arrive)):
        if w:
            rows.append(
                dict(name=GEMM, start=0, end=w, device=r, stream=7, correlation=1, pid=100 + r)
            )
        rows.append(
            dict(name=ALL_REDUCE, start=a, end=end, device=r, stream=20, correlation=2, pid=100 + r)
        )
        marks.append({"pid": 100 + r, "rank": r, "local_rank": r, "world": len(work)})
    return Trace(kernels=frame("kernels", rows), meta={"rank_marks": marks})


def test_extra_work_covering_part_of_the_wait_splits_it_between_the_gpu_and_the_host():
    ms = 1_000_000
    t = synthetic(
        [10 * ms, 10 * ms, 13 * ms], [10 * ms, 10 * ms, 20 * ms]
    )  # 3 ms of work, 7 ms more on the host
    msg = straggler(t)[0].message
    assert msg.startswith("rank 2 is the straggler")
    assert "the other 2 ranks each spend 10 ms more inside NCCL (50% of their range)" in msg
    assert (
        "is 13 ms against rank 0's 10 ms, the most among the other ranks: 3 ms more, 30% of "
        "the 10 ms" in msg
    )
    assert "Uneven work explains that part; for the other 7 ms it is late on the host" in msg


def test_a_per_rank_finding_accounts_for_every_rank():
    ms = 1_000_000
    n = 8
    # ranks 0-5 work 1 ms of a 10 ms range (idle 90%), ranks 6 and 7 work 9 ms of it
    work = [1 * ms] * 6 + [9 * ms] * 2
    t = synthetic(work, [9 * ms + 50_000] * n)
    msg = gpu_idle(t)[0].message
    assert "in each process, on 6 of 8 ranks: rank 0 (GPU 0) idle 88%" in msg, msg
    assert msg.endswith("; the others: rank 6 busy 99%, rank 7 busy 99% of their range."), msg


def host_wait(path: pathlib.Path, ns: int) -> None:
    """A cudaStreamSynchronize of ``ns`` where the process's cudaDeviceSynchronize starts (its host
    waits twice)."""
    con = sqlite3.connect(path)
    name = con.execute("SELECT MAX(id) + 1 FROM StringIds").fetchone()[0]
    con.execute(
        "INSERT INTO StringIds (id, value) VALUES (?, 'cudaStreamSynchronize_v3020')", (name,)
    )
    con.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, "
        "correlationId, nameId, "
        "returnValue) SELECT r.start, r.start + ?, r.eventClass, r.globalTid, 0, ?, 0 "
        "FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE 'cudaDeviceSynchronize%'",
        (ns, name),
    )
    con.commit()
    con.close()


def test_a_loaded_job_says_no_cell_and_names_every_rank_of_a_host_wait(per_rank_copy):
    folder = per_rank_copy
    host_wait(folder / "rank0.sqlite", 10_000_000)
    t = load_nsys(folder)
    f = {x.kind: x for x in findings(t)}
    msg = f["host_sync"].message
    assert msg.startswith(
        "The host waited for the GPU inside the window on 1 of 2 ranks: rank 0 1 time"
    ), msg
    assert "; the other: rank 1 waited 0% of its range." in msg
    for x in f.values():
        assert "cell" not in x.message.lower(), x.message
