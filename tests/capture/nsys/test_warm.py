"""``%%gpuprofile --nsys`` with a warm child, against the stand-in nsys (``tests/fake_nsys/nsys``,
which keeps interactive sessions as nsys does): one ``nsys launch`` per kernel, fresh names per
cell, a cell's error as the one-shot run reports it, a new child when what it was started with
changes, the one-shot run when the warm one cannot serve, no process left after the parent dies,
no temporary directory left; and every run's phase breakdown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from gpumagic.capture.child.runner import alive
from gpumagic.capture.nsys import warm as nsys_warm
from gpumagic.capture.nsys.backend import capture
from gpumagic.capture.options import NsysOptions

from ...helpers import FAKE_NSYS, ROOT

torch = pytest.importorskip("torch")


def calls(log, command: str) -> int:
    """How many times the stand-in nsys was run as ``nsys COMMAND``."""
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if line.split(" ", 1)[0] == command)


@pytest.fixture
def warm_env(tmp_path, monkeypatch):
    """The stand-in's log and session state in this test's folder; no warm child after it."""
    log = tmp_path / "nsys.log"
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    monkeypatch.setenv("FAKE_NSYS_MODE", "ok")
    monkeypatch.setenv("FAKE_NSYS_STATE", str(tmp_path / "sessions"))
    monkeypatch.setattr(nsys_warm, "_failed", {})
    nsys_warm.retire_current()  # one started under another environment
    yield log
    nsys_warm.retire_current()


@pytest.fixture
def warm_ip(ip, tmp_path, warm_env):
    ip.run_line_magic("config", f"GpuMagics.nsys_path = {FAKE_NSYS!r}")
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path / 'profiles')!r}")
    ip.log_path = warm_env
    return ip


def options(tmp_path, **kw) -> NsysOptions:
    return NsysOptions(nsys_path=FAKE_NSYS, profile_dir=str(tmp_path / "profiles"), **kw)


# --- reuse
# --------------------------------------------------------------------------------------------------


def test_the_second_cell_reuses_the_child_and_says_so(warm_ip, tmp_path):
    warm_ip.user_ns["marker"] = str(tmp_path / "ran.txt")
    cell = "open(marker, 'a').write('x')"
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 1 -o first", cell)
    first_child = nsys_warm.current_child()
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 1 -o second", cell)
    log = warm_ip.log_path
    assert calls(log, "launch") == 1 and calls(log, "profile") == 0
    assert calls(log, "start") == 2 and calls(log, "stop") == 2 and calls(log, "export") == 2
    assert nsys_warm.current_child() is first_child and first_child.cells == 2
    assert (tmp_path / "ran.txt").read_text() == "xxxx"  # 1 warm-up + 1 captured, twice
    first, second = warm_ip.user_ns["first"], warm_ip.user_ns["second"]
    assert any(n.startswith("Warm child started") for n in first.notes)
    assert any(n.startswith("Warm child reused") for n in second.notes)
    assert "warm child reused" in second.summary_line()
    assert "warm child reused" not in first.summary_line()
    assert len(second.trace.kernels) == 3  # the stand-in's export, read as usual
    # each cell's own report: the start named it, the stop wrote it
    reports = [
        n.split(": ", 1)[1] for r in (first, second) for n in r.notes if n.startswith("report:")
    ]
    assert len(set(reports)) == 2 and all(os.path.exists(p) for p in reports)


def test_each_cell_gets_fresh_copies_of_exactly_its_names(warm_ip, tmp_path):
    out = tmp_path / "seen.txt"
    warm_ip.user_ns.update(marker=str(out), A=torch.arange(3.0), items=[1])
    warm_ip.run_cell_magic(
        "gpuprofile",
        "--nsys -w 0",
        "items.append(2)\nleftover = 5\nA += 1\n"
        "open(marker, 'a').write(f'{sorted(k for k in globals() if not k.startswith(\"__\"))} "
        "{items} {float(A.sum())}\\n')",
    )
    warm_ip.user_ns.update(A=torch.arange(3.0) * 10)
    warm_ip.run_cell_magic(
        "gpuprofile",
        "--nsys -w 0",
        "open(marker, 'a').write(f'{sorted(k for k in globals() if not k.startswith(\"__\"))} "
        "{float(A.sum())}\\n')",
    )
    assert calls(warm_ip.log_path, "launch") == 1
    first, second = out.read_text().splitlines()
    # the first cell saw its inputs and bound its own names; the notebook's list is untouched
    assert first == "['A', 'items', 'leftover', 'marker'] [1, 2] 6.0"
    assert warm_ip.user_ns["items"] == [1]
    # the second cell sees nothing of the first: not its names, not its changes, only its own inputs
    assert second == "['A', 'marker'] 30.0"


def test_the_cells_value_comes_back_from_the_warm_child(warm_ip):
    warm_ip.user_ns["k"] = 20
    for expected in (21, 22):
        warm_ip.user_ns["k"] += 1
        assert repr(warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "k")) == str(expected)
    assert calls(warm_ip.log_path, "launch") == 1


def test_a_cell_error_in_the_warm_child_is_the_cells_error(warm_ip):
    with capture_output() as cap, pytest.raises(UsageError, match="ZeroDivisionError"):
        warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "1 / 0")
    assert "Traceback" in cap.stderr and "1 / 0" in cap.stderr
    assert "gpumagic/capture" not in cap.stderr  # the cell's frames only
    # the child stays: the next cell runs in it
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0 -o rep", "x = 1")
    assert calls(warm_ip.log_path, "launch") == 1
    assert any(n.startswith("Warm child reused") for n in warm_ip.user_ns["rep"].notes)


def test_an_error_in_the_warm_up_starts_no_collection(warm_ip):
    warm_ip.user_ns["n"] = 0
    with capture_output(), pytest.raises(UsageError, match="NameError"):
        warm_ip.run_cell_magic("gpuprofile", "--nsys -w 1", "undefined_name + n")
    assert calls(warm_ip.log_path, "start") == 0


# --- a new child
# --------------------------------------------------------------------------------------------------


def test_changed_nsys_args_start_a_new_child(warm_ip):
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "x = 1")
    old = nsys_warm.current_child()
    args = "--nsys-args '--cuda-memory-usage=true'"
    warm_ip.run_cell_magic("gpuprofile", f"--nsys -w 0 -o rep {args}", "x = 1")
    assert calls(warm_ip.log_path, "launch") == 2
    launches = lines(warm_ip.log_path, "launch")
    assert "--cuda-memory-usage" not in launches[0] and "--cuda-memory-usage=true" in launches[1]
    assert any("--nsys-args changed" in n for n in warm_ip.user_ns["rep"].notes)
    assert not alive(old.pid) and not os.path.exists(old.ctrl)  # the old one is gone
    # the same arguments again: reused
    warm_ip.run_cell_magic("gpuprofile", f"--nsys -w 0 {args}", "x = 1")
    assert calls(warm_ip.log_path, "launch") == 2


def lines(log, command: str) -> list[str]:
    """The stand-in's command lines for ``nsys COMMAND``, in order."""
    return [ln for ln in log.read_text().splitlines() if ln.split(" ", 1)[0] == command]


