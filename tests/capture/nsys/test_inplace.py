"""``%%gpuprofile --nsys`` in a kernel under Nsight Systems: the cell profiled in place with the
session's ``nsys start``/``stop`` (``capture/nsys/inplace.py``), the kernel spec that starts such a
kernel (``notebook/nsys_kernel.py``), and the subprocess where a cell cannot run in place. With the
stand-in nsys (``tests/fake_nsys``), which keeps sessions as the real one does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from gpumagic.capture.nsys.inplace import NSYS_ENV, SESSION_ENV, TRACE_ENV
from gpumagic.notebook import nsys_kernel

from ...helpers import FAKE_NSYS
from ..child.test_shipping import NOTEBOOK, STEP

torch = pytest.importorskip("torch")


@pytest.fixture
def session(tmp_path, monkeypatch):
    """A session the stand-in nsys launched (a sleeping Python stands for the kernel), and this
    process' environment as the kernel spec's launcher gives it to the kernel."""
    state, log = tmp_path / "nsys-state", tmp_path / "nsys.log"
    monkeypatch.setenv("FAKE_NSYS_MODE", "ok")
    monkeypatch.setenv("FAKE_NSYS_STATE", str(state))
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    name = f"gpumagic-kernel-test-{os.getpid()}"
    sleeper = [sys.executable, "-m", "timeit", "-n1", "-r1", "__import__('time').sleep(120)"]
    proc = subprocess.Popen([FAKE_NSYS, "launch", f"--session-new={name}", *sleeper])
    deadline = time.monotonic() + 20
    while not (state / f"{name}.json").exists():
        assert time.monotonic() < deadline, "the stand-in's session did not start"
        time.sleep(0.05)
    monkeypatch.setenv(SESSION_ENV, name)
    monkeypatch.setenv(NSYS_ENV, FAKE_NSYS)
    monkeypatch.setenv(TRACE_ENV, "cuda,nvtx")
    yield name, log
    subprocess.run([FAKE_NSYS, "shutdown", f"--session={name}", "--kill=sigkill"], check=False)
    proc.kill()
    proc.wait()


def _commands(log) -> list[str]:
    return [
        line.split()[0] for line in log.read_text().splitlines() if not line.startswith("NSYS_")
    ]


def test_a_training_step_in_a_kernel_under_nsys_runs_in_place(ip, tmp_path, session):
    """The user's own model steps (nothing shipped, no child, no `nsys profile`), the cell's
    assignments stay in the namespace as after a normal run, and the report says "in place"."""
    name, log = session
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path / 'profiles')!r}")
    ip.run_cell(NOTEBOOK).raise_error()
    ip.user_ns["marker"] = str(tmp_path / "steps.txt")
    before = ip.user_ns["llm"].body.weight.detach().clone()
    with capture_output() as cap:
        ip.run_cell_magic("gpuprofile", "--nsys -w 1 -o rep", STEP)
    rep = ip.user_ns["rep"]
    assert rep.trace.meta["child"] == "in place" and "in place" in rep.summary_line()
    assert any(n.startswith("Profiled in place") for n in rep.notes)
    assert not any(n.startswith("Shipped") for n in rep.notes)
    assert _commands(log) == ["launch", "start", "stop", "export"]
    start = next(line for line in log.read_text().splitlines() if line.startswith("start"))
    assert f"--session={name}" in start and "--sample=none" in start  # nothing sampled
    # the cell ran here, on the notebook's own objects: warm-up and captured run
    assert not torch.equal(before, ip.user_ns["llm"].body.weight)
    assert ip.user_ns["moved"] is True and ip.user_ns["grads"] == 3
    assert len((tmp_path / "steps.txt").read_text().splitlines()) == 2
    assert os.path.exists(rep.notes[-1].split(": ", 1)[1])  # the SQLite export is kept
    assert "text/html" in cap.outputs[0].data


def test_the_in_place_answer_equals_the_in_process_one(ip, tmp_path, session):
    """The same cell from the same state: in place under nsys, then with torch.profiler in the
    same process, give the same losses and learning rates step by step."""
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path / 'profiles')!r}")
    marker = tmp_path / "steps.txt"
    ip.user_ns["marker"] = str(marker)
    lines = []
    for flags in ("--nsys -w 1", "-w 1 --no-timeline"):
        ip.run_cell(NOTEBOOK).raise_error()  # the same seed and state each time
        with capture_output():
            ip.run_cell_magic("gpuprofile", flags, STEP)
        lines.append(marker.read_text().splitlines())
        marker.unlink()
    assert lines[0] == lines[1] and len(lines[0]) == 2


def test_cells_that_cannot_run_in_place_run_in_a_subprocess_saying_why(ip, tmp_path, session):
    _name, log = session
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path / 'profiles')!r}")
    ip.run_line_magic("config", "GpuMagics.nsys_warm_child = False")
    with capture_output():
        ip.run_cell_magic("gpuprofile", "--nsys -w 0 -o rep --setup 'k = 1'", "k + 1")
    rep = ip.user_ns["rep"]
    assert rep.notes[0].startswith("Ran in a subprocess, not in place: --setup")
    assert "profile" in _commands(log) and "k" not in ip.user_ns
    with pytest.raises(UsageError, match="nsys launch's, fixed when this kernel started"):
        ip.run_cell_magic("gpuprofile", "--nsys --nsys-args '--trace=cuda'", "x = 1")


def test_a_kernel_not_under_nsys_says_so_in_its_report(ip, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_MODE", "ok")
    monkeypatch.delenv(SESSION_ENV, raising=False)
    ip.run_line_magic("config", f"GpuMagics.nsys_path = {FAKE_NSYS!r}")
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path / 'profiles')!r}")
    ip.run_line_magic("config", "GpuMagics.nsys_warm_child = False")
    with capture_output():
        ip.run_cell_magic("gpuprofile", "--nsys -w 0 -o rep", "x = 1")
    assert "kernel install --nsys" in ip.user_ns["rep"].notes[0]


def test_the_kernel_spec_is_jupyters_and_starts_ipykernel_under_nsys_launch(tmp_path):
    from jupyter_client.kernelspec import KernelSpecManager

    path = nsys_kernel.install(
        prefix=str(tmp_path), nsys=FAKE_NSYS, trace="cuda,nvtx,osrt", nsys_args="--wait=all"
    )
    assert path == str(tmp_path / "share" / "jupyter" / "kernels" / "gpumagic-nsys")
    spec = KernelSpecManager(kernel_dirs=[os.path.dirname(path)]).get_kernel_spec("gpumagic-nsys")
    assert spec.display_name == nsys_kernel.DISPLAY_NAME and spec.language == "python"
    assert spec.argv[:3] == [sys.executable, "-m", "gpumagic.notebook.nsys_kernel"]
    assert spec.argv[-3:] == ["--", "-f", "{connection_file}"]
    cmd = nsys_kernel.launch_command(FAKE_NSYS, "S", "cuda,nvtx", ["--wait=all"], ["-f", "c.json"])
    assert cmd == [
        FAKE_NSYS,
        "launch",
        "--session-new=S",
        "-t",
        "cuda,nvtx",
        "--cuda-graph-trace=node",
        "--wait=all",
        sys.executable,
        "-m",
        "ipykernel_launcher",
        "-f",
        "c.json",
    ]
    with open(os.path.join(path, "kernel.json"), encoding="utf-8") as f:
        assert json.load(f)["metadata"]["gpumagic"] == {
            "nsys": FAKE_NSYS,
            "trace": "cuda,nvtx,osrt",
        }


def test_the_installed_kernel_profiles_in_place_end_to_end(tmp_path, monkeypatch):
    """Jupyter starts the installed spec (the stand-in nsys launching ipykernel), and a cell of
    `%%gpuprofile --nsys` in it runs in place."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    monkeypatch.setenv("FAKE_NSYS_MODE", "ok")
    monkeypatch.setenv("FAKE_NSYS_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("FAKE_NSYS_LOG", str(tmp_path / "nsys.log"))
    path = nsys_kernel.install(prefix=str(tmp_path), nsys=FAKE_NSYS)
    km = KernelManager(
        kernel_name="gpumagic-nsys",
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[os.path.dirname(path)]),
    )
    km.start_kernel(cwd=str(tmp_path))
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        code = (
            "%load_ext gpumagic\n"
            f"%config GpuMagics.profile_dir = {str(tmp_path / 'profiles')!r}\n"
            "import os\nvalue = 20\n"
        )
        assert client.execute_interactive(code, timeout=60)["content"]["status"] == "ok"
        cell = "%%gpuprofile --nsys -w 0 -o rep\nvalue += 1"
        reply = client.execute_interactive(cell, timeout=60, output_hook=lambda m: None)
        assert reply["content"]["status"] == "ok", reply["content"]
        seen = []
        client.execute_interactive(
            "print(rep.trace.meta['child'], value, os.environ['NSYS_PROFILING_SESSION_ID'])",
            timeout=30,
            output_hook=lambda m: seen.append(m["content"].get("text", "")),
        )
        said = "".join(seen).split()
        assert said[:3] == ["in", "place", "21"] and said[3].startswith("gpumagic-kernel-"), said
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)
    text = (tmp_path / "nsys.log").read_text()
    assert "launch --session-new=gpumagic-kernel-" in text and "start --session=" in text


