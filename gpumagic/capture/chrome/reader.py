"""Chrome trace JSON and Trace, both ways: ``load_trace(path)`` reads a torch.profiler (Kineto)
trace, and ``write_chrome_trace(trace, path)`` writes any Trace (nsys' too) for Perfetto or
chrome://tracing.

The live ``%%gpuprofile`` path exports the same JSON and reads it here, so a saved trace and a live
capture go through one parser. Kineto writes times in microseconds with three decimals (nanosecond
resolution); they are rounded to integer nanoseconds. Categories are matched case-insensitively and
under their old names too (Kineto once renamed ``Kernel`` to ``kernel``, kineto #659; traces of 2021
and many tutorials still say ``Runtime``, ``Memcpy``, ``Memset`` and ``Operator``), and fields that
a torch version lacks are left empty rather than failing: a copy whose ``bytes`` the trace does not
give (ROCm's) has unknown bytes (NaN), never a made-up -1 or 0.

Not everything in a Kineto trace is CUDA activity gpumagic reads. The events of devices it does not
read (MTIA's ``mtia_*`` categories, Intel's ``xpu_*``, ...) are counted in
``meta["unread_devices"]`` so that the report names the device and leaves it out, rather than
reading it as a GPU that recorded nothing. CUPTI's range profiler (``cuda_profiler_range`` events:
hardware counters per kernel, replayed, with no run time of their own) is counted in
``meta["range_profiler"]``: its kernels ran, and the trace holds their counters, not their times.

What the trace recorded goes into ``meta["recorded"]`` (``Trace.recorded``), from the categories it
has events of: a trace made without ``ProfilerActivity.CUDA`` has no kernels, and that is "not
recorded", never an idle GPU.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
from collections.abc import Callable
from typing import Any

import pandas as pd

from ...edges import JsonValue
from ...errors import FileMissingError, TraceFormatError, UnwritablePathError
from ...trace import Trace, frame, nesting_depth
from ...trace.chrome_export import CODE_TEXT_KEY, chrome_trace_events, write_chrome_trace
from ...trace.coverage import made_by_api, recorded_kinds
from ...trace.device_caps import amd_device_from_names, is_amd
from .code_text import code_events
from .events import (
    SortedEvents,
    any_placed,
    api_columns,
    category,
    kernel_columns,
    kernel_taker,
    memop_columns,
    op_columns,
    paused_gc,
    range_columns,
    sort_events,
)

__all__ = [
    "check_writable",
    "chrome_trace_events",
    "load_trace",
    "trace_from_chrome",
    "write_chrome_trace",
]

#: Category prefixes of devices whose activity gpumagic does not read -> what the device is called.
_UNREAD_DEVICE = {"mtia_": "MTIA", "xpu_": "XPU", "hpu_": "HPU", "privateuse1_": "PrivateUse1"}
#: CUPTI's range profiler: one event per profiled kernel, its args the counters.
_RANGE_PROFILER = "cuda_profiler_range"


def _ns(us: JsonValue) -> int:
    return round(float(us) * 1000.0)


def _finite(v: JsonValue) -> bool:
    """A number a time can be made of (an object ``ts`` raised TypeError in the reader)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load_trace(path: str | os.PathLike[str], window: str | None = None) -> Trace:
    """A Trace from a torch.profiler Chrome-trace JSON (``export_chrome_trace`` output, ``.json`` or
    ``.json.gz``).

    ``window``: the span its report's figures are taken over (``gpumagic.trace.window``): by default
    the profiler steps where the trace has them, else the span of its GPU activity; or a range's
    name, a step range ("3-5"), "gpu", "capture". Kept in ``meta["window_choice"]``; the Trace
    itself holds every event."""
    path = os.fspath(path)
    with paused_gc():  # one pause over the parse and the tables (chrome_events.paused_gc)
        trace = trace_from_chrome(read_chrome_json(path), path=path)
    trace.meta.setdefault("source", path)
    if window is not None:
        trace.meta["window_choice"] = str(window)
    return trace