def test_cells_are_collected_without_cpu_sampling_unless_asked(warm_ip):
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "x = 1")
    (launch,), (start,) = lines(warm_ip.log_path, "launch"), lines(warm_ip.log_path, "start")
    assert "--sample=none" in start.split() and "--cpuctxsw=none" in start.split()
    assert "--sample" not in launch and "--cpuctxsw" not in launch  # start's switches only
    # the user's sampling switches go to each cell's `nsys start`, not to `nsys launch`, and
    # nsys' own default for context switches then follows --sample
    warm_ip.run_cell_magic(
        "gpuprofile", "--nsys -w 0 --nsys-args '-s process-tree --cuda-memory-usage=true'", "x = 1"
    )
    launch, start = lines(warm_ip.log_path, "launch")[1], lines(warm_ip.log_path, "start")[1]
    assert "-s process-tree" in start and "=none" not in start
    assert "process-tree" not in launch and "--cuda-memory-usage=true" in launch


def test_a_changed_environment_starts_a_new_child(warm_ip, monkeypatch):
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "x = 1")
    monkeypatch.setenv("GPUMAGIC_TEST_SETTING", "2")
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0 -o rep", "x = 1")
    assert calls(warm_ip.log_path, "launch") == 2
    assert any("environment changed" in n for n in warm_ip.user_ns["rep"].notes)


