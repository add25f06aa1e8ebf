"""%%gpuprofile through a real IPython InteractiveShell, on the CPU (no CUDA here: CPU ops only)."""

from __future__ import annotations

import json

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from gpumagic.render.report import ProfileReport

torch = pytest.importorskip("torch")


def test_cell_runs_its_assignments_land_and_the_report_is_shown(ip):
    ip.user_ns["x"] = torch.randn(64, 64)
    ip.user_ns["calls"] = []
    with capture_output() as cap:
        ip.run_cell_magic(
            "gpuprofile", "-w 2 -o rep --label mycell", "calls.append(1)\ny = (x @ x).relu()"
        )
    assert ip.user_ns["calls"] == [1, 1, 1]  # two warm-up runs and the captured one
    assert torch.equal(ip.user_ns["y"], (ip.user_ns["x"] @ ip.user_ns["x"]).relu())
    rep = ip.user_ns["rep"]
    assert isinstance(rep, ProfileReport)
    assert "aten::matmul" in set(rep.trace.ops["name"]) and "aten::relu" in set(
        rep.trace.ops["name"]
    )
    assert rep.trace.nvtx["text"].tolist() == ["mycell"]
    out = cap.outputs[0].data
    assert "text/html" in out and "text/plain" in out
    assert "no GPU activity" in out["text/plain"]
    assert "CPU ops" in out["text/html"]  # the timeline's lane label inside the iframe


def test_iters_and_no_timeline_and_trace_file(ip, tmp_path):
    ip.user_ns["x"] = torch.ones(8)
    path = tmp_path / "t.json"
    with capture_output() as cap:
        ip.run_cell_magic("gpuprofile", f"-w 0 -n 3 --no-timeline --trace {path} -o r", "z = x * 2")
    rep = ip.user_ns["r"]
    assert (rep.trace.ops["name"] == "aten::mul").sum() == 3
    assert "iframe" not in cap.outputs[0].data["text/html"]
    assert json.loads(path.read_text())["traceEvents"]
    assert any("No warm-up" in n for n in rep.notes)


def test_exception_stops_the_profiler_balances_nvtx_and_shows_no_report(ip, monkeypatch):
    import nvtx

    depth = {"n": 0}
    monkeypatch.setattr(nvtx, "push_range", lambda *a, **k: depth.__setitem__("n", depth["n"] + 1))
    monkeypatch.setattr(nvtx, "pop_range", lambda *a, **k: depth.__setitem__("n", depth["n"] - 1))
    with capture_output() as cap:
        res = ip.run_cell("%%gpuprofile -w 0\nraise ValueError('inside the cell')")
    assert isinstance(res.error_in_exec, ValueError)
    assert depth["n"] == 0
    assert not cap.outputs  # no report posing as complete
    assert torch.autograd.profiler._is_profiler_enabled is False
    # a second capture works: the first one was stopped
    ip.user_ns["torch"] = torch
    ip.run_cell_magic("gpuprofile", "-w 0 -o again", "torch.ones(3) + 1")
    assert len(ip.user_ns["again"].trace.ops)


def test_warmup_exception_propagates_without_capturing(ip):
    res = ip.run_cell("%%gpuprofile\nundefined_name_abc")
    assert isinstance(res.error_in_exec, NameError)


@pytest.mark.parametrize(
    "line, message",
    [
        ("-w -1", "-w must be 0 or more"),
        ("-n 0", "-n must be at least 1"),
        ("--top 0", "--top must be at least 1"),
        ("-o 1bad", "-o needs a variable name"),
        ("--bogus", "unrecognized arguments"),
    ],
)
def test_usage_errors(ip, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_cell_magic("gpuprofile", line, "1 + 1")


def test_empty_cell_is_a_usage_error(ip):
    with pytest.raises(UsageError, match="needs code"):
        ip.run_cell_magic("gpuprofile", "", "  \n")


def test_rerunning_the_cell_that_carried_bokehjs_carries_it_again(ip, monkeypatch):
    """JupyterLab replaces a re-run cell's outputs: the report that carried BokehJS must carry it
    again, or the saved notebook would hold none."""
    from gpumagic.render import embed

    carrier = "type='text/x-gpumagic-bokehjs'"
    parent = {"metadata": {"cellId": "cell-a"}}

    class Kernel:
        def get_parent(self):
            return parent

    monkeypatch.setattr(ip, "kernel", Kernel(), raising=False)
    embed.ONCE.forget()
    ip.user_ns["torch"] = torch

    def run() -> str:
        ip.execution_count += 1
        with capture_output() as cap:
            ip.run_cell_magic("gpuprofile", "-w 0", "torch.ones(4) + 1")
        return cap.outputs[0].data["text/html"]

    assert carrier in run()  # the first report carries BokehJS
    parent["metadata"]["cellId"] = "cell-b"
    assert carrier not in run()  # another cell reuses it
    parent["metadata"]["cellId"] = "cell-a"
    assert (
        carrier in run()
    )  # the carrier's cell again: its new output replaces the old one, so it carries it again
