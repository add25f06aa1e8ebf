"""The one-pass Chrome-trace reader (``capture/chrome/events.py``) reads each event as a plain
per-event reading does: the reference below builds a dict per row, as the reader did before it took
tables a field at a time, and both must give the same tables, row order, dtypes and all, for events
with missing, null, string and non-number fields, and for categories read into one table
(``cuda_runtime`` with ``cuda_driver``, ``gpu_memcpy`` with ``gpu_memset``) in any interleaving."""

from __future__ import annotations

import gc
import re
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumagic.capture.chrome.events import category, paused_gc, shapes, sort_events
from gpumagic.capture.chrome.reader import trace_from_chrome
from gpumagic.trace import COLUMNS, frame

_KIND = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP)\b")


def _ns(us: Any) -> int:
    return round(float(us) * 1000.0)


def _reference_shapes(dims: Any) -> str | None:
    if not dims:
        return None
    return ", ".join(
        "[" + ", ".join(str(x) for x in d) + "]" if isinstance(d, list) else str(d) for d in dims
    )


def _reference(events: list[dict[str, Any]]) -> dict[str, pd.DataFrame]:
    """Kernels, memory operations, API calls and ops, one dict per event."""
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in ("kernels", "memops", "api", "ops")}
    for ev in events:
        if ev.get("ph") != "X" or not ev.get("cat"):
            continue
        cat = category(ev["cat"])
        args = ev.get("args") or {}
        try:
            start = _ns(ev["ts"])
            end = start + _ns(ev.get("dur", 0))
        except (KeyError, TypeError, ValueError, OverflowError):
            continue
        name = str(ev.get("name", ""))
        if cat == "kernel":
            rows["kernels"].append(
                dict(name=name, start=start, end=end, device=args.get("device"),
                     stream=args.get("stream"), correlation=args.get("correlation"),
                     grid=None if args.get("grid") is None else
                     "x".join(str(int(x)) for x in args["grid"]),
                     block=None, registers=args.get("registers per thread"),
                     shared_memory=args.get("shared memory"))
            )  # fmt: skip
        elif cat in ("gpu_memcpy", "gpu_memset"):
            m = _KIND.search(name)
            kind = "memset" if cat == "gpu_memset" else (m[1] if m else "memcpy")
            rows["memops"].append(
                dict(kind=kind, name=name, bytes=args.get("bytes"), start=start, end=end,
                     device=args.get("device"), stream=args.get("stream"),
                     correlation=args.get("correlation"))
            )  # fmt: skip
        elif cat in ("cuda_runtime", "cuda_driver"):
            rows["api"].append(
                dict(name=name, start=start, end=end, thread=ev.get("tid"),
                     correlation=args.get("correlation"))
            )  # fmt: skip
        elif cat == "cpu_op":
            rows["ops"].append(
                dict(name=name, start=start, end=end, thread=ev.get("tid"),
                     shapes=_reference_shapes(args.get("Input Dims")),
                     external_id=args.get("External id"), dtypes=None)
            )  # fmt: skip
    return {table: frame(table, r) for table, r in rows.items()}


_CATS = ["kernel", "Kernel", "gpu_memcpy", "Memset", "gpu_memset", "cuda_runtime", "cuda_driver"]
_CATS += ["Runtime", "cpu_op", "overhead"]
_TIMES = st.one_of(
    st.floats(0, 1e9, allow_nan=False).map(lambda x: round(x, 3)),
    st.integers(0, 10**12),
    st.sampled_from([None, "12.5", "x", float("nan")]),
)
_IDS = st.one_of(st.integers(0, 2**40), st.none())
_DIMS = st.one_of(
    st.none(),
    st.lists(st.one_of(st.lists(st.integers(0, 4096), max_size=4), st.integers(0, 9)), max_size=3),
    st.just([["a"], []]),
    st.just([[[2, 3], [4]], 1.5]),
)