def test_a_child_that_died_is_replaced(warm_ip):
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "x = 1")
    child = nsys_warm.current_child()
    os.kill(child.pid, signal.SIGKILL)
    child.launcher.wait(timeout=10)
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0 -o rep", "x = 1")
    assert calls(warm_ip.log_path, "launch") == 2
    assert any("had exited" in n for n in warm_ip.user_ns["rep"].notes)


def test_warm_child_off_runs_nsys_profile_each_time(warm_ip):
    warm_ip.run_line_magic("config", "GpuMagics.nsys_warm_child = False")
    for _ in range(2):
        warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "x = 1")
    assert calls(warm_ip.log_path, "profile") == 2 and calls(warm_ip.log_path, "launch") == 0
    assert nsys_warm.current_child() is None


# --- fallback, timeout
# --------------------------------------------------------------------------------------------------


def test_a_failing_launch_falls_back_to_the_one_shot_run_saying_why(warm_ip, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_MODE", "nolaunch")
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0 -o rep", "x = 1")
    log = warm_ip.log_path
    assert calls(log, "launch") == 1 and calls(log, "profile") == 1
    notes = warm_ip.user_ns["rep"].notes
    why = [n for n in notes if n.startswith("Warm child not used")]
    assert why and "nsys launch exited with status 1" in why[0]
    assert "launch command is not available" in why[0]  # nsys' own words
    assert len(warm_ip.user_ns["rep"].trace.kernels) == 3
    assert nsys_warm.current_child() is None
    # not tried again with the same settings (each try would cost its wait again), and said so
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0 -o rep", "x = 1")
    assert calls(log, "launch") == 1 and calls(log, "profile") == 2
    assert any("could not start earlier" in n for n in warm_ip.user_ns["rep"].notes)


def test_no_report_from_stop_falls_back(warm_ip, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_MODE", "noreport")
    with pytest.raises(UsageError, match=r"capture range .* never opened"):
        warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "x = 1")
    log = warm_ip.log_path.read_text()
    assert "stop --session" in log and "\nprofile " in log  # tried warm, then one-shot


def test_a_cell_past_the_timeout_stops_the_child(warm_ip):
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "x = 1")
    child = nsys_warm.current_child()
    t = time.monotonic()
    with pytest.raises(UsageError, match="did not finish within 2 s"):
        warm_ip.run_cell_magic(
            "gpuprofile", "--nsys -w 0 --timeout 2", "import time; time.sleep(60)"
        )
    assert time.monotonic() - t < 40  # 2 s, then the child stopped (a loaded machine is slow)
    assert nsys_warm.current_child() is None
    assert not alive(child.pid) and child.launcher.poll() is not None


# --- cleanup
# --------------------------------------------------------------------------------------------------


def test_temporary_directories_are_removed(warm_env, tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    opts = options(tmp_path)
    for i in range(2):
        capture("y = x + 1", f"c{i}", namespace={"x": torch.ones(2)}, options=opts, warmup=0)
        # only the child's control folder is left between cells, not a cell's work dir
        assert [p.name.startswith("gpumagic-nsys-warm-") for p in scratch.iterdir()] == [True]
    nsys_warm.retire_current()
    assert list(scratch.iterdir()) == []
    assert not os.listdir(os.environ["FAKE_NSYS_STATE"])  # no session left either


PARENT = r"""
import json, os, sys, time
import torch
from gpumagic.capture.nsys import warm as nsys_warm
from gpumagic.capture.nsys.backend import capture
from gpumagic.capture.options import NsysOptions
capture("y = x * 2", "c", namespace={"x": torch.ones(2)}, warmup=0,
        options=NsysOptions(nsys_path=sys.argv[1], profile_dir=sys.argv[2]))
child = nsys_warm.current_child()
print(json.dumps({"child": child.pid, "launcher": child.launcher.pid, "ctrl": child.ctrl}),
      flush=True)
if sys.argv[3] == "wait":
    time.sleep(600)
"""


def _parent(tmp_path, how: str) -> tuple[subprocess.Popen[str], dict]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT, FAKE_NSYS, str(tmp_path / "profiles"), how],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    line = proc.stdout.readline()
    assert line, "the parent printed nothing"
    return proc, json.loads(line)


