"""The Python frames and autograd sequence numbers of a torch.profiler trace are read (the by-code
view rests on them): a faster parser that stopped reading ``python_function`` events or the ops'
"Sequence number" would leave every kernel outside every module and line."""

from __future__ import annotations

import gzip
import json

import pytest

from gpumagic import load_trace
from gpumagic.capture.chrome.code_text import code_events
from gpumagic.capture.chrome.reader import trace_from_chrome

from ...helpers import ROOT

ATTRIBUTION = ROOT / "tests" / "data" / "attribution"


def _raw(name: str) -> list[dict]:
    with gzip.open(ATTRIBUTION / f"{name}.json.gz", "rt") as f:
        return json.load(f)["traceEvents"]


@pytest.mark.parametrize("name", ["gpt_modules", "cnn_modules", "gpt_compiled"])
def test_frames_and_sequence_numbers_of_a_trace_with_modules_are_read(name):
    events = _raw(name)
    modules = {
        e["name"] for e in events if e.get("cat") == "python_function" and "nn.Module" in e["name"]
    }
    seq = [e for e in events if e.get("cat") == "cpu_op" and "Sequence number" in e.get("args", {})]
    code = load_trace(ATTRIBUTION / f"{name}.json.gz").meta["code"]
    assert modules and modules <= set(code["frames"]["name"])
    assert len(code["autograd"]["seq"]) == len(seq) > 0
    assert sorted(code["autograd"]["seq"]) == sorted(e["args"]["Sequence number"] for e in seq)
    backward = sum(1 for t in code["autograd"]["fwd_thread"] if t > 0)
    assert 0 < backward < len(seq)  # both directions are there


def test_a_plain_trace_has_sequence_numbers_and_no_frames():
    code = load_trace(ATTRIBUTION / "gpt_plain.json.gz").meta["code"]
    assert code["frames"]["name"] == [] and len(code["autograd"]["seq"]) > 0


def test_times_are_the_tables_nanoseconds():
    trace = load_trace(ATTRIBUTION / "cnn_modules.json.gz")
    auto = trace.meta["code"]["autograd"]
    ops = set(zip(trace.ops["name"], trace.ops["start"], trace.ops["end"]))
    assert all(k in ops for k in zip(auto["name"], auto["start"], auto["end"]))


def test_built_ins_and_untimed_events_are_left_out_and_nothing_is_no_code():
    frames = [
        {"ph": "X", "cat": "python_function", "name": "<built-in method x>", "ts": 1, "dur": 1},
        {"ph": "X", "cat": "python_function", "name": "a.py(3): f", "ts": "x", "dur": 1},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "ts": 2, "dur": 1.5},
    ]
    got = trace_from_chrome({"traceEvents": frames}).meta["code"]["frames"]
    assert got["name"] == ["nn.Module: Linear_0"] and got["end"] == [3500]
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 1, "args": {}}
    assert "code" not in trace_from_chrome({"traceEvents": [op]}).meta
    assert code_events([]) == {}