def json_parser() -> tuple[str, Callable[[bytes], Any]]:
    """(its name, a function from the file's bytes to the parsed JSON): the fastest installed of
    ``msgspec`` and ``orjson`` (the ``perf`` extra: parsing is most of a large trace's load;
    ``benchmarks/large_trace.py`` measures each), else the standard library's.
    ``GPUMAGIC_JSON=json`` (or ``orjson``, ``msgspec``) picks one."""
    wanted = os.environ.get("GPUMAGIC_JSON", "")
    if wanted not in ("json", *_FAST_PARSERS):
        wanted = ""  # a name gpumagic does not know: the default
    for name in _FAST_PARSERS:
        if wanted in ("", name):
            try:
                return name, _FAST_PARSERS[name]()
            except ImportError:
                pass
    return "json", json.loads


def _msgspec() -> Callable[[bytes], Any]:
    from msgspec.json import Decoder

    return Decoder().decode  # integers beyond 64 bits stay integers, as the standard library's


def _orjson() -> Callable[[bytes], Any]:
    from orjson import loads

    return loads


#: The fast parsers, best first: a 144 MB trace loads in 2.42 s through msgspec against 2.58 s
#: through orjson, with 383 MB of peak memory against 732 MB (``benchmarks/large_trace.py``; the
#: parse alone is no faster, the events it builds are cheaper to read and to free).
_FAST_PARSERS = {"msgspec": _msgspec, "orjson": _orjson}


def read_chrome_json(path: str) -> dict[str, Any] | list[Any]:
    """The parsed JSON of a Chrome trace (``.json`` or ``.json.gz``): the one opener of every
    reader, so a missing or unreadable file is said the same way whichever reader met it. What a
    fast parser rejects and the standard library reads (``NaN``, ``Infinity``, a byte-order mark,
    which Python's own ``json.dump`` and some tools write) is read by the standard library's."""
    opener = gzip.open if path.endswith(".gz") else open
    name, parse = json_parser()
    try:
        with opener(path, "rb") as f, paused_gc():
            raw = f.read()
            try:
                data: dict[str, Any] | list[Any] = parse(raw)
                return data
            except ValueError:
                if name == "json" or not _only_json_reads(raw):
                    raise
                data = json.loads(raw)
                return data
    except FileNotFoundError:
        raise FileMissingError(path=path, what="The trace") from None
    except (OSError, EOFError, ValueError) as exc:  # JSON and UTF-8 errors are ValueErrors
        raise TraceFormatError(path=path, reason=str(exc)) from exc
    except RecursionError:  # arrays nested past the parser's depth: no trace is written so
        raise TraceFormatError(
            path=path, reason="its JSON is nested deeper than the parser reads"
        ) from None


def _only_json_reads(raw: bytes) -> bool:
    """Whether ``raw`` may hold what the standard library reads and the fast parsers refuse
    (``NaN``, ``Infinity``, a number beyond a double, a lone surrogate escape, a byte-order mark):
    a file that ends as a JSON document ends. A cut-off file does not, and is not parsed twice."""
    return raw.rstrip().endswith((b"}", b"]")) or raw.startswith(b"\xef\xbb\xbf")


def trace_from_chrome(data: dict[str, Any] | list[Any], path: str = "<data>") -> Trace:
    """A Trace from a Chrome trace already parsed: an object with a ``traceEvents`` list (what
    torch.profiler writes), or the bare list of event objects (the format's array form). ``path``
    names it in errors."""
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceFormatError(
            path=path,
            reason="no 'traceEvents' list: not a Chrome trace (torch.profiler's export writes one)",
        )
    if events and not any(isinstance(ev, dict) for ev in events):
        raise TraceFormatError(
            path=path, reason="its events are not event objects: not a Chrome trace"
        )
    if events and not any(isinstance(ev, dict) and "ph" in ev for ev in events[:_LOOK_AT]):
        first = next(ev for ev in events if isinstance(ev, dict))
        keys = ", ".join(sorted(map(str, first))[:6]) or "none"
        raise TraceFormatError(
            path=path,
            reason=(
                f"none of its first {min(len(events), _LOOK_AT):,} records has a 'ph' (the event's "
                f"phase; this file's first record has keys {keys}): a JSON list of records, such "
                "as a server's request trace or log, not a Chrome trace. A profiler trace is what "
                "torch.profiler's export_chrome_trace (or nsys, read with load_nsys) writes"
            ),
        )
    with paused_gc():
        return _build(data, events)