def test_ncu_in_a_kernel_under_nsys_says_why_it_runs_in_a_subprocess(ip, tmp_path, monkeypatch):
    from ...helpers import FAKE_NCU

    monkeypatch.setenv(SESSION_ENV, "gpumagic-kernel-1")
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "ncu.log"))
    monkeypatch.setenv("FAKE_NCU_MODE", "ok")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    ip.run_line_magic("config", f"GpuMagics.ncu_path = {FAKE_NCU!r}")
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path / 'profiles')!r}")
    with capture_output():
        ip.run_cell_magic("gpuprofile", "--ncu -w 0 --kernels regex:gemm -o rep", "y = 2")
    assert (
        ip.user_ns["rep"].notes[0].startswith("Ran in a subprocess, not in place: Nsight Compute")
    )
    assert "y" not in ip.user_ns


def test_counters_in_place_go_to_the_sessions_nsys_start(ip, tmp_path, session):
    _name, log = session
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path / 'profiles')!r}")
    with capture_output():
        ip.run_cell_magic("gpuprofile", "--nsys --counters -w 0 -o rep", "x = 1")
    start = next(line for line in log.read_text().splitlines() if line.startswith("start"))
    assert "--gpu-metrics-devices=all --gpu-metrics-frequency=10000" in start
    assert any("--counters" in n for n in ip.user_ns["rep"].notes)  # the stand-in has none


def test_a_cell_that_raises_in_place_still_stops_the_collection(ip, tmp_path, session):
    """The cell's own error reaches the notebook as a normal run's would, after nsys stop: the
    session is not left collecting (the next cell's nsys start succeeds)."""
    _name, log = session
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path / 'profiles')!r}")
    with capture_output(), pytest.raises(ZeroDivisionError):
        ip.run_cell_magic("gpuprofile", "--nsys -w 0", "1 / 0")
    assert _commands(log)[-2:] == ["start", "stop"]
    with capture_output():
        ip.run_cell_magic("gpuprofile", "--nsys -w 0 -o rep", "x = 3")
    assert ip.user_ns["x"] == 3 and ip.user_ns["rep"].trace.meta["child"] == "in place"
