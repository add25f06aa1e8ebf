"""``--nproc N`` on the nsys backend: the command, and the ranks run for real (two CPU ranks of
gpumagic's launcher with gloo, inside the stand-in nsys): the value from rank 0, the rank mark
inside every rank's range, a failing rank's traceback, no process left after a hang, too few GPUs,
no torch.distributed."""

from __future__ import annotations

import os
import pathlib
import signal
import sys
import tempfile
import time

import pytest

from gpumagic.capture.child.runner import RANK_MARK
from gpumagic.capture.nsys import backend as nsys
from gpumagic.capture.nsys import ranks as nsys_ranks
from gpumagic.capture.nsys.rank_launch import RUN_BY_PATH
from gpumagic.capture.options import NsysOptions
from gpumagic.errors import (
    CellError,
    InvalidOptionError,
    NotEnoughGpusError,
    NsysTimeoutError,
    RankError,
    TorchrunMissingError,
)

from ...helpers import FAKE_NSYS, settle

torch = pytest.importorskip("torch")

# A stand-in for the nvtx package: each rank's process logs its ranges and marks to a file of its
# own.
FAKE_NVTX = """
import os
def _log(text):
    with open(os.path.join(os.environ["FAKE_NVTX_DIR"], f"{os.getpid()}.log"), "a") as f:
        f.write(text + "\\n")
def push_range(message=None, **kw): _log("push " + message)
def pop_range(**kw): _log("pop")
def mark(message=None, **kw): _log("mark " + message)
"""


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    """The stand-in nsys, a private temp directory (the run's workdir lands under it: leftovers can
    be looked for), and the logging nvtx module first on the ranks' path."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "nvtx.py").write_text(FAKE_NVTX)
    (tmp_path / "nvtx").mkdir()
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("FAKE_NSYS_MODE", "ok")
    monkeypatch.setenv("FAKE_NSYS_LOG", str(tmp_path / "nsys.log"))
    monkeypatch.setenv("FAKE_NVTX_DIR", str(tmp_path / "nvtx"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "mods"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path


def options(tmp_path: pathlib.Path, **kw) -> NsysOptions:
    return NsysOptions(nsys_path=FAKE_NSYS, profile_dir=str(tmp_path / "profiles"), nproc=2, **kw)


def test_command_for_two_ranks_and_for_one(tmp_path):
    opts = NsysOptions(nproc=2, python="/opt/py/bin/python3")
    cmd = nsys._profile_command("/x/nsys", opts, "cell:t", "/p/stem", "/w/d", ["--sample=none"])
    assert cmd[:4] == ["/x/nsys", "profile", "-t", "cuda,nvtx"]
    assert "--capture-range=cudaProfilerApi" in cmd and "--capture-range-end=stop" in cmd
    assert not any(a.startswith(("--nvtx-capture", "--capture-range=nvtx")) for a in cmd)
    assert cmd[cmd.index("--sample=none") + 1 :] == [
        "/opt/py/bin/python3",
        "-c",
        RUN_BY_PATH,
        str(pathlib.Path(nsys_ranks.__file__).with_name("rank_launch.py")),
        *("2", "/w/d"),
    ]
    # the user's --sample wins; the context switches are still left out
    assert cmd.count("--sample=none") == 1 and "--cpuctxsw=none" in cmd
    lean = nsys._profile_command("/x/nsys", opts, "cell:t", "/p/stem", "/w/d", [])
    assert "--sample=none" in lean and "--cpuctxsw=none" in lean
    asked = ["-s", "process-tree", "--cpuctxsw=process-tree"]
    mine = nsys._profile_command("/x/nsys", opts, "cell:t", "/p/stem", "/w/d", asked)
    assert not any(a.endswith("=none") for a in mine)
    for one in (None, 1):
        single = nsys._profile_command(
            "/x/nsys", NsysOptions(nproc=one), "cell:t", "/p/stem", "/w/d", []
        )
        assert "--capture-range=nvtx" in single and "--nvtx-capture=cell:t" in single
        assert single[-4:] == [sys.executable, "-m", "gpumagic.capture.child.runner", "/w/d"]
        assert "--sample=none" in single and "--cpuctxsw=none" in single  # one process too


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_nproc_must_be_a_whole_number_of_ranks(bad):
    with pytest.raises(
        InvalidOptionError, match=r"nproc must be a whole number of ranks, 1 or more, got"
    ):
        nsys.capture("x = 1", "t", options=NsysOptions(nproc=bad, nsys_path="/no/such/nsys"))


def test_rank_mark_text():
    assert (
        RANK_MARK.format(rank=1, local_rank=0, world_size=4)
        == "gpumagic rank=1 local_rank=0 world=4"
    )


def test_two_ranks_run_the_cell_with_dist_and_rank_0_gives_the_value(run_dir):
    marker = run_dir / "ran"
    cell = (
        "open(f'{marker}.{rank}', 'a').write(str(float(A.sum())) + '\\n')\n"
        "t = torch.ones(2) * (rank + 1)\n"
        "dist.all_reduce(t)\n"
        "(rank, world_size, local_rank, str(device), float(t.sum()))"
    )
    # 'rank' from the notebook is not the rank's own: the runner's wins
    ns = {"A": torch.arange(4.0), "marker": str(marker), "torch": torch, "rank": 99}
    cap = nsys.capture(cell, "cell:two", namespace=ns, warmup=1, options=options(run_dir))
    assert repr(cap.value) == "(0, 2, 0, 'cpu', 6.0)"
    for r in (0, 1):  # one warm-up and one captured run on each rank, with the shipped tensor
        assert (run_dir / f"ran.{r}").read_text().splitlines() == ["6.0", "6.0"]
    assert any("2 ranks" in n for n in cap.notes)
    logs = sorted(p.read_text().splitlines() for p in (run_dir / "nvtx").glob("*.log"))
    assert logs == [
        ["push cell:two", f"mark gpumagic rank={r} local_rank={r} world=2", "pop"] for r in (0, 1)
    ]
    assert "--capture-range=cudaProfilerApi" in (run_dir / "nsys.log").read_text()
    assert not settle(run_dir)


def test_a_ranks_run_is_split_into_phases_by_rank_0s_marks(run_dir):
    """Where the seconds of ``--nproc`` go: nsys', the launcher's and the rank's start, the rank's
    torch import, CUDA, the process group, the inputs, the warm-up, opening the capture together,
    the cell, nsys' stop; every rank writes its marks, rank 0's stand for the run, and the phases
    add up to the capture's wall time."""
    t0 = time.perf_counter()
    cap = nsys.capture(
        "t = torch.ones(2)\ndist.all_reduce(t)",
        "cell:ph",
        namespace={"torch": torch},
        warmup=1,
        options=options(run_dir),
    )
    wall = time.perf_counter() - t0
    rows = list(cap.phases.rows)
    assert rows[:3] == ["shipping", "child start", "torch import"]
    expected = ["CUDA init", "process group", "inputs", "warm-up", "tool start", "capture"]
    assert [r for r in rows if r in expected] == expected  # in the order they happened
    assert rows[-1] == "reading" and "tool stop/flush" in rows
    assert cap.phases.total == pytest.approx(wall, rel=0.15, abs=0.5)
    assert cap.trace.meta["phases"] == cap.phases.rows


