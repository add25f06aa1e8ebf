"""A Chrome trace's events sorted by what they are, and each table's fields taken as columns: what
``chrome_trace.trace_from_chrome`` builds a Trace's tables from.

A large torch.profiler trace holds hundreds of thousands of events, most of them torch ops. They are
sorted in one pass over the list (each spelling of a category normalised once, not once per event).
Each table's fields are then taken in one pass over its events, into a list per field: the parsed
events lie all over memory, and a pass per field, reading every event again, cost three times as
much. Times become numpy arrays, integer fields int64 arrays, and launch shapes, input shapes and
input types, which repeat from op to op, are spelled once per distinct value: no dict per row, no
DataFrame inferred from half a million dicts.

A field is read the same way whichever path reads it: a time that is missing or not a number drops
its event (it cannot be placed), a field that is missing is None.
"""

from __future__ import annotations

import gc
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...edges import JsonValue

#: Kineto's earlier category names -> today's (traces of PyTorch 1.8-1.9 and the tutorials made with
#: them).
OLD_CATEGORY = {
    "runtime": "cuda_runtime",
    "driver": "cuda_driver",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "operator": "cpu_op",
    "kernel": "kernel",
}
#: The categories read into one table with another's events, in the trace's order: the bucket they
#: share is the first one's.
_SHARED_BUCKET = {"gpu_memset": "gpu_memcpy", "cuda_driver": "cuda_runtime"}
_MEMCPY_KIND = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP)\b")
#: What kineto writes in "Input type" for an input that is no tensor: left out of an op's dtypes.
_NOT_A_TYPE = ("", "Scalar", "ScalarList", "TensorList", "GenericList")


def category(raw: JsonValue) -> str:
    """An event's category as gpumagic reads it: lower case, Kineto's old names as today's."""
    cat = str(raw).lower()
    return OLD_CATEGORY.get(cat, cat)


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off for the block. A parse allocates a dict per event, and every
    few hundred allocations the collector walks the young objects, and the whole heap now and then:
    on a 140 MB trace that tripled the parse. Nothing made here holds a cycle, so nothing is left
    for the collector; it is switched back on (where it was on) when the block ends."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


@dataclass
class SortedEvents:
    """A trace's events by what they are: complete ("X") events with a category in ``buckets``
    (by :func:`category`, except that ``gpu_memset`` shares ``gpu_memcpy``'s bucket, each in the
    trace's order), complete events without one in ``uncategorised``, and the ``process_name``
    metadata events in ``processes``. The fields of the three tables that hold most events, kernels
    (``kernel``), API calls (``cuda_runtime`` and ``cuda_driver``) and ops (``cpu_op``), are taken
    as the events are sorted, into ``taken`` under those keys, and their events kept nowhere: the
    event is read while it is at hand, not found in memory a second time."""

    buckets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    uncategorised: list[dict[str, Any]] = field(default_factory=list)
    processes: list[dict[str, Any]] = field(default_factory=list)
    taken: dict[str, dict[str, list[Any]]] = field(default_factory=dict)


def sort_events(events: list[Any]) -> SortedEvents:
    """One pass over ``events`` (anything not an object is passed over)."""
    out = SortedEvents()
    by_key: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    takers = {}
    for key, make in _TAKERS.items():
        takers[key], out.taken[key] = make()
    route: dict[Any, Callable[[dict[str, Any]], None]] = {}  # a spelling -> what takes its events
    uncategorised, processes = out.uncategorised, out.processes
    for ev in events:
        try:
            ph = ev.get("ph")
        except AttributeError:  # not an event object
            continue
        if ph == "X":
            raw = ev.get("cat")
            if not raw:
                uncategorised.append(ev)
                continue
            try:
                route[raw](ev)
            except KeyError:
                cat = category(raw)
                key = _SHARED_BUCKET.get(cat, cat)
                route[raw] = takers.get(key) or by_key[key].append
                route[raw](ev)
            except TypeError:  # a category that is not a string (a list): none gpumagic reads
                by_key[category(raw)].append(ev)
        elif ph == "M" and ev.get("name") == "process_name":
            processes.append(ev)
    out.buckets = dict(by_key)
    return out


def any_placed(evs: list[dict[str, Any]]) -> bool:
    """Whether any of ``evs`` can be placed in time (a number ``ts``, and a number ``dur`` or none),
    looking no further than the first that can."""
    return any(_ns([ev.get("ts"), ev.get("dur", 0)])[1].all() for ev in evs)


