"""Faults a user found in the capture path, each pinned by a test: a nested profiler (run in a
subprocess, since it can crash the interpreter), damaged or missing inputs, the cell's last value,
torch's stderr chatter, and Ctrl-C."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from gpumagic import load_nsys, load_trace
from gpumagic.capture.child.runner import alive  # a zombie, dead but not reaped, counts as gone
from gpumagic.errors import (
    FileMissingError,
    GpuMagicError,
    InvalidOptionError,
    NsysExportError,
    TraceFormatError,
)

from ..helpers import DATA, FAKE_NSYS, ROOT

torch = pytest.importorskip("torch")


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter (a crash there cannot take the test runner down)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_clean_exit(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, (
        f"exit status {proc.returncode} (-11 is a segfault)\n{proc.stdout}\n{proc.stderr}"
    )


# --- 1. a profiler inside a profiler
# ------------------------------------------------------------------------------

NESTED_PRELUDE = """
import torch
from torch.profiler import profile
from gpumagic.capture.torch.backend import capture
from gpumagic.errors import NestedProfilerError

def profiler_on():
    return torch.autograd.profiler._is_profiler_enabled or torch._C._autograd._profiler_enabled()
"""


@pytest.mark.parametrize(
    "cell, where",
    [
        (
            "runs.append(1)\nwith torch.profiler.profile() as p:\n    torch.ones(3) + 1",
            "line 2: torch.profiler.profile()",
        ),
        (
            "runs.append(1)\nfrom torch.profiler import profile as P\nwith P():\n    pass",
            "line 3: P()",
        ),
        (
            "runs.append(1)\nimport torch.autograd.profiler as ap\nwith ap.profile():\n    pass",
            "line 3: ap.profile()",
        ),
        (
            "runs.append(1)\nq = profile()\nq.start()\nq.stop()",
            "line 2: profile()",
        ),  # bound in the namespace
        (
            "runs.append(1)\nwith prof:\n    pass",
            "line 2: prof",
        ),  # a profiler object made in an earlier cell
    ],
)
def test_a_cell_that_opens_a_profiler_is_refused_before_it_runs(cell, where):
    proc = run_python(
        NESTED_PRELUDE
        + f"""
ns = {{"torch": torch, "profile": profile, "prof": profile(), "runs": []}}
try:
    capture({cell!r}, "c", namespace=ns, warmup=1)
except NestedProfilerError as exc:
    assert "Drop %%gpuprofile" in str(exc) and {where!r} in str(exc), str(exc)
    assert ns["runs"] == [], ns["runs"]  # refused before any run
    assert not profiler_on()
    print("REFUSED")
"""
    )
    assert_clean_exit(proc)
    assert "REFUSED" in proc.stdout


def test_a_function_named_profile_or_a_profiler_defined_but_not_called_is_not_refused():
    proc = run_python(
        NESTED_PRELUDE
        + """
def profile(x):
    return x
ns = {"torch": torch, "profile": profile}
cap = capture("y = profile(torch.ones(2) + 1)", "c", namespace=ns)
assert float(ns["y"].sum()) == 4.0
# a function the cell defines but does not call opens nothing
later = "def later():\\n    with torch.profiler.profile():\\n        pass\\nz = 1"
capture(later, "c", namespace=ns)
assert ns["z"] == 1
print("RAN")
"""
    )
    assert_clean_exit(proc)
    assert "RAN" in proc.stdout


@pytest.mark.parametrize("warmup", [0, 1])
def test_a_profiler_opened_by_a_function_the_cell_calls_is_refused_without_a_crash(warmup):
    # the cell's source does not show the profiler: the warm-up (w 1) or the capture itself (w 0)
    # catches it
    proc = run_python(
        NESTED_PRELUDE
        + f"""
def helper():
    with profile():
        torch.ones(3) + 1
ns = {{"helper": helper, "torch": torch}}
try:
    capture("helper()", "c", namespace=ns, warmup={warmup})
except NestedProfilerError as exc:
    assert "Drop %%gpuprofile" in str(exc), str(exc)
    print("REFUSED")
assert not profiler_on()
# the process is sound: our capture, and a profiler of the user's, still work
cap = capture("torch.ones(4) * 3", "again", namespace={{"torch": torch}})
assert (cap.trace.ops["name"] == "aten::mul").sum() == 1
with profile() as p:
    torch.ones(2) + 1