def test_a_failing_rank_is_named_with_its_traceback_and_the_others_stop(run_dir):
    cell = "if rank == 1:\n    raise ValueError('rank one fails')\ndist.barrier()"
    with pytest.raises(RankError) as err:
        nsys.capture(cell, "cell:fail", namespace={}, warmup=1, options=options(run_dir))
    e = err.value
    assert isinstance(e, CellError) and e.rank == 1 and e.world_size == 2
    assert str(e).startswith(
        "Rank 1 of 2 raised in the nsys subprocess: ValueError: rank one fails"
    )
    assert (
        "raise ValueError('rank one fails')" in e.traceback
        and "gpumagic/capture" not in e.traceback
    )
    assert not settle(run_dir), "a rank outlived the run"


def test_a_hung_rank_is_stopped_with_nsys_at_the_timeout(run_dir):
    cell = "import time\nif rank == 1:\n    time.sleep(600)\ndist.barrier()"
    started = time.monotonic()
    with pytest.raises(NsysTimeoutError) as err:
        nsys.capture(cell, "cell:hang", namespace={}, warmup=0, options=options(run_dir, timeout=6))
    assert isinstance(err.value, nsys_ranks.RanksTimeoutError)
    assert "did not finish within 6 s" in str(err.value) and "All 2 ranks were stopped" in str(
        err.value
    )
    assert time.monotonic() - started < 6 + 12  # SIGINT, then SIGKILL after 10 s at the latest
    assert not settle(run_dir), "a rank outlived the timeout"


