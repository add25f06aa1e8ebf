"""The small parts the tool subprocesses share: which ``--nsys-args`` go to ``nsys start`` and which
sampling nsys is spared, the driver's early start beside the torch import, a rank's exit that
cannot be stopped by a failing flush, and the ncu held process's bounded stop."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from gpumagic.capture.child import runner
from gpumagic.capture.ncu import early as ncu_early
from gpumagic.capture.options import lean_args, split_start_args
from gpumagic.capture.phases import PhaseMarks

from ..helpers import ROOT, settle


@pytest.mark.parametrize(
    ("args", "launch", "start"),
    [
        ([], [], []),
        (["--sample=none"], [], ["--sample=none"]),
        (["--sample", "cpu", "-t", "x"], ["-t", "x"], ["--sample", "cpu"]),
        (
            ["-s", "process-tree", "--cuda-memory-usage=true"],
            ["--cuda-memory-usage=true"],
            ["-s", "process-tree"],
        ),
        (
            ["--cpuctxsw=none", "-b", "fp", "--env-var=A=1"],
            ["--env-var=A=1"],
            ["--cpuctxsw=none", "-b", "fp"],
        ),
        # a switch without a value keeps the next switch where it belongs
        (["--sample", "--cuda-memory-usage=true"], ["--cuda-memory-usage=true"], ["--sample"]),
        # the collection's other sources are start's too (GPU metrics), trace options launch's
        (
            ["--gpu-metrics-devices=all", "-t", "cuda"],
            ["-t", "cuda"],
            ["--gpu-metrics-devices=all"],
        ),
    ],
)
def test_sampling_switches_are_split_off_for_nsys_start(args, launch, start):
    assert split_start_args(args) == (launch, start)


@pytest.mark.parametrize(
    ("args", "lean"),
    [
        ([], ["--sample=none", "--cpuctxsw=none"]),
        (["--sample=none"], ["--cpuctxsw=none"]),
        (["-s", "none"], ["--cpuctxsw=none"]),
        # sampling asked for: nsys' own default for context switches (it follows --sample)
        (["--sample=process-tree"], []),
        (["-s", "process-tree"], []),
        (["--sample", "cpu"], []),
        (["--cpuctxsw=process-tree"], ["--sample=none"]),
        (["--sample=process-tree", "--cpuctxsw=none"], []),
        # any sampling switch asks for sampling: --sample=none is not added against it
        (["--backtrace=dwarf"], []),
        (["-b", "fp"], []),
        (["--sampling-period", "100000"], []),
        (["--samples-per-backtrace=4"], []),
    ],
)
def test_nsys_samples_no_cpu_unless_the_user_says(args, lean):
    assert lean_args(args) == lean


@pytest.fixture(autouse=True)
def _module_loading(monkeypatch):
    """The early driver start sets CUDA_MODULE_LOADING where unset: restored after each test."""
    monkeypatch.setenv("CUDA_MODULE_LOADING", "as before")
    monkeypatch.delenv("CUDA_MODULE_LOADING")


class FakeDriver:
    """libcuda as ctypes would load it: each call recorded, each answering ``status``."""

    def __init__(self, status: int = 0, v2: bool = True) -> None:
        self.calls: list[str] = []
        self.status = status
        names = ["cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain"]
        names.append("cuDevicePrimaryCtxRelease_v2" if v2 else "cuDevicePrimaryCtxRelease")
        for name in names:
            setattr(self, name, self._record(name))

    def _record(self, name: str):
        def call(*_args):
            self.calls.append(name)
            return 0 if name != "cuInit" else self.status

        return call


@pytest.mark.parametrize("v2", [True, False])
def test_the_driver_starts_beside_the_import_and_its_hold_is_given_back(monkeypatch, v2):
    lib = FakeDriver(v2=v2)
    monkeypatch.setattr(runner, "driver_library", lambda: lib)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    driver = runner.start_driver()
    driver.join(5)
    assert lib.calls == ["cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain"] and driver.held
    driver.release()
    driver.release()  # once only: the context's use count ends as torch alone leaves it
    release = "cuDevicePrimaryCtxRelease_v2" if v2 else "cuDevicePrimaryCtxRelease"
    assert lib.calls.count(release) == 1 and not driver.held


def test_no_driver_or_a_failing_one_holds_nothing(monkeypatch):
    def missing():
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(runner, "driver_library", missing)
    driver = runner.start_driver()
    driver.join(5)
    driver.release()
    assert not driver.held
    lib = FakeDriver(status=100)  # CUDA_ERROR_NO_DEVICE
    monkeypatch.setattr(runner, "driver_library", lambda: lib)
    driver = runner.start_driver()
    driver.join(5)
    driver.release()
    assert lib.calls == ["cuInit"] and not driver.held
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no device to start: no thread
    assert runner.start_driver() is None


@pytest.mark.parametrize("early", ["1", "0"])
def test_start_cuda_marks_its_phases_either_way(monkeypatch, early):
    torch = pytest.importorskip("torch")
    lib = FakeDriver()
    monkeypatch.setattr(runner, "driver_library", lambda: lib)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("GPUMAGIC_CUDA_EARLY", early)
    # torch's own CUDA start, recorded where the driver's calls are
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch, "empty", lambda *a, **k: lib.calls.append("torch's start"))
    marks = PhaseMarks()
    runner.start_cuda(marks)
    assert [m[0] for m in marks.marks] == ["torch import", "CUDA init"]
    if early == "1":  # started before torch's own start; the hold given back only after it
        assert lib.calls == [
            "cuInit",
            "cuDeviceGet",
            "cuDevicePrimaryCtxRetain",
            "torch's start",
            "cuDevicePrimaryCtxRelease_v2",
        ]
    else:
        assert lib.calls == ["torch's start"]


def test_the_early_driver_loads_kernels_lazily_as_torch_would(monkeypatch):
    """cuInit reads CUDA_MODULE_LOADING; torch sets it to LAZY (where unset) only in its own
    start, which now comes after: the early start sets it first, a user's choice stands."""
    monkeypatch.setattr(runner, "driver_library", lambda: FakeDriver())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_MODULE_LOADING", raising=False)
    runner.start_driver().join(5)
    assert os.environ["CUDA_MODULE_LOADING"] == "LAZY"
    monkeypatch.setenv("CUDA_MODULE_LOADING", "EAGER")
    runner.start_driver().join(5)
    assert os.environ["CUDA_MODULE_LOADING"] == "EAGER"