p.export_chrome_trace("/dev/null")
print("SOUND")
"""
    )
    assert_clean_exit(proc)
    assert "REFUSED" in proc.stdout and "SOUND" in proc.stdout


def test_gpuprofile_while_a_profiler_runs_is_refused_before_the_cell_runs():
    proc = run_python(
        NESTED_PRELUDE
        + """
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "gpumagic")
ip.user_ns.update(torch=torch, runs=[])
with profile() as outer:
    try:
        capture("runs.append(1)", "c", namespace=ip.user_ns)
    except NestedProfilerError as exc:
        assert "already running" in str(exc), str(exc)
        print("CORE REFUSED")
    try:
        ip.run_cell_magic("gpuprofile", "", "runs.append(1)")
    except UsageError as exc:
        assert "already running" in str(exc) and "%%gpuprofile" in str(exc), str(exc)
        print("MAGIC REFUSED")
    torch.ones(2) + 1
assert ip.user_ns["runs"] == []
outer.export_chrome_trace("/dev/null")  # the user's own profile is intact
print("OUTER OK")
"""
    )
    assert_clean_exit(proc)
    assert (
        "CORE REFUSED" in proc.stdout
        and "MAGIC REFUSED" in proc.stdout
        and "OUTER OK" in proc.stdout
    )


def test_gpuprofile_magic_names_the_inner_profiler_and_the_fix():
    proc = run_python(
        """
import torch
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "gpumagic")
ip.user_ns["torch"] = torch
try:
    cell = "x = 1\\nwith torch.profiler.profile():\\n    y = torch.ones(2)"
    ip.run_cell_magic("gpuprofile", "", cell)
except UsageError as exc:
    msg = str(exc)
    assert "torch.profiler.profile" in msg and "Drop %%gpuprofile" in msg, msg
    assert "x" not in ip.user_ns
    print("REFUSED")