def test_too_few_gpus_stop_before_nsys_starts(run_dir, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with pytest.raises(NotEnoughGpusError) as err:
        nsys.capture("x = 1", "t", options=options(run_dir))
    assert err.value.available == 1 and err.value.nproc == 2
    assert "this process sees 1 GPU(s) (CUDA_VISIBLE_DEVICES=3)" in str(err.value)
    assert "--nproc 1 or fewer" in str(err.value)
    assert not (run_dir / "nsys.log").exists()


def test_a_rank_short_of_gpus_is_reported_as_such(tmp_path):
    (tmp_path / "gpus-rank1.txt").write_text("1")
    (tmp_path / "error-rank0.txt").write_text(
        "Traceback ...\nRuntimeError: connection closed by peer\n"
    )
    err = nsys_ranks.rank_failure(str(tmp_path), 2, "", sys.executable)
    assert isinstance(err, NotEnoughGpusError) and "rank 1 sees 1 GPU(s)" in str(err)


def test_the_first_failing_rank_is_the_cause(tmp_path):
    first, echo = tmp_path / "error-rank3.txt", tmp_path / "error-rank0.txt"
    first.write_text("Traceback\nValueError: the cause\n")
    echo.write_text("Traceback\nRuntimeError: peer closed\n")
    os.utime(first, ns=(1_000_000_000, 1_000_000_000))
    err = nsys_ranks.rank_failure(str(tmp_path), 4, "", sys.executable)
    assert (
        isinstance(err, RankError)
        and err.rank == 3
        and err.world_size == 4
        and "the cause" in str(err)
    )


def test_a_python_without_torch_distributed_is_explained(run_dir, monkeypatch):
    monkeypatch.setattr(torch.distributed, "is_available", lambda: False)
    with pytest.raises(TorchrunMissingError, match=r"torch\.distributed\.is_available"):
        nsys.capture("x = 1", "t", options=options(run_dir))
    monkeypatch.undo()
    bare = "/usr/bin/python3"  # a Python without torch: the launcher itself cannot start
    if not os.path.exists(bare) or os.path.realpath(bare) == os.path.realpath(sys.executable):
        pytest.skip("no second Python here")
    monkeypatch.setenv("FAKE_NSYS_MODE", "ok")
    with pytest.raises(TorchrunMissingError, match=r"No module named 'torch") as err:
        nsys.capture("x = 1", "t", options=options(run_dir, python=bare))
    assert err.value.python == bare


def test_stopping_the_run_reaches_processes_in_sessions_of_their_own(tmp_path):
    """A rank that left the run's process group (start_new_session, as torchrun's ranks did) is
    still found and stopped: done here to a sleeping child."""
    import subprocess

    work = str(tmp_path / "work")
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", work], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 5
        while not nsys_ranks.run_processes(work) and time.monotonic() < deadline:
            time.sleep(0.02)  # until the child has exec'd its own command line
        assert nsys_ranks.run_processes(work) == [child.pid]
        assert nsys_ranks.stop_run_processes(work, signal.SIGKILL, wait=5) == [child.pid]
        assert child.wait(timeout=5) == -signal.SIGKILL
        assert nsys_ranks.run_processes(work) == []
    finally:
        if child.poll() is None:
            child.kill()


# --- the magic
# --------------------------------------------------------------------------------------------------


def test_magic_nproc_goes_with_nsys(ip):
    from IPython.core.error import UsageError

    for line in ("--nproc 2", "--ncu --nproc 2"):
        with pytest.raises(UsageError, match="--nproc goes with --nsys"):
            ip.run_cell_magic("gpuprofile", line, "x = 1")


def test_magic_runs_ranks_and_names_a_failing_one(ip, run_dir):
    from IPython.core.error import UsageError
    from IPython.utils.capture import capture_output

    ip.run_line_magic("config", f"GpuMagics.nsys_path = {FAKE_NSYS!r}")
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(run_dir / 'profiles')!r}")
    with capture_output():
        value = ip.run_cell_magic(
            "gpuprofile", "--nsys --nproc 2 -w 0 -o rep", "(rank, world_size)"
        )
    assert repr(value) == "(0, 2)" and any("2 ranks" in n for n in ip.user_ns["rep"].notes)
    with (
        capture_output() as cap,
        pytest.raises(UsageError, match=r"^Rank 1 of 2 raised .*ZeroDivisionError"),
    ):
        ip.run_cell_magic("gpuprofile", "--nsys --nproc 2 -w 0", "y = 2\n1 / (rank - 1)")
    assert "Traceback" in cap.stderr and "1 / (rank - 1)" in cap.stderr
    assert not settle(run_dir)