def _build(data: dict[str, Any] | list[Any], events: list[Any]) -> Trace:
    """The Trace of a Chrome trace's ``events`` (``data``: the whole file, for its metadata)."""
    sorted_events = sort_events(events)
    buckets = sorted_events.buckets
    dispatches = _dispatch_list(data, sorted_events)
    unread = _npu_tasks(sorted_events)
    profiled, counters, cats = _set_aside(buckets, unread)
    columns = _table_columns(sorted_events, buckets, cats)
    meta = _meta(data if isinstance(data, dict) else {}, buckets.get("trace", []))
    unplaced = _unplaced(sorted_events, buckets, columns)
    if unplaced:
        meta["unplaced_events"] = unplaced
    if dispatches:
        meta["backend"] = ROCPROF
        meta["vendor"] = "AMD"
    rows = {table: len(c["start"]) for table, c in columns.items()}
    uncategorised = len(sorted_events.uncategorised)
    for table in _not_cuda(meta, unread, uncategorised, cats, rows):
        columns[table] = {}
    if unread:
        meta["unread_devices"] = unread
    if profiled:
        meta["range_profiler"] = {
            "kernels": sum(profiled.values()),
            "names": len(profiled),
            "counters": sorted(counters),
        }
    names = columns["api"].get("name", [])
    _said_as_amd(meta, names, columns["kernels"].get("name", []))
    meta["recorded"] = recorded_kinds(
        {kind for kind, held in _HELD.items() if cats & held}, {made_by_api(n) for n in set(names)}
    )
    autograd = columns["ops"].pop("autograd", None)
    meta.update(code_events(buckets.get("python_function", []), autograd))
    if "code_text" in meta:  # the functions' text, beside the ranges the events gave back
        meta.setdefault("code", {}).update(meta.pop("code_text"))
    return _tables(columns, meta)


def _npu_tasks(sorted_events: SortedEvents) -> dict[str, dict[str, int]]:
    """The events without a category that are an Ascend NPU's tasks, counted by process
    (``{"NPU": {process: count}}``; {} where there are none): what ``meta["unread_devices"]``
    starts from."""
    processes = _process_names(sorted_events.processes)
    unread: dict[str, dict[str, int]] = {}
    for ev in sorted_events.uncategorised:
        npu = _npu_task(ev, processes)
        if npu:
            per = unread.setdefault("NPU", {})
            per[npu] = per.get(npu, 0) + 1
    return unread


def _set_aside(
    buckets: dict[str, list[dict[str, Any]]], unread: dict[str, dict[str, int]]
) -> tuple[dict[str, int], set[str], set[str]]:
    """Take out of ``buckets`` what is not activity gpumagic reads: a device's it does not read
    (counted by category into ``unread``) and the range profiler's (its kernels counted by name,
    the counters they hold named). Returns those counts, those counters, and the other categories
    with an event placed in time, less the tables' own (the tables add theirs as they are read)."""
    profiled: dict[str, int] = {}
    counters: set[str] = set()
    cats: set[str] = set()
    for cat, evs in list(buckets.items()):
        device_kind = next(
            (d for prefix, d in _UNREAD_DEVICE.items() if cat.startswith(prefix)), None
        )
        if device_kind:
            unread.setdefault(device_kind, {})[cat] = len(evs)
            del buckets[cat]
        elif cat == _RANGE_PROFILER:
            for ev in evs:
                name = str(ev.get("name", ""))
                profiled[name] = profiled.get(name, 0) + 1
                args = ev.get("args") or {}
                counters.update(k for k, v in args.items() if isinstance(v, (int, float)))
            del buckets[cat]
        elif cat not in _TABLE_BUCKETS and any_placed(evs):
            cats.add(cat)
    return profiled, counters, cats


