"""Each line of a cell in its profiler range (``capture/marks/cell_lines.py``): the cell means what
it meant (its value, its assignments, its errors and their lines), and the ranges say which line
ran, as often as it ran."""

from __future__ import annotations

import ast
import traceback
from collections import Counter

import pytest

from gpumagic.capture.cell import compile_tree
from gpumagic.capture.marks.cell_lines import mark_lines

torch = pytest.importorskip("torch")


def run(source: str, ns: dict | None = None):
    """Run ``source`` marked, under the profiler: (its value, the namespace, line -> ranges)."""
    from torch.profiler import profile

    ns = {} if ns is None else ns
    code, last = compile_tree(mark_lines(ast.parse(source)), "<cell>")
    with profile() as prof:
        exec(code, ns)  # noqa: S102 - the test's own cell
        value = eval(last, ns) if last is not None else None
    lines = Counter(
        int(e.name.rsplit(" ", 1)[1]) for e in prof.events() if e.name.startswith("gpumagic line ")
    )
    return value, ns, lines


def test_value_assignments_and_every_line_of_a_loop():
    source = "x = 1\ntotal = 0\nfor i in range(3):\n    total += i\n    x = x * 2\ntotal + x"
    value, ns, lines = run(source)
    assert value == 3 + 8 and ns["total"] == 3 and ns["x"] == 8
    # the loop's own line once, its body's lines once per turn, the trailing expression once
    assert lines == {1: 1, 2: 1, 3: 1, 4: 3, 5: 3, 6: 1}
    assert not {"line_range", "value_in_line"} & set(ns)  # nothing added to the namespace


def test_lines_at_every_depth_and_branches_are_marked():
    source = (
        "n = 0\nfor i in range(2):\n    for j in range(50):\n        n += 1\n"
        "if n:\n    y = 1\nelse:\n    y = 2\n"
        "try:\n    z = 1 / 0\nexcept ZeroDivisionError:\n    z = 0"
    )
    _, ns, lines = run(source)
    assert ns["n"] == 100 and ns["y"] == 1 and ns["z"] == 0
    assert lines[4] == 100  # the inner loop's body: a range per turn
    assert lines[3] == 2 and lines[6] == 1 and 8 not in lines and lines[10] == lines[12] == 1


def test_a_line_that_runs_too_often_stops_marking_and_is_named(monkeypatch):
    from gpumagic.capture.marks import cell_lines

    monkeypatch.setattr(cell_lines, "LINE_RUNS", 30)
    cell_lines.reset_runs()
    _, ns, lines = run("n = 0\nfor i in range(100):\n    n += 1")
    assert ns["n"] == 100 and lines[3] == 30 and cell_lines.capped_lines() == [3]
    cell_lines.reset_runs()
    assert cell_lines.capped_lines() == []


def test_errors_keep_their_line_and_future_imports_stay_first():
    with pytest.raises(ZeroDivisionError) as info:
        run("a = 1\nb = 2\nc = a / 0")
    assert traceback.extract_tb(info.tb)[-1].lineno == 3
    value, _, lines = run("from __future__ import annotations\nw = 5\nw")
    assert value == 5 and lines == {2: 1, 3: 1}


def test_a_trailing_walrus_is_left_as_it_is():
    value, ns, lines = run("a = 2\n(b := a + 1)")
    assert value == 3 and ns["b"] == 3 and lines == {1: 1}


def test_the_script_capture_marks_lines_too():
    from gpumagic.capture.torch.backend import capture

    ns = {"torch": torch, "x": torch.randn(32, 32)}
    got = capture("y = x @ x\nz = y.relu()\nz.sum()", "cell", namespace=ns, warmup=0)
    lines = got.trace.by_line()
    assert lines.loc[lines["line"].notna(), "line"].tolist() == [1, 2, 3]
    assert lines.loc[lines["line"].notna(), "total_ns"].gt(0).all()