def _launched(tmp_path: pathlib.Path, rank_1: str) -> tuple[int, float]:
    """Two ranks through gpumagic's launcher, each a Python script that sleeps 600 s, rank 1 first
    doing ``rank_1`` (``work``: the run's folder): (the launcher's status, its seconds)."""
    from gpumagic.capture.nsys import rank_launch

    rank = tmp_path / "rank.py"
    body = "\n".join("    " + line for line in rank_1.splitlines())
    rank.write_text(
        "import os, sys, time\nwork = sys.argv[-1]\n"
        f"if os.environ['RANK'] == '1':\n{body}\ntime.sleep(600)\n"
    )
    python = tmp_path / "python"  # what the launcher runs "-m gpumagic.capture.child.runner" with
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {rank} "$@"\n')
    python.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    started = time.monotonic()
    status = rank_launch.launch(2, str(work), python=str(python))
    return status, time.monotonic() - started


def test_the_launcher_stops_every_rank_once_one_reports_its_failure(tmp_path):
    """A failing rank whose own exit hangs (a process group's teardown waiting on NCCL) has written
    its error file: the launcher takes that as the failure and stops both ranks, the hung one and
    the one that would wait for it for ever, rather than wait for an exit that never comes."""
    from gpumagic.capture.nsys.rank_launch import GRACE

    status, seconds = _launched(
        tmp_path, "open(os.path.join(work, 'error-rank1.txt'), 'w').write('boom')"
    )
    assert status == 3 and seconds < GRACE + 5
    assert not settle(tmp_path, 1.0)


def test_the_launcher_stops_every_rank_when_one_dies_without_a_word(tmp_path):
    """A rank killed outright (a crash, the OOM killer) writes no error file: its exit status is
    the failure, seen at once whichever rank it is, and the rank left waiting is stopped."""
    from gpumagic.capture.nsys.rank_launch import GRACE

    status, seconds = _launched(tmp_path, "os._exit(7)")
    assert status == 7 and seconds < GRACE + 5
    assert not settle(tmp_path, 1.0)


def test_each_rank_gets_what_a_torchrun_rank_gets():
    from gpumagic.capture.nsys import rank_launch

    env = rank_launch.rank_env(1, 4, 29511, {"PATH": "/bin", "OMP_NUM_THREADS": "8"})
    assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == (
        "1",
        "1",
        "4",
        "4",
    )
    assert env["MASTER_ADDR"] == "127.0.0.1" and env["MASTER_PORT"] == "29511"
    assert env["OMP_NUM_THREADS"] == "8" and env["PATH"] == "/bin"  # the user's own kept
    assert rank_launch.rank_env(0, 2, 1, {})["OMP_NUM_THREADS"] == "1"