def _table_columns(
    sorted_events: SortedEvents, buckets: dict[str, list[dict[str, Any]]], cats: set[str]
) -> dict[str, dict[str, Any]]:
    """Each table's columns, from the fields taken as the events were sorted (kernels, API calls,
    ops: their events kept nowhere) or from its bucket; the categories of the events placed are
    added to ``cats``."""
    columns = {}
    for cat, table in _TABLE_BUCKETS.items():
        taken = sorted_events.taken.get(cat)
        columns[table], spelled = _COLUMNS_OF[table](
            buckets.get(cat, []) if taken is None else taken
        )
        cats.update(map(category, spelled))
    return columns


def _said_as_amd(meta: dict[str, Any], api_names: list[Any], kernel_names: list[Any]) -> None:
    """A ROCm trace (HIP calls, or an AMD device) said as AMD's: its ``computeMajor`` (9 for
    gfx90a) is no NVIDIA compute capability, and where it names no device, the GPU its kernels
    were built for stands in."""
    if not (any(str(n).startswith("hip") for n in api_names[:1000]) or is_amd(meta)):
        return
    meta["vendor"] = "AMD"
    meta.pop("compute_capability", None)
    if not meta.get("device"):  # no deviceProperties
        meta["device"] = amd_device_from_names(pd.unique(pd.Series(kernel_names)))


def _tables(columns: dict[str, dict[str, Any]], meta: dict[str, Any]) -> Trace:
    """The Trace of the tables' columns: integer fields as int64 (-1 where missing), the nesting
    depth of ops and ranges, a copy's unknown bytes as NaN."""
    ops_df = frame("ops", pd.DataFrame(columns["ops"]))
    if not ops_df.empty:
        ops_df["depth"] = nesting_depth(ops_df)
    nvtx_df = frame("nvtx", pd.DataFrame(columns["nvtx"]))
    if not nvtx_df.empty:
        nvtx_df["depth"] = nesting_depth(nvtx_df)
    memops = frame("memops", pd.DataFrame(columns["memops"]))
    return Trace(
        kernels=_ints(
            frame("kernels", pd.DataFrame(columns["kernels"])),
            ["correlation", "registers", "shared_memory"],
        ),
        memops=_unknown_bytes(_ints(memops, ["correlation"])),
        ops=_ints(ops_df, ["external_id"]),
        nvtx=nvtx_df,
        api=_ints(frame("api", pd.DataFrame(columns["api"])), ["correlation"]),
        meta=meta,
    )


#: How many of a file's first records are looked at for a Chrome event's phase.
_LOOK_AT = 1000
#: The backend of a GPU dispatch list (rocprof's kernels written as Chrome JSON).
ROCPROF = "rocprof"
#: The categories a dispatch list files its GPU dispatches under.
_DISPATCH_CATEGORIES = ("gpu", "kernel_dispatch")


def _unplaced(
    sorted_events: SortedEvents, buckets: dict[str, Any], columns: dict[str, Any]
) -> dict[str, int]:
    """Per GPU table, how many of its events were left out for a time that cannot be placed (a
    negative or NaN ``dur``, a ``ts`` that is no number): counted, so that the report says so
    rather than "the trace has no 'kernel' events"."""
    out = {}
    for cat, table in (("kernel", "kernels"), ("gpu_memcpy", "memops")):
        taken = sorted_events.taken.get(cat)
        raw = len(taken["ts"]) if taken is not None else len(buckets.get(cat, []))
        left = raw - len(columns[table].get("start", []))
        if left > 0:
            out[table] = left
    return out


