"""Any Trace (a torch.profiler capture, an nsys export, a whole job) written as Chrome/Perfetto
trace JSON: complete ('X') events in microseconds with the args ``capture/chrome/reader.py``'s
reader takes back, so a written trace reads back into the same tables.

Writing is a format of the data model, not a capture: it lives below both the readers
(``capture.chrome.reader`` re-exports it beside its reader) and the views
(``ProfileReport.to_chrome_trace``, ``%%gpuprofile --trace``), so the render layer writes a trace
without importing a capture backend.
"""

from __future__ import annotations

import json
import os
from typing import Any, SupportsInt

import pandas as pd

from .model import Trace

__all__ = ["chrome_trace_events", "write_chrome_trace"]


#: Trace table -> (Chrome category, name column, process, thread column, {Trace column: the reader's
#: args key}): the reader's own categories and keys, so a written trace reads back into the same
#: tables.
_WRITE: tuple[tuple[str, str, str, str, str, dict[str, str]], ...] = (
    ("ops", "cpu_op", "name", "CPU", "thread", {"external_id": "External id"}),
    ("api", "cuda_runtime", "name", "CPU", "thread", {"correlation": "correlation"}),
    ("nvtx", "user_annotation", "text", "CPU", "thread", {}),
    (
        "kernels",
        "kernel",
        "name",
        "GPU",
        "stream",
        {
            "device": "device",
            "stream": "stream",
            "correlation": "correlation",
            "grid": "grid",
            "block": "block",
            "registers": "registers per thread",
            "shared_memory": "shared memory",
        },
    ),
    (
        "memops",
        "gpu_memcpy",
        "name",
        "GPU",
        "stream",
        {"bytes": "bytes", "device": "device", "stream": "stream", "correlation": "correlation"},
    ),
    ("osrt", "osrt", "name", "CPU", "thread", {}),
)


def chrome_trace_events(trace: Trace) -> dict[str, Any]:
    """The Chrome/Perfetto JSON object of ``trace``: complete ('X') events with microsecond times
    and the args the reader takes back (stream, correlation, bytes, launch geometry)."""
    events: list[dict[str, Any]] = []
    code = trace.meta.get("code") or {}
    seq = _sequence_args(code.get("autograd") or {})
    for table, cat, name_col, pid, tid_col, arg_keys in _WRITE:
        df = getattr(trace, table)
        if df.empty:
            continue
        columns = [c for c in arg_keys if c in df.columns]
        rows = zip(df[name_col], df[tid_col], df["start"], df["end"], *(df[c] for c in columns))
        kinds = df["kind"].astype(str) if table == "memops" else None
        procs = _process_lanes(df, pid)
        for i, (name, tid, start, end, *values) in enumerate(rows):
            args = {
                arg_keys[c]: _json_value(v)
                for c, v in zip(columns, values)
                if _json_value(v) is not None
            }
            if table == "ops" and seq:  # autograd's link from a backward op to its forward op
                args.update(seq.get((str(name), int(start), int(end)), {}))
            events.append(
                {
                    "ph": "X",
                    "cat": "gpu_memset" if kinds is not None and kinds.iat[i] == "memset" else cat,
                    "name": str(name),
                    "pid": procs[i] if procs is not None else pid,
                    "tid": _json_tid(tid),
                    "ts": start / 1000.0,
                    "dur": (end - start) / 1000.0,
                    **({"args": args} if args else {}),
                }
            )
    events += _code_events(code)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "metadata": {
            **{k: str(v) for k, v in trace.meta.items() if k != "code"},
            **_code_text(trace.meta),
        },
    }


#: The metadata key that carries what the by-line view reads beside the events.
CODE_TEXT_KEY = "gpumagic_code_text"


def _code_text(meta: dict[str, Any]) -> dict[str, Any]:
    """The text the by-line rows show, as plain JSON under :data:`CODE_TEXT_KEY`: the cell's
    source, the functions marked (their names, files and lines) and the cells' numbers."""
    code = meta.get("code") or {}
    text = {
        "cell_source": meta.get("cell_source"),
        "functions": code.get("functions"),
        "cells": code.get("cells"),
    }
    text = {k: v for k, v in text.items() if v}
    return {CODE_TEXT_KEY: text} if text else {}


def _sequence_args(autograd: dict[str, list[Any]]) -> dict[tuple[str, int, int], dict[str, int]]:
    """(op name, start, end) -> the "Sequence number" and "Fwd thread id" args torch.profiler gave
    the op (``meta["code"]["autograd"]``), so that a written trace reads back with them."""
    keys = zip(autograd.get("name", []), autograd.get("start", []), autograd.get("end", []))
    values = zip(autograd.get("seq", []), autograd.get("fwd_thread", []))
    return {
        (str(n), int(s), int(e)): {"Sequence number": int(q), "Fwd thread id": int(f)}
        for (n, s, e), (q, f) in zip(keys, values)
    }


def _code_events(code: dict[str, Any]) -> list[dict[str, Any]]:
    """What a trace held of the user's code, as the reader takes it back: Python frames as
    ``python_function`` events, the ranges of a cell's lines and modules as ``user_annotation``
    ones."""
    out = []
    kinds = (("frames", "python_function"), ("lines", "user_annotation"))
    for key, cat in (*kinds, ("modules", "user_annotation")):
        kept = code.get(key) or {}
        names = kept.get("name") or kept.get("text") or []
        rows = zip(names, kept.get("thread", []), kept.get("start", []), kept.get("end", []))
        for name, tid, start, end in rows:
            out.append(
                {
                    "ph": "X",
                    "cat": cat,
                    "name": str(name),
                    "pid": "CPU",
                    "tid": _json_tid(tid),
                    "ts": start / 1000.0,
                    "dur": (end - start) / 1000.0,
                }
            )
    return out


def _process_lanes(df: pd.DataFrame, kind: str) -> list[str] | None:
    """With several processes in one table (a multi-rank capture): one lane group per process ("GPU
    · pid 9001"), so that the ranks' streams and threads do not merge in Perfetto; None for one
    process (the plain "CPU"/"GPU")."""
    if "pid" not in df.columns:
        return None
    pids = pd.to_numeric(df["pid"], errors="coerce")
    if pids.nunique(dropna=True) <= 1:
        return None
    return [f"{kind} \u00b7 pid {int(p)}" if p == p else kind for p in pids]


def _json_value(v: SupportsInt | str | None) -> int | list[int] | str | None:
    """A table value as the reader expects it back: launch geometry 'XxYxZ' as a list, numbers as
    int, -1 and missing values left out."""
    if v is None or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, str):
        dims = v.split("x")
        return [int(d) for d in dims] if len(dims) == 3 and all(d.isdigit() for d in dims) else v
    try:
        n = int(v)
    except (TypeError, ValueError):
        return str(v)
    return None if n == -1 else n


def _json_tid(tid: SupportsInt | str | None) -> int | str | None:
    """A thread or stream id JSON can hold: numpy integers as int, a missing (NaN) one as 0."""
    if tid is None or isinstance(tid, str):
        return tid
    return int(tid) if tid == tid else 0


def write_chrome_trace(trace: Trace, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Write ``trace`` as Chrome/Perfetto JSON to ``path``; return the object written."""
    data = chrome_trace_events(trace)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return data
