"""One capture shape: the shared warm-up-then-capture loop, Cell, both backends called alike, Chrome
trace both ways."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager

import pytest

from gpumagic import load_trace
from gpumagic.capture import Capture
from gpumagic.capture.cell import Cell, loop_notes, run_cell
from gpumagic.capture.chrome.reader import chrome_trace_events, write_chrome_trace

from ..helpers import DATA, ROOT


def recording_loop(warmup: int, iters: int, fail_at: int | None = None) -> list[str]:
    events: list[str] = []
    ns: dict = {"n": 0}

    def body() -> None:
        ns["n"] += 1
        events.append(f"run{ns['n']}")
        if ns["n"] == fail_at:
            raise RuntimeError("boom")

    @contextmanager
    def inside():
        events.append("enter")
        try:
            yield
        finally:
            events.append("exit")

    try:
        run_cell(Cell.of(body), ns, warmup, iters, inside, lambda: events.append("sync"))
    except RuntimeError:
        events.append("raised")
    return events


def test_loop_warms_up_outside_syncs_and_runs_inside():
    assert recording_loop(2, 3) == [
        "run1",
        "run2",
        "sync",
        "enter",
        "run3",
        "run4",
        "run5",
        "sync",
        "exit",
    ]
    assert recording_loop(0, 1) == ["sync", "enter", "run1", "sync", "exit"]


def test_a_failing_run_still_syncs_and_closes_the_capture():
    assert recording_loop(1, 3, fail_at=3) == [
        "run1",
        "sync",
        "enter",
        "run2",
        "run3",
        "sync",
        "exit",
        "raised",
    ]


def test_loop_returns_the_last_captured_runs_value_and_watches_only_the_warmup():
    events: list[str] = []
    ns: dict = {"n": 0}

    @contextmanager
    def ctx(name: str):
        events.append(f"enter {name}")
        yield
        events.append(f"exit {name}")

    cell = Cell.of("n += 1\nn * 10")
    value = run_cell(
        cell, ns, 2, 3, lambda: ctx("inside"), lambda: events.append("sync"), lambda: ctx("outside")
    )
    assert value == 50 and ns["n"] == 5  # the fifth run: two warm-up, three captured
    assert events == [
        "enter outside",
        "exit outside",
        "sync",
        "enter inside",
        "sync",
        "exit inside",
    ]
    assert run_cell(Cell.of("x = 1"), {}, 0, 1) is None
    assert (
        run_cell(Cell.of("x = 1\nx;"), {}, 0, 1) == 1
    )  # the ';' is the magic's business, not the loop's
    assert run_cell(Cell.of(lambda: 7), {}, 1, 1) == 7


def test_cell_from_source_runs_in_the_namespace_and_shows_its_lines_in_tracebacks():
    ns: dict = {"x": 2}
    Cell.of("y = x * 21").run(ns)
    assert ns["y"] == 42
    with pytest.raises(ZeroDivisionError) as info:
        Cell.of("a = 1\nb = a / 0").run({})
    import traceback

    assert "b = a / 0" in "".join(traceback.format_tb(info.tb))
    with pytest.raises(TypeError, match="source text, a code object or a callable"):
        Cell.of(42)


def test_loop_notes_say_what_the_figures_cover():
    assert loop_notes(1, 1) == []
    assert "No warm-up" in loop_notes(0, 1)[0]
    assert "3 times" in loop_notes(1, 3)[0]


def test_both_backends_share_one_signature():
    import inspect

    from gpumagic.capture.nsys import backend as nsys
    from gpumagic.capture.torch import backend as torch_profiler

    a = inspect.signature(torch_profiler.capture)
    b = inspect.signature(nsys.capture)
    assert (
        list(a.parameters)
        == list(b.parameters)
        == ["cell", "label", "namespace", "warmup", "iters", "options"]
    )
    assert [p.default for p in a.parameters.values()][2:5] == [
        p.default for p in b.parameters.values()
    ][2:5]


def test_torch_backend_returns_a_capture_and_keeps_the_cells_assignments():
    torch = pytest.importorskip("torch")
    from gpumagic.capture.torch.backend import capture

    ns = {"torch": torch, "runs": []}
    got = capture(
        "runs.append(1)\nz = torch.ones(4) * 3", "cell:t", namespace=ns, warmup=2, iters=2
    )
    assert isinstance(got, Capture)
    assert ns["runs"] == [1, 1, 1, 1] and float(ns["z"].sum()) == 12.0
    assert (
        got.trace.ops["name"] == "aten::mul"
    ).sum() == 2  # the warm-up runs are outside the capture
    assert got.trace.meta["label"] == "cell:t"
    assert any("2 times" in n for n in got.notes)
    # a callable is a cell too (in-process backends)
    assert capture(lambda: torch.ones(2) + 1, "cell:f", warmup=0).trace.meta["label"] == "cell:f"


def test_nsys_backend_needs_source_text():
    from gpumagic.capture.nsys.backend import capture

    with pytest.raises(TypeError, match="source text"):
        capture(lambda: None, "cell")


def test_chrome_trace_written_reads_back_to_the_same_summaries(tmp_path):
    t = load_trace(DATA / "torch_block.json.gz")
    path = tmp_path / "t.json"
    data = write_chrome_trace(t, path)
    assert json.loads(path.read_text()) == data == chrome_trace_events(t)
    back = load_trace(path)
    for table in ("kernels", "api", "ops"):
        assert len(getattr(back, table)) == len(getattr(t, table)), table
    a, b = t.kernel_summary(), back.kernel_summary()
    assert a["Name"].tolist() == b["Name"].tolist()
    assert (a["Total Time (ns)"] - b["Total Time (ns)"]).abs().max() <= len(
        t.kernels
    )  # µs with 3 decimals
    for table in (
        "kernels",
        "memops",
        "api",
    ):  # streams, correlations, bytes, launch geometry come back too
        cols = [c for c in getattr(t, table).columns if c not in ("start", "end")]
        assert getattr(back, table)[cols].astype(str).equals(getattr(t, table)[cols].astype(str)), (
            table
        )
    from gpumagic.trace import Trace, frame

    memset = dict(
        kind="memset", name="Memset", bytes=10, start=0, end=5, device=0, stream=7, correlation=3
    )
    write_chrome_trace(Trace(memops=frame("memops", [memset])), path)
    assert load_trace(path).memops.to_dict("records") == [
        {**memset, "pid": None}
    ]  # a torch trace: one process


def test_the_loop_refuses_counts_it_cannot_run():
    from gpumagic.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="warmup must be 0 or more"):
        run_cell(Cell.of(lambda: None), {}, -3, 1)
    with pytest.raises(InvalidOptionError, match="iters must be at least 1"):
        run_cell(Cell.of(lambda: None), {}, 0, 0)


def test_runner_reports_the_cells_traceback_without_its_own_frames(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "cell.json").write_text(
        json.dumps({"cell": "a = 1\nb = a / 0", "warmup": 0, "iters": 1, "label": "c"})
    )
    from gpumagic.capture.child.shipping import ship

    ship([], {}, str(work))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "gpumagic.capture.child.runner", str(work)],
        env=env,
        capture_output=True,
    )
    assert proc.returncode == 3, proc.stderr
    tb = (work / "error.txt").read_text()
    assert "b = a / 0" in tb and tb.strip().endswith("ZeroDivisionError: division by zero")
    assert "capture/cell.py" not in tb and "runner.py" not in tb
