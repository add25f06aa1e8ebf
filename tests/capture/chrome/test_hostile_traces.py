"""Chrome traces a hostile (or broken) writer makes: each refused with the file named, or read
with what was left out said (issue 57, round 3)."""

from __future__ import annotations

import json

import pytest

import gpumagic
from gpumagic.analysis import findings
from gpumagic.errors import TraceFormatError


def _kernel(**kw):
    ev = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5}
    ev["args"] = {"device": 0, "stream": 7, "correlation": 1}
    return {**ev, **kw}


def _write(tmp_path, text: str):
    path = tmp_path / "t.json"
    path.write_text(text)
    return path


def test_a_trace_nested_past_the_parsers_depth_is_refused_with_its_name(tmp_path):
    path = _write(tmp_path, '{"traceEvents": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(TraceFormatError, match="nested deeper") as err:  # was RecursionError
        gpumagic.load_trace(path)
    assert str(path) in str(err.value)


def test_negative_durations_are_left_out_and_said(tmp_path):
    doc = {"traceEvents": [_kernel(dur=-3000), _kernel(ts=30, dur=5)]}
    trace = gpumagic.load_trace(_write(tmp_path, json.dumps(doc)))
    assert (trace.kernels["end"] - trace.kernels["start"]).tolist() == [5000]  # was -3 ms too
    said = {f.kind: f.message for f in findings(trace)}
    assert said["unplaced_events"].startswith("1 kernel of the trace left out")


def test_a_trace_whose_only_kernel_has_a_nan_duration_says_so(tmp_path):
    text = json.dumps({"traceEvents": [_kernel()]}).replace('"dur": 5', '"dur": NaN')
    trace = gpumagic.load_trace(_write(tmp_path, text))
    said = {f.kind: f.message for f in findings(trace)}
    message = said["kernels_not_recorded"]  # was "the trace has no 'kernel' events"
    assert "no 'kernel' events" not in message and "one event has a negative or NaN" in message


def test_fields_of_the_wrong_type_are_no_traceback(tmp_path):
    names = {"ph": "M", "name": "process_name", "pid": [1], "args": []}
    doc = {"deviceProperties": 5, "traceEvents": [_kernel(ts={"a": 1}), _kernel(pid=[1]), names]}
    doc["traceEvents"].append({"ph": "X", "cat": "Trace", "name": "t", "ts": {}, "dur": 1})
    trace = gpumagic.load_trace(_write(tmp_path, json.dumps(doc)))  # was TypeError
    assert len(trace.kernels) == 1 and trace.meta["unplaced_events"] == {"kernels": 1}
    findings(trace)


def test_a_list_or_object_tid_is_no_thread(tmp_path):
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 0, "tid": [1], "ts": 1, "dur": 3}
    api = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 0, "ts": 2}
    api.update(dur=1, tid={"a": 1}, args={"correlation": 1})
    mark = {"ph": "X", "cat": "user_annotation", "name": "r", "pid": 0, "tid": [2], "ts": 0}
    doc = {"traceEvents": [_kernel(), op, api, {**mark, "dur": 20}]}
    trace = gpumagic.load_trace(_write(tmp_path, json.dumps(doc)))  # was TypeError: unhashable
    assert [t["thread"].tolist() for t in (trace.ops, trace.api, trace.nvtx)] == [[None]] * 3
    findings(trace)


def test_a_dispatch_list_with_a_list_pid_and_tid_names_no_device(tmp_path):
    ev = {"ph": "X", "cat": "kernel_dispatch", "name": "k", "pid": [0], "tid": [3], "ts": 1}
    trace = gpumagic.load_trace(_write(tmp_path, json.dumps([{**ev, "dur": 3}])))
    assert trace.kernels[["device", "stream"]].isna().all(axis=None)  # was [0] and [3]