def _dispatch_list(data: JsonValue, events: SortedEvents) -> int:
    """How many GPU dispatches a rocprof kernel list holds, now taken as kernels (0 for any other
    file). Such a list writes each dispatch as a complete event in category ``gpu`` with no
    Kineto metadata and no ``kernel`` events: its device is the event's ``gpu-id`` (else its
    process), its queue the stream (else its thread)."""
    kernels = events.taken["kernel"]
    meta_keys = ("schemaVersion", "deviceProperties", "distributedInfo", "traceName")
    if kernels["name"] or (isinstance(data, dict) and any(k in data for k in meta_keys)):
        return 0
    found = [c for c in _DISPATCH_CATEGORIES if events.buckets.get(c)]
    if not found:
        return 0
    take, _ = kernel_taker(kernels)
    n = 0
    for cat in found:
        for ev in events.buckets.pop(cat):
            args: JsonValue = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            pid, tid = (_id(ev.get(k)) for k in ("pid", "tid"))  # a list one is no device
            device = args.get("gpu-id", args.get("agent", args.get("device", pid)))
            stream = args.get("queue-id", args.get("queue", args.get("stream", tid)))
            take({**ev, "args": {**args, "device": device, "stream": stream}})
            n += 1
    return n


def _id(value: JsonValue) -> int | str | None:
    """A process or thread id as the trace wrote it, None where it is no number or string."""
    return value if isinstance(value, (int, str)) else None


#: The bucket of events (``chrome_events.sort_events``) each table is read from.
_TABLE_BUCKETS = {
    "kernel": "kernels",
    "gpu_memcpy": "memops",
    "cuda_runtime": "api",
    "cpu_op": "ops",
    "user_annotation": "nvtx",
}
#: How each table's columns are taken from its placed events.
_COLUMNS_OF: dict[str, Callable[[Any], tuple[dict[str, Any], set[Any]]]] = {
    "kernels": kernel_columns,
    "memops": memop_columns,
    "api": api_columns,
    "ops": op_columns,
    "nvtx": range_columns,
}


def _process_names(events: list[dict[str, Any]]) -> dict[Any, str]:
    """Each process's name from the trace's ``process_name`` metadata events."""
    names = {}
    for ev in events:
        pid, args = ev.get("pid"), ev.get("args")
        if isinstance(pid, (int, str)) and isinstance(args, dict):  # a list pid is no key
            names[pid] = str(args.get("name", ""))
    return names


#: What Ascend's profiler (torch_npu) calls the processes of device tasks in its trace_view.json.
_NPU_PROCESS = re.compile(r"Ascend Hardware|AI Core|NPU", re.IGNORECASE)


def _npu_task(ev: dict[str, Any], processes: dict[Any, str]) -> str | None:
    """What an event without a category is on an Ascend NPU (its process, "Ascend Hardware"), or
    None: torch_npu's export writes its device tasks without one, their "Task Type" in args."""
    pid = ev.get("pid")
    process = processes.get(pid, "") if isinstance(pid, (int, str)) else ""
    args = ev.get("args") or {}
    if _NPU_PROCESS.search(process) or (isinstance(args, dict) and "Task Type" in args):
        return process or "NPU task"
    return None


def _not_cuda(
    meta: dict[str, Any],
    unread: dict[str, dict[str, int]],
    uncategorised: int,
    cats: set[str],
    rows: dict[str, int],
) -> list[str]:
    """Say what a file that is not a CUDA torch.profiler trace is, in ``meta`` and ``unread``: an
    Ascend NPU export (torch_npu; its backend says so, no CUDA advice); a bare event list without
    categories (nothing in it can be told apart as GPU work: a Chrome trace, not Kineto's); an XPU
    trace, whose kernels and copies ride Kineto's shared categories beside ``xpu_runtime`` calls
    (they are XPU activity, left out with it, never read as a GPU that recorded no CUDA calls).
    ``rows``: each table's row count. Returns the tables to leave empty."""
    if "NPU" in unread:
        meta["backend"] = "torch_npu profiler"
        meta.setdefault("device", "Ascend NPU")
        rest = uncategorised - sum(unread["NPU"].values())
        if rest:
            unread["NPU"]["other uncategorised"] = rest
    elif uncategorised and not cats:
        meta["backend"] = "Chrome trace"
        unread["uncategorised"] = {"events without a category": uncategorised}
    if "XPU" not in unread or rows["api"]:
        return []
    for table, cat in (("kernels", "kernel"), ("memops", "gpu_memcpy/gpu_memset")):
        if rows[table]:
            unread["XPU"][cat] = rows[table]
    cats -= {"kernel", "gpu_memcpy", "gpu_memset"}  # not CUDA's: not recorded, but left out
    return ["kernels", "memops"]


