"""--nproc 2 on a host with two GPUs and the real nsys: a DDP step captured on both ranks (each
rank's kernels on its own GPU, its cell range closed, its rank mark inside it), a failing rank named
with its traceback, and a rank hung in NCCL stopped at the timeout; no process of the run is left
behind."""

from __future__ import annotations

import os
import shutil
import sqlite3

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs"),
    pytest.mark.skipif(shutil.which("nsys") is None, reason="needs nsys on PATH"),
]

SETUP = (
    "import torch\n"
    "from torch.nn.parallel import DistributedDataParallel as DDP\n"
    "model = DDP(torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), "
    "torch.nn.Linear(1024, 256))"
    ".to(device), device_ids=[local_rank])\n"
    "x = torch.randn(256, 1024, device=device)\n"
    "buf = torch.ones(1 << 18, device=device)\n"
)
STEP = (
    "model(x).square().mean().backward()\ndist.all_reduce(buf)\nassert W.device == "
    "device\nfloat(buf[0])"
)


def runner_processes() -> list[str]:
    """Live (not zombie) processes running gpumagic's rank runner."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and "gpumagic.capture.child.runner" in args:
            found.append(" ".join(args))
    return found


def test_ddp_step_on_two_ranks_is_captured_on_both(tmp_path):
    from gpumagic.capture.nsys import backend as nsys
    from gpumagic.capture.options import NsysOptions

    opts = NsysOptions(nproc=2, setup=SETUP, profile_dir=str(tmp_path), timeout=240)
    ns = {"W": torch.ones(3, device="cuda:0")}
    cap = nsys.capture(STEP, "cell:ddp2", namespace=ns, warmup=2, iters=1, options=opts)
    # warm-up: 2 all-reduces of ones over 2 ranks (x2 each), then the captured one: 8
    assert repr(cap.value) == "8.0"
    con = sqlite3.connect(cap.files["sqlite"])
    kernels = con.execute(
        "SELECT globalPid >> 24 & 16777215, deviceId, s.value, k.start, k.end FROM "
        "CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = k.shortName"
    ).fetchall()
    pids = sorted({k[0] for k in kernels})
    assert len(pids) == 2, pids
    assert {frozenset(k[1] for k in kernels if k[0] == p) for p in pids} == {
        frozenset({0}),
        frozenset({1}),
    }
    ranges = {
        pid: (start, end)
        for pid, start, end in con.execute(
            "SELECT globalTid >> 24 & 16777215, start, end FROM NVTX_EVENTS WHERE eventType "
            "= 59 AND "
            "COALESCE(text, (SELECT value FROM StringIds WHERE id = textId)) = 'cell:ddp2'"
        )
    }
    assert sorted(ranges) == pids and all(end is not None for _, end in ranges.values())
    nccl = {p: sum("nccl" in k[2].lower() for k in kernels if k[0] == p) for p in pids}
    assert nccl[pids[0]] == nccl[pids[1]] >= 2, (
        nccl
    )  # the gradients' bucket(s) and the explicit all-reduce
    # the capture holds the cell and nothing else: gpumagic's barriers are gloo (no kernel), the
    # warm-up is outside
    outside = [k for k in kernels if not ranges[k[0]][0] <= k[3] <= k[4] <= ranges[k[0]][1]]
    assert not outside, outside[:5]
    marks = dict(
        con.execute(
            "SELECT globalTid >> 24 & 16777215, COALESCE(text, (SELECT value FROM StringIds "
            "WHERE id = textId)) "
            "FROM NVTX_EVENTS WHERE eventType = 34"
        ).fetchall()
    )
    assert sorted(marks.values()) == [f"gpumagic rank={r} local_rank={r} world=2" for r in (0, 1)]
    assert set(marks) == set(pids)
    assert not runner_processes()


def test_a_failing_rank_is_named_and_no_rank_is_left(tmp_path):
    from gpumagic.capture.nsys import backend as nsys
    from gpumagic.capture.options import NsysOptions
    from gpumagic.errors import RankError

    opts = NsysOptions(nproc=2, setup=SETUP, profile_dir=str(tmp_path), timeout=240)
    cell = (
        "if rank == 1:\n    raise RuntimeError('rank 1 fails on "
        "purpose')\ndist.all_reduce(buf)\nfloat(buf[0])"
    )
    with pytest.raises(RankError) as err:
        nsys.capture(cell, "cell:fail", namespace={}, warmup=1, options=opts)
    assert err.value.rank == 1 and "RuntimeError: rank 1 fails on purpose" in err.value.traceback
    assert "raise RuntimeError('rank 1 fails on purpose')" in err.value.traceback
    assert not runner_processes()


def test_a_rank_hung_in_nccl_is_stopped_at_the_timeout(tmp_path):
    from gpumagic.capture.nsys import backend as nsys
    from gpumagic.capture.nsys.ranks import RanksTimeoutError
    from gpumagic.capture.options import NsysOptions

    opts = NsysOptions(nproc=2, setup=SETUP, profile_dir=str(tmp_path), timeout=45)
    cell = (
        "import time\nif rank == 1:\n    "
        "time.sleep(600)\ndist.all_reduce(buf)\ntorch.cuda.synchronize()"
    )
    with pytest.raises(RanksTimeoutError, match="All 2 ranks were stopped"):
        nsys.capture(cell, "cell:hang", namespace={}, warmup=0, options=opts)
    assert not runner_processes()