def _gone(pids: list[int], limit: float = 15) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def test_no_orphan_after_the_parent_is_killed(warm_env, tmp_path):
    proc, pids = _parent(tmp_path, "wait")
    assert alive(pids["child"]) and alive(pids["launcher"])
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert _gone([pids["child"], pids["launcher"]]), "the warm child outlived its parent"
    assert not os.path.exists(pids["ctrl"])
    assert not os.listdir(os.environ["FAKE_NSYS_STATE"])  # its nsys session ended with it


def test_no_orphan_after_the_parent_exits(warm_env, tmp_path):
    proc, pids = _parent(tmp_path, "exit")  # a kernel shut down or restarted: atexit
    proc.wait(timeout=60)
    proc.stdout.close()
    assert _gone([pids["child"], pids["launcher"]], limit=5)
    assert not os.path.exists(pids["ctrl"])
    assert not os.listdir(os.environ["FAKE_NSYS_STATE"])


# --- phases
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("warm", [False, True])
def test_every_run_has_a_phase_breakdown(warm_env, tmp_path, warm):
    opts = options(tmp_path, warm=warm)
    t = time.perf_counter()
    got = capture("y = x + 1", "c", namespace={"x": torch.ones(2)}, options=opts, warmup=1)
    wall = time.perf_counter() - t
    rows = got.phases.rows
    assert got.trace.meta["phases"] is rows
    for name in ("shipping", "child start", "torch import", "inputs", "warm-up", "capture"):
        assert name in rows, name
    assert "tool stop/flush" in rows and "reading" in rows
    assert all(v >= 0 for v in rows.values())
    assert rows["torch import"] > 0.05  # the child's own import, timed there
    assert got.phases.total <= wall + 0.05  # the phases do not overlap
    order = list(rows)
    assert order.index("shipping") < order.index("child start") < order.index("warm-up")
    assert order.index("warm-up") < order.index("capture") < order.index("reading")
    if warm:
        assert "tool start" in rows and "export" in rows
        again = capture("y = x + 1", "c", namespace={"x": torch.ones(2)}, options=opts)
        assert "child start" not in again.phases.rows and "torch import" not in again.phases.rows
        assert "hand-over" in again.phases.rows
    frame = got.phases.to_dataframe()
    assert list(frame.columns) == ["Phase", "Seconds", "Share"] and len(frame) == len(rows)
    assert abs(frame["Share"].sum() - 1) < 1e-9
    assert "capture" in repr(got.phases) and "<table>" in got.phases._repr_html_()


def test_phases_are_shown_on_request_with_the_report_phase(warm_ip):
    with capture_output() as cap:
        warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0 --phases -o rep", "x = 1")
    shown = [o for o in cap.outputs if str(o.data.get("text/plain", "")).startswith("phase ")]
    assert len(shown) == 1 and "report" in shown[0].data["text/plain"]
    assert warm_ip.user_ns["rep"].trace.meta["phases"]["report"] > 0


def test_phases_go_with_nsys(ip):
    with pytest.raises(UsageError, match="--phases go with --nsys"):
        ip.run_cell_magic("gpuprofile", "--phases", "x = 1")


def test_unshippable_names_stop_before_any_child_is_launched(warm_ip):
    warm_ip.run_cell("numbers = (i for i in range(3))")
    with pytest.raises(UsageError, match="numbers: a generator"):
        warm_ip.run_cell_magic("gpuprofile", "--nsys", "next(numbers)")
    assert calls(warm_ip.log_path, "launch") == 0 and nsys_warm.current_child() is None