"""
    )
    assert_clean_exit(proc)
    assert "REFUSED" in proc.stdout


# --- 2. damaged, missing and malformed inputs
# -----------------------------------------------------------------------


@pytest.fixture
def truncated_sqlite(tmp_path):
    """The committed matmul export cut short, as an export interrupted mid-write leaves it."""
    with gzip.open(DATA / "nsys" / "matmul.sqlite.gz") as f:
        content = f.read()
    path = tmp_path / "truncated.sqlite"
    path.write_bytes(content[: len(content) // 2])
    return path


def test_a_truncated_sqlite_export_is_explained(truncated_sqlite):
    with pytest.raises(NsysExportError, match="truncated") as info:
        load_nsys(truncated_sqlite)
    assert "nsys export" in str(info.value)  # the fix: export again


def test_a_damaged_sqlite_export_is_explained(tmp_path):
    with gzip.open(DATA / "nsys" / "matmul.sqlite.gz") as f:
        content = bytearray(f.read())
    content[4096:12288] = os.urandom(8192)  # pages after the header scrambled
    path = tmp_path / "damaged.sqlite"
    path.write_bytes(bytes(content))
    with pytest.raises(NsysExportError, match="damaged"):
        load_nsys(path)


def test_a_missing_report_is_said_missing_before_looking_for_nsys(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr("gpumagic.capture.nsys.backend._SEARCH", ())
    missing = tmp_path / "gone.nsys-rep"
    with pytest.raises(FileMissingError, match=r"gone\.nsys-rep does not exist") as info:
        load_nsys(missing)
    assert isinstance(info.value, FileNotFoundError) and info.value.path == str(missing)
    with pytest.raises(FileMissingError, match=r"gone\.sqlite does not exist"):
        load_nsys(tmp_path / "gone.sqlite")
    with pytest.raises(FileMissingError, match=r"gone\.json does not exist"):
        load_trace(tmp_path / "gone.json")


def test_unbalanced_quote_in_nsys_args_is_refused_before_any_work(tmp_path, monkeypatch):
    from gpumagic.capture.nsys import backend as nsys
    from gpumagic.capture.options import NsysOptions

    log = tmp_path / "nsys.log"
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    opts = NsysOptions(
        nsys_path=FAKE_NSYS, profile_dir=str(tmp_path / "p"), extra_args='--sample="none'
    )
    with pytest.raises(InvalidOptionError, match="closing quotation"):
        nsys.capture("x = 1", "c", options=opts)
    assert not log.exists() and not (tmp_path / "p").exists()


def test_unbalanced_quotes_in_the_magic_line_are_usage_errors(ip, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_LOG", str(tmp_path / "nsys.log"))
    ip.run_line_magic("config", f"GpuMagics.nsys_path = {FAKE_NSYS!r}")
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path / 'p')!r}")
    with pytest.raises(UsageError, match=r"--nsys-args.*closing quotation"):
        ip.run_cell_magic("gpuprofile", "--nsys --nsys-args '--sample=\"none'", "x = 1")
    with pytest.raises(UsageError, match="closing quotation"):
        ip.run_cell_magic("gpuprofile", "--label 'abc", "x = 1")
    assert not (tmp_path / "nsys.log").exists() and not (tmp_path / "p").exists()
    assert "x" not in ip.user_ns


def test_json_without_trace_events_is_not_a_trace(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"name": "not a trace", "events": [1, 2]}))
    with pytest.raises(TraceFormatError, match=r"other\.json.*traceEvents"):
        load_trace(path)
    path.write_text("[1, 2, 3]")  # a list of non-events is not a trace either
    with pytest.raises(TraceFormatError, match=r"other\.json"):
        load_trace(path)
    path.write_text(json.dumps({"traceEvents": []}))  # an empty trace is a trace
    assert load_trace(path).kernels.empty


def test_unwritable_trace_path_is_refused_before_the_capture(ip, tmp_path):
    ip.user_ns["runs"] = []
    for bad in (tmp_path / "no" / "such" / "dir" / "t.json", tmp_path):
        with capture_output() as cap, pytest.raises(UsageError, match="--trace: cannot write"):
            ip.run_cell_magic("gpuprofile", f"-o rep --trace {bad}", "runs.append(1)")
        assert not cap.outputs
    assert ip.user_ns["runs"] == [] and "rep" not in ip.user_ns


def test_the_report_is_kept_even_when_writing_the_trace_fails_late(ip, tmp_path, monkeypatch):
    from gpumagic.render.report import ProfileReport

    def fail(self, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ProfileReport, "to_chrome_trace", fail)
    with capture_output(), pytest.raises(UsageError, match="No space left on device"):
        ip.run_cell_magic("gpuprofile", f"-w 0 -o rep --trace {tmp_path / 't.json'}", "1 + 1")
    assert isinstance(ip.user_ns["rep"], ProfileReport)


# --- 3. the cell's last expression is shown
# -------------------------------------------------------------------------


def test_the_last_expression_of_the_last_captured_run_is_the_cells_value(ip):
    ip.user_ns["runs"] = []
    with capture_output() as cap:
        res = ip.run_cell("%%gpuprofile -w 1 -n 2 --no-timeline\nruns.append(1)\nlen(runs) * 10")
    assert res.success and res.result == 30  # the third run: one warm-up and two captured
    assert ip.user_ns["_"] == 30
    assert "text/html" in cap.outputs[0].data  # the report first, then the value as Out[n]
    assert "30" in cap.stdout


def test_a_trailing_semicolon_hides_the_value_and_statements_have_none(ip):
    ip.user_ns["runs"] = []
    with capture_output():
        res = ip.run_cell("%%gpuprofile -w 0 --no-timeline\nruns.append(1)\nlen(runs);")
    assert res.success and res.result is None
    with capture_output():
        res = ip.run_cell("%%gpuprofile -w 0 --no-timeline\nz = len(runs)")
    assert res.success and res.result is None and ip.user_ns["z"] == 1


def test_the_last_expression_is_part_of_the_profiled_work(ip):
    ip.user_ns["x"] = torch.ones(8)
    with capture_output():
        ip.run_cell("%%gpuprofile -w 0 -o rep --no-timeline\nx * 2")
    assert (ip.user_ns["rep"].trace.ops["name"] == "aten::mul").sum() == 1
    assert torch.equal(ip.user_ns["_"], torch.ones(8) * 2)


def test_the_nsys_cell_value_is_shown_as_the_subprocess_printed_it(ip, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_MODE", "ok")
    ip.run_line_magic("config", f"GpuMagics.nsys_path = {FAKE_NSYS!r}")
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path / 'p')!r}")
    ip.user_ns["A"] = torch.arange(4.0)
    with capture_output() as cap:
        res = ip.run_cell("%%gpuprofile --nsys -w 0 --no-timeline\nA.sum() * 2")
    assert res.success and repr(res.result) == "tensor(12.)"
    assert "tensor(12.)" in cap.stdout


# --- 4. torch's C-level stderr chatter
# ------------------------------------------------------------------------------


def test_profiler_chatter_on_fd2_is_dropped_and_the_cells_own_stderr_kept(capfd, monkeypatch):
    import torch.profiler as tp

    from gpumagic.capture.torch.backend import capture

    real = tp.profile

    class Chatty(real):
        def start(self):
            os.write(
                2,
                b"USDT:2025-01-01 00:00:00 1:1 SyncActivityProfilerHandler.cpp:52] "
                b"profiler_start\n",
            )
            os.write(
                2,
                b"STAGE:2025-01-01 00:00:00 1:1 ActivityProfilerController.cpp:312] Completed "
                b"Stage: Warm Up\n",
            )
            super().start()

        def stop(self):
            super().stop()
            os.write(
                2,
                b"USDT:2025-01-01 00:00:00 1:1 SyncActivityProfilerHandler.cpp:59] profiler_stop\n",
            )
            os.write(2, b"something the user must see\n")

    monkeypatch.setattr(tp, "profile", Chatty)
    ns = {"os": os, "torch": torch}
    capture(
        "os.write(2, b'the cell says hello\\n')\nprint('py stderr', file=__import__('sys').stderr)",
        "c",
        namespace=ns,
    )
    err = capfd.readouterr().err
    assert "USDT" not in err and "profiler_start" not in err and "Completed Stage" not in err
    assert err.count("the cell says hello") == 2  # one warm-up run, one captured run
    assert err.count("py stderr") == 2
    assert "something the user must see" in err


def test_the_real_profilers_usdt_lines_do_not_reach_stderr(capfd):
    from gpumagic.capture.torch.backend import capture

    capture("torch.ones(2) + 1", "c", namespace={"torch": torch}, warmup=0)
    assert "USDT" not in capfd.readouterr().err


# --- 5. Ctrl-C
# --------------------------------------------------------------------------------------------------


def test_interrupt_in_the_cell_stops_the_profiler_pops_nvtx_says_so_and_reraises(ip, monkeypatch):
    import nvtx

    depth = {"n": 0}
    monkeypatch.setattr(nvtx, "push_range", lambda *a, **k: depth.__setitem__("n", depth["n"] + 1))
    monkeypatch.setattr(nvtx, "pop_range", lambda *a, **k: depth.__setitem__("n", depth["n"] - 1))
    with capture_output() as cap, pytest.raises(KeyboardInterrupt):
        ip.run_cell_magic("gpuprofile", "-w 0 -o rep", "raise KeyboardInterrupt")
    assert "interrupted" in cap.stderr and "no profiler is left running" in cap.stderr
    assert not cap.outputs and "rep" not in ip.user_ns
    assert depth["n"] == 0
    assert (
        not torch.autograd.profiler._is_profiler_enabled
        and not torch._C._autograd._profiler_enabled()
    )


@pytest.fixture
def ctrl_c():
    """Python's own SIGINT handler (KeyboardInterrupt), as in a notebook's kernel, whatever the run
    inherited: started from a background job of a non-interactive shell, it ignores SIGINT."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_during_the_profilers_stop_waits_until_it_has_stopped(monkeypatch, ctrl_c):
    import torch.profiler as tp

    from gpumagic.capture.torch.backend import capture

    real = tp.profile
    stopped = []

    class SlowStop(real):
        def stop(self):
            os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl-C while the profiler stops
            time.sleep(0.05)
            super().stop()
            stopped.append(True)

    monkeypatch.setattr(tp, "profile", SlowStop)
    with pytest.raises(KeyboardInterrupt):
        capture("torch.ones(2) + 1", "c", namespace={"torch": torch}, warmup=0)
    assert stopped == [True]
    assert (
        not torch.autograd.profiler._is_profiler_enabled
        and not torch._C._autograd._profiler_enabled()
    )