#: The categories whose events are each kind of record. Torch ops and record_function ranges are
#: both what ProfilerActivity.CPU records: either shows it was on.
_HELD = {
    "kernels": {"kernel"},
    "memops": {"gpu_memcpy", "gpu_memset"},
    "api": {"cuda_runtime", "cuda_driver"},
    "ops": {"cpu_op", "user_annotation"},
    "nvtx": {"cpu_op", "user_annotation"},
}


def _ints(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    for c in cols:
        if c in df.columns and not df.empty:
            df[c] = pd.to_numeric(df[c], errors="coerce").fillna(-1).astype("int64")
    return df


def _unknown_bytes(df: pd.DataFrame) -> pd.DataFrame:
    """Bytes as numbers, NaN where the trace does not give them (ROCm's copies have no ``bytes``):
    unknown, never a -1 or 0 that a sum would turn into "-0 MB"."""
    if not df.empty:
        df["bytes"] = pd.to_numeric(df["bytes"], errors="coerce")
    return df


def _meta(data: dict[str, Any], trace_events: list[dict[str, Any]]) -> dict[str, Any]:
    """The device, versions and capture window (the first ``Trace`` event's span) of a trace;
    ``trace_events``: its complete events of category ``Trace`` (any case)."""
    meta: dict[str, Any] = {"backend": "torch.profiler"}
    props = data.get("deviceProperties") or []
    if not isinstance(props, list) or not props or not isinstance(props[0], dict):
        props = []  # an int or a list of non-objects: no device named, never a TypeError
    if props:
        p = props[0]
        meta["device"] = p.get("name")
        meta["sm_count"] = p.get("numSms")
        if p.get("computeMajor") is not None:
            meta["compute_capability"] = f"{p.get('computeMajor')}.{p.get('computeMinor')}"
    for key in ("cuda_driver_version", "cuda_runtime_version", "cupti_version", "schemaVersion"):
        if key in data:
            meta[key] = data[key]
    spans = [e for e in trace_events if e.get("cat") == "Trace" and _finite(e.get("ts"))]
    if spans:
        s = _ns(spans[0]["ts"])
        dur = spans[0].get("dur", 0)
        meta["window"] = (s, s + (_ns(dur) if _finite(dur) and dur >= 0 else 0))
    written = (data.get("metadata") or {}).get(CODE_TEXT_KEY)  # a trace gpumagic wrote
    if isinstance(written, dict):
        if isinstance(written.get("cell_source"), str):
            meta["cell_source"] = written["cell_source"]
        code = {k: written[k] for k in ("functions", "cells") if written.get(k)}
        if code:
            meta["code_text"] = code
    return meta


# --- writing
# --------------------------------------------------------------------------------------------------


def check_writable(path: str | os.PathLike[str], option: str = "path") -> None:
    """Raise :class:`UnwritablePathError` unless a file can be written at ``path``: tried for real
    (opened for appending, and removed again where it was not there), so that a capture does not run
    only to fail at its end."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise UnwritablePathError(path=path, option=option, reason="it is a directory")
    existed = os.path.exists(path)
    try:
        with open(path, "ab"):
            pass
    except FileNotFoundError:
        where = os.path.dirname(os.path.abspath(path))
        raise UnwritablePathError(
            path=path, option=option, reason=f"the directory {where} does not exist"
        ) from None
    except OSError as exc:
        raise UnwritablePathError(
            path=path, option=option, reason=exc.strerror or str(exc)
        ) from None
    if not existed:
        try:
            os.remove(path)
        except OSError:
            pass
