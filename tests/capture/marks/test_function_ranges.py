"""The functions a cell calls, marked with their own lines for the captured runs
(capture/function_ranges), in a real IPython shell: the same function objects, their own code again
after, whatever the cell did."""

from __future__ import annotations

import json
import pickle

import pytest

from gpumagic.capture.marks.function_ranges import function_ranges, function_table

torch = pytest.importorskip("torch")

EARLIER = '''
import json

def helper(x):
    y = x * 2
    return y.sum()

def train_step(x):
    """One step."""
    total = 0
    for i in range(2):
        if i >= 0:
            total = total + helper(x)
    return total

def failing(x):
    y = x + 1
    raise ValueError("from the function's own line")

def numbers():
    yield 1

def outer():
    k = 3
    def inner():
        return k
    return inner
'''


@pytest.fixture
def earlier(ip):
    ip.run_cell(EARLIER, store_history=True)
    ip.user_ns["closure"] = ip.user_ns["outer"]()
    yield ip
    for name in ("helper", "train_step", "failing", "numbers", "outer", "closure", "json"):
        ip.user_ns.pop(name, None)


def _range_names(fn, *args):
    from torch.profiler import profile

    with profile() as prof:
        value = fn(*args)
    return value, [e.name for e in prof.events() if e.name.startswith("gpumagic ")]


def test_the_cells_functions_and_the_functions_they_call_are_found(earlier):
    ns = earlier.user_ns
    table = function_table(ns, "t = train_step(x)\nn = numbers()\nc = closure()\njson.dumps(1)")
    names = [e["name"] for e in table]
    assert names == ["train_step", "helper"]  # reached through train_step's globals
    step = table[0]
    assert step["path"] == ["train_step"] and table[1]["path"] == ["train_step", "helper"]
    assert step["lines"][0] == "def train_step(x):" and step["file"].startswith("<ipython-input")
    assert json.loads(json.dumps(table)) == table  # plain data: it travels to a subprocess


def test_marked_functions_push_their_calls_and_lines_and_are_left_as_found(earlier):
    ns = earlier.user_ns
    step, helper = ns["train_step"], ns["helper"]
    code, doc = step.__code__, step.__doc__
    x = torch.ones(3)
    want = step(x)
    table = function_table(ns, "t = train_step(x)")
    with function_ranges(ns, table) as marked:
        assert ns["train_step"] is step and step.__code__ is not code  # the same object
        got, names = _range_names(step, x)
    assert [e["name"] for e in marked] == ["train_step", "helper"]
    assert torch.equal(got, want) and step.__doc__ == doc
    first = step.__code__.co_firstlineno
    assert names[0] == "gpumagic function 1 train_step"
    assert f"gpumagic fline 1 {first + 2}" in names  # total = 0 (the docstring is no line)
    assert f"gpumagic fline 1 {first + 1}" not in names
    assert names.count("gpumagic function 2 helper") == 2  # called twice in the loop
    assert step.__code__ is code and helper.__code__.co_name == "helper"
    assert _range_names(step, x)[1] == []  # nothing marked after the block
    assert pickle.loads(pickle.dumps(json.dumps)) is json.dumps  # library code never touched


def test_a_function_that_raises_points_at_its_own_line_and_is_restored(earlier):
    ns = earlier.user_ns
    failing = ns["failing"]
    code = failing.__code__
    with pytest.raises(ValueError) as plain:
        failing(1)
    table = function_table(ns, "failing(1)")
    with pytest.raises(ValueError) as marked, function_ranges(ns, table):
        failing(1)
    assert marked.traceback[-1].lineno == plain.traceback[-1].lineno
    assert marked.traceback[-1].path == plain.traceback[-1].path
    assert failing.__code__ is code


def test_a_function_the_cell_redefines_is_left_as_the_cell_left_it(earlier):
    ns = earlier.user_ns
    step = ns["train_step"]
    table = function_table(ns, "t = train_step(x)")
    with function_ranges(ns, table):
        earlier.run_cell("def train_step(x):\n    return 0\n")
        redefined = ns["train_step"]
        redefined_code = redefined.__code__
    assert ns["train_step"] is redefined and redefined.__code__ is redefined_code
    assert step.__code__.co_name == "train_step" and step(torch.ones(1)) == 4.0


def test_edited_source_is_not_marked(earlier):
    ns = earlier.user_ns
    table = function_table(ns, "t = helper(x)")
    table[0]["lines"] = ["def other(x):", "    return x"]  # the source no longer the function's
    with function_ranges(ns, table) as marked:
        assert marked == []


def test_a_subprocesss_shipped_copy_is_marked_from_the_table_made_here(earlier, tmp_path):
    """What a tool's subprocess does: the names restored from a shipment (functions by value,
    under the pickler's file name), then marked from the table this process made."""
    from gpumagic.capture.child.shipping import restore, ship

    ns = earlier.user_ns
    table = function_table(ns, "t = train_step(x)")
    ship(["train_step"], ns, str(tmp_path))
    child = {"__name__": "__main__", **restore(str(tmp_path))}
    copy = child["train_step"]
    assert copy is not ns["train_step"]
    with function_ranges(child, table) as marked:
        got, names = _range_names(copy, torch.ones(3))
    assert [e["name"] for e in marked] == ["train_step", "helper"]
    assert names[0] == "gpumagic function 1 train_step" and torch.equal(got, torch.tensor(12.0))
