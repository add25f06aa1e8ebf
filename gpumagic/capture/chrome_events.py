"""A Chrome trace's events sorted by what they are, and each table's fields taken as columns: what
``chrome_trace.trace_from_chrome`` builds a Trace's tables from.

A large torch.profiler trace holds hundreds of thousands of events, most of them torch ops. They are
sorted in one pass over the list (each spelling of a category normalised once, not once per event),
then each table is taken a field at a time: a list comprehension per field and the times as one
numpy array, not a dict per row and a DataFrame inferred from half a million dicts. Launch shapes,
input shapes and input types repeat from event to event, so each distinct one is spelled once.

A field is read the same way whichever path reads it: a time that is missing or not a number drops
its event (it cannot be placed), a field that is missing is None.
"""

from __future__ import annotations

import gc
import re
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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


def category(raw: Any) -> str:
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
    (by :func:`category`, except that ``gpu_memset`` shares ``gpu_memcpy``'s bucket and
    ``cuda_driver`` ``cuda_runtime``'s, each in the trace's order), complete events without one in
    ``uncategorised``, and the ``process_name`` metadata events in ``processes``."""

    buckets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    uncategorised: list[dict[str, Any]] = field(default_factory=list)
    processes: list[dict[str, Any]] = field(default_factory=list)
    #: Each spelling of a category met -> :func:`category` of it.
    spellings: dict[Any, str] = field(default_factory=dict)


def sort_events(events: list[Any]) -> SortedEvents:
    """One pass over ``events`` (anything not an object is passed over)."""
    out = SortedEvents()
    by_key: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    route: dict[Any, list[dict[str, Any]]] = {}  # a spelling -> its bucket
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
                route[raw].append(ev)
            except KeyError:
                cat = out.spellings[raw] = category(raw)
                route[raw] = by_key[_SHARED_BUCKET.get(cat, cat)]
                route[raw].append(ev)
            except TypeError:  # a category that is not a string (a list): none gpumagic reads
                by_key[category(raw)].append(ev)
        elif ph == "M" and ev.get("name") == "process_name":
            processes.append(ev)
    out.buckets = dict(by_key)
    return out


def placed(evs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray]:
    """The events that can be placed in time (a number ``ts``, and a number ``dur`` or none), with
    their start and end in integer nanoseconds: Kineto writes microseconds with three decimals,
    rounded here half to even as Python's ``round`` does."""
    start, ok = _ns([ev.get("ts") for ev in evs])
    dur, ok_dur = _ns([ev.get("dur", 0) for ev in evs])
    ok &= ok_dur
    if not ok.all():
        evs = [ev for ev, keep in zip(evs, ok.tolist()) if keep]
        start, dur = start[ok], dur[ok]
    return evs, start, start + dur


def any_placed(evs: list[dict[str, Any]]) -> bool:
    """Whether any of ``evs`` can be placed in time (:func:`placed`), looking no further than the
    first that can."""
    return any(_ns([ev.get("ts"), ev.get("dur", 0)])[1].all() for ev in evs)