def test_the_drivers_hold_is_given_back_where_torch_does_not_import(monkeypatch):
    lib = FakeDriver()
    monkeypatch.setattr(runner, "driver_library", lambda: lib)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    marks = PhaseMarks()
    runner.start_cuda(marks)
    assert [m[0] for m in marks.marks] == ["torch import"]
    assert lib.calls[-1] == "cuDevicePrimaryCtxRelease_v2"


def python(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh Python that imports this checkout's gpumagic."""
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )


def test_a_rank_leaves_with_its_status_even_when_a_flush_fails(tmp_path):
    script = textwrap.dedent(
        """
        import sys
        from gpumagic.capture.child.runner import _leave

        class Broken:
            def write(self, text):
                return len(text)

            def flush(self):
                raise OSError("the pipe is gone")

        sys.stdout = Broken()
        _leave(3)
        """
    )
    proc = python(script)
    assert proc.returncode == 3, proc.stderr


def test_the_held_process_stops_in_bounded_time_even_outside_its_session(tmp_path, monkeypatch):
    """A process of the run that left the killed session but holds its output open: the stop
    finds it by the work dir and stops it, instead of waiting for ever."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    holder = textwrap.dedent(
        """
        import os, subprocess, sys, time
        # a process of the run in a session of its own, holding the output pipe open
        subprocess.Popen(
            [sys.executable, "-c",
             "import sys, time; open(sys.argv[1] + '/holding', 'w').close(); time.sleep(120)",
             sys.argv[1]],
            start_new_session=True,
        )
        time.sleep(120)
        """
    )
    monkeypatch.setattr(ncu_early, "STOP_GRACE", 0.5)
    run = ncu_early.EarlyRun([sys.executable, "-c", holder, str(workdir)], str(workdir), {})
    deadline = time.monotonic() + 30
    while not (workdir / "holding").exists():  # the process outside the session runs
        assert time.monotonic() < deadline and run.proc.poll() is None
        time.sleep(0.02)
    began = time.monotonic()
    run.stop(str(tmp_path / "stem"))
    assert time.monotonic() - began < 10
    assert (workdir / runner.GATE_FILE).read_text() == "stop"
    assert settle(tmp_path) == []


def test_the_held_process_stop_lets_go_of_a_pipe_nothing_of_the_run_releases(tmp_path, monkeypatch):
    """A process outside the killed session, holding the output, that the work dir does not name:
    the stop closes its end of the pipe and returns, bounded, rather than wait for it."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    pid_file = tmp_path / "outsider.pid"
    holder = textwrap.dedent(
        """
        import os, subprocess, sys, time
        outsider = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
        )
        open(sys.argv[2], "w").write(str(outsider.pid))
        time.sleep(120)
        """
    )
    monkeypatch.setattr(ncu_early, "STOP_GRACE", 0.5)
    run = ncu_early.EarlyRun(
        [sys.executable, "-c", holder, str(workdir), str(pid_file)], str(workdir), {}
    )
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and run.proc.poll() is None
        time.sleep(0.02)
    outsider = int(pid_file.read_text())
    try:
        began = time.monotonic()
        run.stop(str(tmp_path / "stem"))
        assert time.monotonic() - began < 5  # three waits of STOP_GRACE at most
        assert run.proc.stdout.closed and run.proc.poll() is not None
        assert runner.alive(outsider)  # not the run's: left alone
    finally:
        os.kill(outsider, 9)


def test_the_tools_child_processes_import_neither_pandas_nor_the_timing_core():
    """Each process a tool runs the cell in imports the package first: its start must not pay for
    pandas, IPython or Bokeh (they cost 0.3-0.7 s before the child's first line)."""
    modules = [
        "gpumagic.capture.child.runner",
        "gpumagic.capture.child.warm_child",
        "gpumagic.capture.ncu.rank",
        "gpumagic.capture.cell",
        "gpumagic.capture.child.shipping",
        "gpumagic.capture.phases",
    ]
    script = (
        f"import sys, {', '.join(modules)}; "
        "print(sorted(m for m in ('pandas', 'IPython', 'bokeh', 'gpumagic.timing', "
        "'gpumagic.trace', 'torch') if m in sys.modules))"
    )
    proc = python(script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    import gpumagic  # the names the package promises are still there, loaded on first use

    assert gpumagic.gputime.__module__ == "gpumagic.api.gputime"
    assert gpumagic.TimingResult.__name__ == "TimingResult" and gpumagic.TimingOptions
    assert {"gputime", "TimingResult", "load_nsys"} <= set(dir(gpumagic))  # tab completion