def test_a_ctrl_c_during_a_warm_cell_stops_the_child_and_says_so(warm_env, tmp_path):
    import threading

    opts = options(tmp_path)
    capture("x = 1", "c", options=opts, warmup=0)
    child = nsys_warm.current_child()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a kernel
    timer = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt, match="the warm child and its session"):
            capture("import time\ntime.sleep(60)", "c", options=opts, warmup=0)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert nsys_warm.current_child() is None
    assert _gone([child.pid, child.launcher.pid], limit=5)
    assert not os.path.exists(child.ctrl)


def test_a_report_without_the_cells_range_is_not_used(warm_ip, monkeypatch):
    """nsys start answers before the collection records: a report that lacks the cell's NVTX range
    began late. The cell runs the one-shot way, the child is retired and the next one waits
    longer after nsys start."""
    monkeypatch.setattr(nsys_warm, "_settle", 0.1)
    monkeypatch.setenv("FAKE_NSYS_NVTX", "something else")
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0 -o rep", "x = 1")
    log = warm_ip.log_path
    assert calls(log, "launch") == 1 and calls(log, "stop") == 1 and calls(log, "profile") == 1
    notes = warm_ip.user_ns["rep"].notes
    assert any("lacked the cell's NVTX range" in n for n in notes)
    assert nsys_warm.current_child() is None and nsys_warm.settle_seconds() == 0.2
    monkeypatch.delenv("FAKE_NSYS_NVTX")
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0 -o rep", "x = 1")
    assert calls(log, "launch") == 2 and calls(log, "profile") == 1  # warm again
    assert not any(n.startswith("Warm child not used") for n in warm_ip.user_ns["rep"].notes)


def test_the_captured_runs_wait_for_the_collection_to_settle(warm_env, tmp_path, monkeypatch):
    monkeypatch.setattr(nsys_warm, "_settle", 0.4)
    got = capture("x = 1", "c", options=options(tmp_path), warmup=0)
    assert got.phases.rows["tool start"] >= 0.4


def test_turning_the_warm_child_off_ends_it(warm_ip):
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "x = 1")
    child = nsys_warm.current_child()
    warm_ip.run_line_magic("config", "GpuMagics.nsys_warm_child = False")
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0", "x = 1")
    assert nsys_warm.current_child() is None and _gone([child.pid], limit=5)


def test_the_childs_key_names_what_changed(tmp_path, monkeypatch):
    import importlib.metadata

    env = {"A": "1"}
    opts = options(tmp_path)
    key = nsys_warm.child_key(FAKE_NSYS, opts, [], env)
    assert nsys_warm.child_key(FAKE_NSYS, opts, [], dict(env)) == key
    other_python = nsys_warm.child_key(
        FAKE_NSYS, options(tmp_path, python="/other/python"), [], env
    )
    assert nsys_warm._changed(key, other_python) == "python"
    traced = nsys_warm.child_key(FAKE_NSYS, options(tmp_path, trace="cuda,nvtx,osrt"), [], env)
    assert nsys_warm._changed(key, traced) == "trace (-t)"
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "9.9.9")
    assert nsys_warm._changed(key, nsys_warm.child_key(FAKE_NSYS, opts, [], env)) == "torch"
    monkeypatch.undo()
    changed = nsys_warm.child_key(FAKE_NSYS, opts, ["--sample=none"], {"A": "2"})
    assert nsys_warm._changed(key, changed) == "--nsys-args, environment"


def test_no_session_is_left_listed(warm_env, tmp_path):
    capture("x = 1", "c", options=options(tmp_path), warmup=0)
    listed = subprocess.run([FAKE_NSYS, "sessions", "list"], capture_output=True, text=True)
    assert "gpumagic-" in listed.stdout
    nsys_warm.retire_current()
    listed = subprocess.run([FAKE_NSYS, "sessions", "list"], capture_output=True, text=True)
    assert "gpumagic-" not in listed.stdout


def test_a_one_shot_fallback_is_not_checked_for_the_warm_range(warm_ip, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_MODE", "nolaunch")
    monkeypatch.setenv("FAKE_NSYS_NVTX", "something else")  # ignored: the one-shot run's export
    warm_ip.run_cell_magic("gpuprofile", "--nsys -w 0 --label other -o rep", "x = 1")
    assert calls(warm_ip.log_path, "profile") == 1
    assert nsys_warm.settle_seconds() == nsys_warm.SETTLE