def _eventually(condition, timeout: float = 10.0) -> bool:
    """True once ``condition()`` holds; a loaded machine may take a moment to reap a killed
    process."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_interrupt_during_an_nsys_run_kills_its_process_group_and_cleans_up(
    ip, tmp_path, monkeypatch, ctrl_c
):
    import tempfile

    work = tmp_path / "tmp"
    work.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(work))
    monkeypatch.setenv("FAKE_NSYS_MODE", "ok")
    ip.run_line_magic("config", f"GpuMagics.nsys_path = {FAKE_NSYS!r}")
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path / 'p')!r}")
    pidfile = tmp_path / "cell.pid"
    ip.user_ns["pidfile"] = str(pidfile)
    cell = "import os, time\nopen(pidfile, 'w').write(str(os.getpid()))\ntime.sleep(600)"

    def interrupt_when_the_cell_runs() -> None:
        deadline = time.monotonic() + 60
        while not pidfile.exists() or not pidfile.read_text():
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_when_the_cell_runs, daemon=True).start()
    t0 = time.monotonic()
    with capture_output() as cap, pytest.raises(KeyboardInterrupt):
        ip.run_cell_magic("gpuprofile", "--nsys -w 0", cell)
    assert time.monotonic() - t0 < 60
    assert "interrupted" in cap.stderr and "nsys was stopped" in cap.stderr
    pid = int(pidfile.read_text())
    assert _eventually(lambda: not alive(pid)), (
        "the cell's process (in nsys' process group) outlived the interrupt"
    )
    assert _eventually(lambda: not any(work.iterdir())), list(
        work.iterdir()
    )  # the shipping directory is gone


def test_every_new_error_is_a_gpumagic_error():
    from gpumagic.errors import NestedProfilerError, UnwritablePathError

    for cls in (FileMissingError, NestedProfilerError, UnwritablePathError):
        assert issubclass(cls, GpuMagicError)