def _ns(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Microseconds -> (integer nanoseconds, whether each was a finite number)."""
    try:
        us = np.array(values, dtype=np.float64)  # None -> NaN, "1.5" -> 1.5
    except (TypeError, ValueError):
        us = np.array([_number(v) for v in values], dtype=np.float64)
    ns = us * 1000.0
    ok = np.isfinite(ns)
    return np.rint(np.where(ok, ns, 0.0)).astype(np.int64), ok


def _number(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _ints(values: list[Any]) -> np.ndarray | list[Any]:
    """A column of Python ints as an int64 array (what pandas would infer, without its look at
    each value); any other column as it is, for pandas to infer."""
    if set(map(type, values)) == {int}:
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:  # beyond int64: pandas keeps such a column as objects
            pass
    return values


def _args(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [ev.get("args") or {} for ev in evs]
    if not all(type(a) is dict for a in out):
        out = [a if isinstance(a, dict) else {} for a in out]
    return out


def _names(evs: list[dict[str, Any]]) -> list[str]:
    return [str(ev.get("name", "")) for ev in evs]


def kernel_columns(evs: list[dict[str, Any]], start: np.ndarray, end: np.ndarray) -> dict[str, Any]:
    """The kernels table's columns from ``kernel`` events."""
    args = _args(evs)
    return {
        "name": _names(evs),
        "start": start,
        "end": end,
        "device": _ints([a.get("device") for a in args]),
        "stream": _ints([a.get("stream") for a in args]),
        "correlation": _ints([a.get("correlation") for a in args]),
        "grid": _spelled([a.get("grid") for a in args], _dim),
        "block": _spelled([a.get("block") for a in args], _dim),
        "registers": _ints([a.get("registers per thread") for a in args]),
        "shared_memory": _ints([a.get("shared memory") for a in args]),
    }


def memop_columns(evs: list[dict[str, Any]], start: np.ndarray, end: np.ndarray) -> dict[str, Any]:
    """The memory operations table's columns from ``gpu_memcpy`` and ``gpu_memset`` events: a
    copy's kind (HtoD, DtoH, ...) from its name, "memcpy" where the name does not say."""
    args = _args(evs)
    names = _names(evs)
    kinds: dict[str, str] = {}
    kind = []
    memset = {raw for raw in {ev.get("cat") for ev in evs} if category(raw) == "gpu_memset"}
    for ev, name in zip(evs, names):
        if ev.get("cat") in memset:
            kind.append("memset")
            continue
        k = kinds.get(name)
        if k is None:
            m = _MEMCPY_KIND.search(name)
            k = kinds[name] = m[1] if m else "memcpy"
        kind.append(k)
    return {
        "kind": kind,
        "name": names,
        "bytes": _ints([a.get("bytes") for a in args]),
        "start": start,
        "end": end,
        "device": _ints([a.get("device") for a in args]),
        "stream": _ints([a.get("stream") for a in args]),
        "correlation": _ints([a.get("correlation") for a in args]),
    }


def api_columns(evs: list[dict[str, Any]], start: np.ndarray, end: np.ndarray) -> dict[str, Any]:
    """The API table's columns from ``cuda_runtime`` and ``cuda_driver`` events."""
    return {
        "name": _names(evs),
        "start": start,
        "end": end,
        "thread": _ints([ev.get("tid") for ev in evs]),
        "correlation": _ints([a.get("correlation") for a in _args(evs)]),
    }


def op_columns(evs: list[dict[str, Any]], start: np.ndarray, end: np.ndarray) -> dict[str, Any]:
    """The ops table's columns (less ``depth``) from ``cpu_op`` events: shapes and input types as
    text ("[16, 512], [512]"; "float, c10::BFloat16"), None where the trace did not record them."""
    args = _args(evs)
    return {
        "name": _names(evs),
        "start": start,
        "end": end,
        "thread": _ints([ev.get("tid") for ev in evs]),
        "shapes": _spelled_by_json([a.get("Input Dims") for a in args], shapes),
        "external_id": _ints([a.get("External id") for a in args]),
        "dtypes": _spelled([a.get("Input type") for a in args], dtypes),
    }


def range_columns(evs: list[dict[str, Any]], start: np.ndarray, end: np.ndarray) -> dict[str, Any]:
    """The NVTX table's columns (less ``depth``) from ``user_annotation`` events (record_function
    ranges)."""
    n = len(evs)
    return {
        "text": _names(evs),
        "start": start,
        "end": end,
        "thread": _ints([ev.get("tid") for ev in evs]),
        "domain": ["torch.profiler"] * n,
        "style": ["PushPop"] * n,
    }


def _spelled(values: list[Any], spell: Any) -> list[str | None]:
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


def _spelled_by_json(values: list[Any], spell: Any) -> list[str | None]:
    """``spell(v)`` of each value, each distinct one (lists of lists: told apart by their JSON)
    spelled once; each spelled anew where orjson is not installed."""
    try:
        from orjson import dumps
    except ImportError:
        return [spell(v) for v in values]
    seen: dict[bytes, str | None] = {}
    out = []
    for v in values:
        if v is None:
            out.append(spell(v))
            continue
        try:
            key = dumps(v)
        except TypeError:  # an int beyond 64 bits
            out.append(spell(v))
            continue
        s = seen.get(key, seen)
        if s is seen:
            s = seen[key] = spell(v)
        out.append(s)
    return out


def _dim(v: Any) -> str | None:
    """A launch shape ([32, 96, 1]) as "32x96x1"."""
    if isinstance(v, (list, tuple)):
        return "x".join(str(int(x)) for x in v)
    return None if v is None else str(v)


def shapes(dims: Any) -> str | None:
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


def dtypes(types: Any) -> str | None:
    """An op's "Input type" (["c10::BFloat16", "Scalar", "float"]) as "c10::BFloat16, float": its
    tensors' types, where the trace recorded them."""
    if not types:
        return None
    return ", ".join(str(x) for x in types if x not in _NOT_A_TYPE)