@st.composite
def _event(draw: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {"ph": draw(st.sampled_from(["X", "X", "X", "M", "f"]))}
    ev["cat"] = draw(st.sampled_from(_CATS))
    ev["name"] = draw(st.sampled_from(["cudaLaunchKernel", "Memcpy HtoD (Pageable -> Device)",
                                       "aten::mm", "k", "Memcpy DtoD"]))  # fmt: skip
    ts = draw(_TIMES)
    if ts is not None or draw(st.booleans()):
        ev["ts"] = ts
    if draw(st.booleans()):
        ev["dur"] = draw(_TIMES)
    ev["tid"] = draw(st.sampled_from([7, 8, "main thread"]))
    if draw(st.booleans()):
        ev["args"] = {
            "correlation": draw(_IDS),
            "External id": draw(_IDS),
            "device": draw(st.sampled_from([0, 1, None])),
            "stream": draw(st.sampled_from([7, 20])),
            "bytes": draw(st.sampled_from([4096, None, 2**20])),
            "grid": draw(st.sampled_from([[32, 96, 1], [1, 1, 1]])),
            "Input Dims": draw(_DIMS),
        }
    return ev


@settings(max_examples=60, deadline=None)
@given(st.lists(_event(), max_size=40))
def test_the_one_pass_reader_reads_each_event_as_a_per_event_reading_does(events):
    got = trace_from_chrome({"traceEvents": events})
    want = _reference(events)
    for table, expected in want.items():
        actual = getattr(got, table).drop(columns=["depth"], errors="ignore")
        cols = [c for c in COLUMNS[table] if c not in ("depth", "dtypes", "block")]
        expected = expected[cols]
        actual = actual[cols]
        if table == "kernels":
            for c in ("correlation", "registers", "shared_memory"):
                expected[c] = pd.to_numeric(expected[c], errors="coerce").fillna(-1)
                expected[c] = expected[c].astype("int64") if not expected.empty else expected[c]
        if table in ("memops", "api"):
            c = "correlation"
            expected[c] = pd.to_numeric(expected[c], errors="coerce").fillna(-1)
            expected[c] = expected[c].astype("int64") if not expected.empty else expected[c]
        if table == "memops" and not expected.empty:
            expected["bytes"] = pd.to_numeric(expected["bytes"], errors="coerce")
        if table == "ops" and not expected.empty:
            c = "external_id"
            expected[c] = pd.to_numeric(expected[c], errors="coerce").fillna(-1).astype("int64")
        pd.testing.assert_frame_equal(actual, expected, check_exact=True, obj=table)


@pytest.mark.parametrize(
    "dims",
    [
        [[16, 512, 4096], [4096, 12288]],
        [[], [1]],
        [[[2, 3], [4, 5]], 7],
        [[1.5, 2]],
        [["a", "b"], [1]],  # strings: Python would quote them, so the slow spelling is used
        [None, True],
        "ab",
    ],
)
def test_shapes_read_as_the_per_item_spelling(dims):
    assert shapes(dims) == _reference_shapes(dims)


def test_categories_shared_by_one_table_keep_the_traces_order():
    events = [
        {"ph": "X", "cat": cat, "name": f"call{i}", "ts": i, "dur": 1, "args": {"correlation": i}}
        for i, cat in enumerate(["cuda_runtime", "cuda_driver", "Runtime", "cuda_driver"])
    ]
    taken = sort_events(events).taken["cuda_runtime"]  # the API table's fields, one bucket
    assert taken["name"] == ["call0", "call1", "call2", "call3"]
    api = trace_from_chrome({"traceEvents": events}).api
    assert api["name"].tolist() == ["call0", "call1", "call2", "call3"]
    assert api["correlation"].tolist() == [0, 1, 2, 3]


def test_the_collector_is_off_inside_the_pause_and_back_on_after():
    was = gc.isenabled()
    gc.enable()
    try:
        with paused_gc():
            assert not gc.isenabled()
            with paused_gc():
                assert not gc.isenabled()
            assert not gc.isenabled()  # an inner pause leaves the outer one paused
        assert gc.isenabled()
        gc.disable()
        with paused_gc():
            pass
        assert not gc.isenabled()  # switched off by the caller: left off
    finally:
        (gc.enable if was else gc.disable)()


def test_microseconds_round_to_the_nearest_nanosecond_and_untimed_events_are_dropped():
    events = [
        {"ph": "X", "cat": "kernel", "name": "a", "ts": 1.001, "dur": 0.007},  # 1000.99999... ns
        {"ph": "X", "cat": "kernel", "name": "b", "ts": "2.5", "dur": None},  # dur null: dropped
        {"ph": "X", "cat": "kernel", "name": "c", "ts": None, "dur": 1},  # no time: dropped
        {"ph": "X", "cat": "kernel", "name": "d", "ts": "3.25"},  # no dur: 0
        {"ph": "X", "cat": "kernel", "name": "e", "ts": float("nan"), "dur": 1},
    ]
    kernels = trace_from_chrome({"traceEvents": events}).kernels
    assert kernels["name"].tolist() == ["a", "d"]
    assert kernels["start"].tolist() == [1001, 3250]
    assert kernels["end"].tolist() == [1008, 3250]