def _ns(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Microseconds -> (integer nanoseconds, whether each was a finite number). Kineto writes
    microseconds with three decimals; rounded half to even, as Python's ``round`` does."""
    try:
        us = np.array(values, dtype=np.float64)  # None -> NaN, "1.5" -> 1.5
    except (TypeError, ValueError):
        us = np.array([_number(v) for v in values], dtype=np.float64)
    ns = us * 1000.0
    ok = np.isfinite(ns)
    return np.rint(np.where(ok, ns, 0.0)).astype(np.int64), ok


def _number(v: JsonValue) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _placed(fields: dict[str, list[Any]]) -> dict[str, Any]:
    """``fields`` with ``ts`` and ``dur`` (microseconds) turned into ``start`` and ``end`` (integer
    nanoseconds), less the events that cannot be placed in time: a ``ts`` that is missing or not a
    number, a ``dur`` that is not a number (a missing one is 0) or is negative (it read as "GPU busy
    -3 ms" and an idle time past the span). The reader counts what was left out and says so."""
    start, ok = _ns(fields.pop("ts"))
    dur, ok_dur = _ns(fields.pop("dur"))
    ok &= ok_dur & (dur >= 0)
    if not ok.all():
        mask = ok.tolist()
        fields = {k: [v for v, keep in zip(col, mask) if keep] for k, col in fields.items()}
        start, dur = start[ok], dur[ok]
    return {"start": start, "end": start + dur, **fields}


def _ints(values: list[Any]) -> np.ndarray | list[Any]:
    """A column of Python ints as an int64 array (what pandas would infer, without its look at
    each value); any other column as it is, for pandas to infer."""
    if set(map(type, values)) == {int}:
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:  # beyond int64: pandas keeps such a column as objects
            pass
    return values


def _threads(values: list[Any]) -> np.ndarray | list[Any]:
    """A thread column, a ``tid`` that is no number or string (a list, an object) read as a
    missing one (None), as a list ``pid`` is no process: it reached pandas' grouping by thread
    and raised there."""
    kinds = set(map(type, values))
    if not kinds <= {int, str, type(None)}:
        values = [v if isinstance(v, (int, str)) else None for v in values]
    return _ints(values)


def _strs(values: list[Any]) -> list[str]:
    return values if set(map(type, values)) <= {str} else [str(v) for v in values]


def _spelling(evs: list[dict[str, Any]], columns: dict[str, Any]) -> set[Any]:
    """The category of a bucket of one category, as its first event spells it, where any of its
    events was placed."""
    return {evs[0].get("cat")} if len(columns["start"]) else set()


# Each table's fields are taken in one pass over its events: a pass per field reads every event
# from memory again, and on a large trace that cost three times as much. Each table's reads are
# spelled out in its own function, not looped over a list of field names or handed to a shared
# helper: on 500,000 kernel events a call per event made the take 12% slower, a loop over names 60%.


def _kernel_taker() -> tuple[Callable[[dict[str, Any]], None], dict[str, list[Any]]]:
    return kernel_taker({k: [] for k in _KERNEL_FIELDS})


def kernel_taker(
    fields: dict[str, list[Any]],
) -> tuple[Callable[[dict[str, Any]], None], dict[str, list[Any]]]:
    """A function that takes a kernel event's fields into ``fields`` (lists by
    :data:`_KERNEL_FIELDS`, appended to), and ``fields``."""
    name, ts, dur, device, stream, corr, grid, block, regs, smem = fields.values()

    def take(ev: dict[str, Any]) -> None:
        get = ev.get
        name.append(get("name", ""))
        ts.append(get("ts"))
        dur.append(get("dur", 0))
        a = get("args")
        if type(a) is not dict:
            a = a if isinstance(a, dict) else {}
        device.append(a.get("device"))
        stream.append(a.get("stream"))
        corr.append(a.get("correlation"))
        grid.append(a.get("grid"))
        block.append(a.get("block"))
        regs.append(a.get("registers per thread"))
        smem.append(a.get("shared memory"))

    return take, fields


_KERNEL_FIELDS: tuple[str, ...] = ("name", "ts", "dur", "device", "stream", "correlation", "grid")
_KERNEL_FIELDS += ("block", "registers", "shared_memory")


def kernel_columns(fields: dict[str, list[Any]]) -> tuple[dict[str, Any], set[str]]:
    """The kernels table's columns from the fields taken of ``kernel`` events, and the categories
    of the events placed."""
    c = _placed(dict(fields))
    for k in ("device", "stream", "correlation", "registers", "shared_memory"):
        c[k] = _ints(c[k])
    c["name"] = _strs(c["name"])
    c["grid"] = _spelled(c["grid"], _dim)
    c["block"] = _spelled(c["block"], _dim)
    return c, {"kernel"} if len(c["start"]) else set()


_MEMOP_FIELDS = ("ts", "dur", "cat", "name", "bytes", "device", "stream", "correlation")


def memop_columns(evs: list[dict[str, Any]]) -> tuple[dict[str, Any], set[Any]]:
    """The memory operations table's columns from ``gpu_memcpy`` and ``gpu_memset`` events (a
    copy's kind, HtoD, DtoH, ..., from its name; "memcpy" where the name does not say), and the
    categories (as spelled) of the events placed."""
    fields: dict[str, list[Any]] = {k: [] for k in _MEMOP_FIELDS}
    ts, dur, cat, name, nbytes, device, stream, corr = fields.values()
    for ev in evs:
        get = ev.get
        name.append(get("name", ""))
        ts.append(get("ts"))
        dur.append(get("dur", 0))
        cat.append(get("cat"))
        a = get("args")
        if type(a) is not dict:
            a = a if isinstance(a, dict) else {}
        nbytes.append(a.get("bytes"))
        device.append(a.get("device"))
        stream.append(a.get("stream"))
        corr.append(a.get("correlation"))
    c = _placed(fields)
    names = c["name"] = _strs(c["name"])
    cats = c.pop("cat")
    spelled = set(cats)
    memset = {raw for raw in spelled if category(raw) == "gpu_memset"}
    kinds: dict[str, str] = {}
    kind = []
    for raw, n in zip(cats, names):
        if raw in memset:
            kind.append("memset")
            continue
        k = kinds.get(n)
        if k is None:
            m = _MEMCPY_KIND.search(n)
            k = kinds[n] = m[1] if m else "memcpy"
        kind.append(k)
    for k in ("bytes", "device", "stream", "correlation"):
        c[k] = _ints(c[k])
    return {"kind": kind, **c}, spelled


def _api_taker() -> tuple[Callable[[dict[str, Any]], None], dict[str, list[Any]]]:
    fields: dict[str, list[Any]] = {k: [] for k in ("name", "ts", "dur", "thread", "cat", "corr")}
    name, ts, dur, tid, cat, corr = fields.values()

    def take(ev: dict[str, Any]) -> None:
        get = ev.get
        name.append(get("name", ""))
        ts.append(get("ts"))
        dur.append(get("dur", 0))
        tid.append(get("tid"))
        cat.append(get("cat"))
        a = get("args")
        if type(a) is not dict:
            a = a if isinstance(a, dict) else {}
        corr.append(a.get("correlation"))

    return take, fields


def api_columns(fields: dict[str, list[Any]]) -> tuple[dict[str, Any], set[str]]:
    """The API table's columns from the fields taken of ``cuda_runtime`` and ``cuda_driver``
    events, and the categories of the events placed."""
    c = _placed(dict(fields))
    spelled = {category(raw) for raw in set(c.pop("cat"))}
    c["correlation"] = _ints(c.pop("corr"))
    c["name"] = _strs(c["name"])
    c["thread"] = _threads(c["thread"])
    return c, spelled


def _op_taker() -> tuple[Callable[[dict[str, Any]], None], dict[str, list[Any]]]:
    fields: dict[str, list[Any]] = {k: [] for k in _OP_FIELDS}
    name, ts, dur, tid, dims, ext, types, seq, fwd = fields.values()

    def take(ev: dict[str, Any]) -> None:
        get = ev.get
        name.append(get("name", ""))
        ts.append(get("ts"))
        dur.append(get("dur", 0))
        tid.append(get("tid"))
        a = get("args")
        if type(a) is not dict:
            a = a if isinstance(a, dict) else {}
        dims.append(a.get("Input Dims"))
        ext.append(a.get("External id"))
        types.append(a.get("Input type"))
        seq.append(a.get("Sequence number"))
        fwd.append(a.get("Fwd thread id"))

    return take, fields


_OP_FIELDS = ("name", "ts", "dur", "thread", "shapes", "external_id", "dtypes", "seq", "fwd")


def op_columns(fields: dict[str, list[Any]]) -> tuple[dict[str, Any], set[str]]:
    """The ops table's columns (less ``depth``) from the fields taken of ``cpu_op`` events: shapes
    and input types as text ("[16, 512], [512]"; "float, c10::BFloat16"), None where the trace did
    not record them; and the categories of the events placed. Also ``autograd``, which is no
    column: the rows of the ops with an autograd sequence number, for ``chrome_code`` (taken in the
    same pass: a second pass over every op cost as much as the table)."""
    c = _placed(dict(fields))
    c["name"] = _strs(c["name"])
    auto = _autograd(c, c.pop("seq"), c.pop("fwd"))
    c["thread"] = _threads(c["thread"])
    c["shapes"], c["dtypes"] = _shapes_and_dtypes(c["shapes"], c["dtypes"])
    c["external_id"] = _ints(c["external_id"])
    c["autograd"] = auto
    return c, {"cpu_op"} if len(c["start"]) else set()


#: The buckets whose fields are taken as the events are sorted (``SortedEvents.taken``).
_TAKERS = {"kernel": _kernel_taker, "cuda_runtime": _api_taker, "cpu_op": _op_taker}


def _autograd(c: dict[str, Any], seq: list[Any], fwd: list[Any]) -> dict[str, list[Any]]:
    """The ops with a sequence number, as ``chrome_code.code_events`` keeps them: name, start, end,
    thread, seq, fwd_thread."""
    keep = [i for i, n in enumerate(seq) if n is not None]
    if len(keep) == len(seq):
        return {
            "name": list(c["name"]),
            "start": c["start"].tolist(),
            "end": c["end"].tolist(),
            "thread": list(c["thread"]),
            "seq": [int(n) for n in seq],
            "fwd_thread": [int(f or 0) for f in fwd],
        }
    return {
        "name": [c["name"][i] for i in keep],
        "start": c["start"][keep].tolist(),
        "end": c["end"][keep].tolist(),
        "thread": [c["thread"][i] for i in keep],
        "seq": [int(seq[i]) for i in keep],
        "fwd_thread": [int(fwd[i] or 0) for i in keep],
    }


def range_columns(evs: list[dict[str, Any]]) -> tuple[dict[str, Any], set[Any]]:
    """The NVTX table's columns (less ``depth``) from ``user_annotation`` events (record_function
    ranges), and the categories (as spelled) of the events placed."""
    c = _placed(
        {
            "ts": [ev.get("ts") for ev in evs],
            "dur": [ev.get("dur", 0) for ev in evs],
            "text": [ev.get("name", "") for ev in evs],
            "thread": [ev.get("tid") for ev in evs],
        }
    )
    n = len(c["start"])
    c["text"] = _strs(c["text"])
    c["thread"] = _threads(c["thread"])
    return {**c, "domain": ["torch.profiler"] * n, "style": ["PushPop"] * n}, _spelling(evs, c)


def _spelled(values: list[Any], spell: Callable[[JsonValue], str | None]) -> list[str | None]:
    """``spell(v)`` of each value, each distinct list of numbers or strings spelled once."""
    seen: dict[Any, str | None] = {}
    out = []
    for v in values:
        if type(v) is not list:
            out.append(spell(v))
            continue
        try:
            key = tuple(v)
            s = seen[key]
        except KeyError:
            s = seen[key] = spell(v)
        except TypeError:  # a list of lists: not kept
            s = spell(v)
        out.append(s)
    return out


def _shapes_and_dtypes(dims: list[Any], types: list[Any]) -> tuple[list[Any], list[Any]]:
    """Each op's :func:`shapes` and :func:`dtypes`, each distinct pair of "Input Dims" and "Input
    type" (told apart by their JSON: they nest lists) spelled once; each op's spelled anew where
    neither msgspec nor orjson is installed."""
    dumps = _fast_dumps()
    if dumps is None:
        return [shapes(d) for d in dims], _spelled(types, dtypes)
    seen: dict[bytes, tuple[Any, Any]] = {}
    out = []
    for pair in zip(dims, types):
        try:
            key = dumps(pair)
        except (TypeError, OverflowError):  # an int orjson cannot write (beyond 64 bits)
            out.append((shapes(pair[0]), dtypes(pair[1])))
            continue
        spelled = seen.get(key)
        if spelled is None:
            spelled = seen[key] = (shapes(pair[0]), dtypes(pair[1]))
        out.append(spelled)
    return [p[0] for p in out], [p[1] for p in out]


def _fast_dumps() -> Callable[[Any], bytes] | None:
    """A fast JSON writer (msgspec's or orjson's), or None where neither is installed."""
    try:
        from msgspec.json import encode

        return encode
    except ImportError:
        pass
    try:
        from orjson import dumps

        return dumps
    except ImportError:
        return None


def _dim(v: JsonValue) -> str | None:
    """A launch shape ([32, 96, 1]) as "32x96x1"."""
    if isinstance(v, (list, tuple)):
        return "x".join(str(int(x)) for x in v)
    return None if v is None else str(v)


def shapes(dims: JsonValue) -> str | None:
    """An op's "Input Dims" ([[16, 512], [], [[2], [2]]]) as "[16, 512], [], [[2], [2]]"."""
    if not dims:
        return None
    if type(dims) is list:
        text = str(dims)  # Python spells a list of lists of numbers the same way, at C speed
        if "'" not in text and '"' not in text:  # no strings, which Python would quote
            return text[1:-1]
    return ", ".join(
        "[" + ", ".join(str(x) for x in d) + "]" if isinstance(d, list) else str(d) for d in dims
    )


def dtypes(types: JsonValue) -> str | None:
    """An op's "Input type" (["c10::BFloat16", "Scalar", "float"]) as "c10::BFloat16, float": its
    tensors' types, where the trace recorded them."""
    if not types:
        return None
    return ", ".join(str(x) for x in types if x not in _NOT_A_TYPE)
