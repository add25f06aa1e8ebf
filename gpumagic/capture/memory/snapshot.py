"""The caching allocator's snapshot (what ``torch.cuda.memory._dump_snapshot`` pickles), read into
flat arrays.

The file is a pickled dict of plain Python values (torch/cuda/memory.py ``_snapshot``): ``segments``
(the memory reserved from CUDA when the snapshot was taken, each with its ``blocks``: ``size``,
``requested_size``, ``address``, ``state`` and the ``frames`` of the allocation) and
``device_traces`` (one list per device of history entries: ``action`` alloc / free_requested /
free_completed / segment_alloc / segment_free / oom / snapshot, ``addr``, ``size``, ``stream``,
``time_us``, ``frames``; ``device_free`` on an oom). It is unpickled with every class refused: a
snapshot holds no objects, so a file that names one is not a snapshot, and refusing them means
opening a file from elsewhere runs none of its code.

A million entries must read in well under a second or two, so the per-entry work is a few dict
lookups: the allocation's stack is kept as an index into a table of distinct stacks, keyed by the
identities of its frame dicts (torch builds one dict per distinct frame and shares it between the
entries that hold it, and pickle keeps that sharing), and everything else goes into numpy arrays.
Frames are innermost first, as torch records them.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import IO, Any, NoReturn

import numpy as np

from ...errors import GpuMagicError, InvalidOptionError
from ..chrome.events import paused_gc

__all__ = [
    "ACTIONS",
    "ALLOC",
    "FREE_COMPLETED",
    "FREE_REQUESTED",
    "OOM",
    "SEGMENT_ALLOC",
    "SEGMENT_FREE",
    "Frame",
    "SnapshotData",
    "SnapshotFormatError",
    "read_snapshot",
]

#: The history's actions, in the order of their codes in :attr:`SnapshotData.action`.
ACTIONS = (
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "oom",
    "snapshot",
    "other",
)
ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, OOM = range(6)
_CODE = {name: i for i, name in enumerate(ACTIONS)}

#: One Python frame: (file name, line, function name).
Frame = tuple[str, int, str]


class SnapshotFormatError(GpuMagicError, ValueError):
    """A file that is not an allocator snapshot: ``path`` and ``reason``."""

    template = (
        "{path}: not a CUDA caching-allocator snapshot ({reason}). gpumagic reads the pickle that "
        "torch.cuda.memory._dump_snapshot(path) writes."
    )


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, tuples, strings and numbers only: a snapshot holds nothing else."""

    def find_class(self, module: str, name: str) -> NoReturn:
        raise pickle.UnpicklingError(
            f"it names a Python object ({module}.{name}), which a snapshot never holds"
        )


@dataclass
class SnapshotData:
    """One device's history and final state, as arrays (row ``i`` is the ``i``-th history entry).

    ``action`` holds codes into :data:`ACTIONS`; ``addr``, ``size`` (bytes the entry names: the
    request for alloc and free, the segment for segment actions, the failed request for oom),
    ``stream``, ``time_us`` (the allocator's clock; the entry's index where the snapshot has none)
    and ``stack`` (index into ``stacks``, -1 when the entry has no frames) are parallel arrays.
    ``device_free``: for each oom row, what CUDA said was still free.

    The final state: ``blocks`` (every block in use when the snapshot was taken: ``addr``, ``size``
    as the allocator counts it, ``requested``, ``stack``, ``active`` for allocated vs awaiting free)
    and ``segments`` (``addr``, ``total``, ``allocated``, ``active``, ``expandable``).
    ``annotations``: the ``record_function`` ranges the allocator noted while it recorded (its
    ``external_annotations``: the optimizer's step and zero_grad, a user's own ranges), as (name,
    start, end) on the entries' clock, in µs.
    """

    device: int
    action: np.ndarray
    addr: np.ndarray
    size: np.ndarray
    stream: np.ndarray
    time_us: np.ndarray
    stack: np.ndarray
    frames: list[Frame]
    stacks: list[tuple[int, ...]]
    blocks: dict[str, np.ndarray]
    segments: dict[str, np.ndarray]
    device_free: dict[int, int] = field(default_factory=dict)
    has_times: bool = True
    devices: tuple[int, ...] = ()
    source: str = ""
    notes: list[str] = field(default_factory=list)
    annotations: list[tuple[str, int, int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.action)

    def tail(self, start: int) -> SnapshotData:
        """The same snapshot with the history from row ``start`` on (what came before counts as
        already there)."""
        cut = {
            k: getattr(self, k)[start:]
            for k in ("action", "addr", "size", "stream", "time_us", "stack")
        }
        free = {r - start: v for r, v in self.device_free.items() if r >= start}
        return replace(self, **cut, device_free=free, notes=list(self.notes))

    def stack_frames(self, index: int) -> list[Frame]:
        """The frames of stack ``index``, innermost first ([] for -1)."""
        return [] if index < 0 else [self.frames[f] for f in self.stacks[index]]


class _Stacks:
    """Distinct frames and stacks, keyed by the identity of torch's shared frame dicts (then by
    content)."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.stacks: list[tuple[int, ...]] = []
        self._by_id: dict[int, int] = {}
        self._by_frame: dict[Frame, int] = {}
        self._by_ids: dict[tuple[int, ...], int] = {}
        self._by_key: dict[tuple[int, ...], int] = {}
        self._keep: list[Any] = []  # the frame dicts whose ids are keys: alive while read

    def frame(self, f: Mapping[str, Any]) -> int:
        i = self._by_id.get(id(f))
        if i is None:
            key = (str(f.get("filename", "?")), int(f.get("line", 0) or 0), str(f.get("name", "?")))
            i = self._by_frame.setdefault(key, len(self.frames))
            if i == len(self.frames):
                self.frames.append(key)
            self._by_id[id(f)] = i
            self._keep.append(f)
        return i

    def stack(self, frames: Sequence[Mapping[str, Any]] | None) -> int:
        if not frames:
            return -1
        ids = tuple(map(id, frames))
        s = self._by_ids.get(ids)
        if s is None:
            key = tuple(self.frame(f) for f in frames)
            s = self._by_key.setdefault(key, len(self.stacks))
            if s == len(self.stacks):
                self.stacks.append(key)
            self._by_ids[ids] = s
        return s


def _load(
    source: str | os.PathLike[str] | bytes | Mapping[str, Any] | list[Any],
) -> tuple[Mapping[str, Any], str]:
    if isinstance(source, Mapping):
        return source, "snapshot"
    if isinstance(source, list):  # torch.cuda.memory_snapshot(): the segments alone
        return _segments_only(source, "snapshot"), "snapshot"
    stream: IO[bytes]
    if isinstance(source, bytes):
        stream, name = io.BytesIO(source), "snapshot bytes"
    else:
        name = os.fspath(source)
        if not os.path.exists(name):
            from ...errors import FileMissingError

            raise FileMissingError(what="Memory snapshot", path=name)
        stream = open(name, "rb")  # noqa: SIM115 - closed below
    try:
        with stream:
            data = _PlainUnpickler(stream).load()
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
    ) as exc:
        raise SnapshotFormatError(path=name, reason=f"unpickling failed: {exc}") from None
    if isinstance(data, list) and all(isinstance(s, Mapping) and "blocks" in s for s in data):
        return _segments_only(data, name), name
    if not isinstance(data, Mapping) or "segments" not in data:
        raise SnapshotFormatError(path=name, reason="no 'segments' in it")
    return data, name


#: What a snapshot without history (``torch.cuda.memory_snapshot()``'s list) cannot tell.
NO_HISTORY = (
    "This snapshot is the allocator's segments alone (torch.cuda.memory_snapshot()): what was "
    "allocated when it was taken, with no history, so no timeline, no peak over time and no "
    "allocation stacks. torch.cuda.memory._record_memory_history() before the work and "
    "torch.cuda.memory._dump_snapshot(path) after it record them."
)


def _segments_only(segments: list[Any], name: str) -> dict[str, Any]:
    if not all(isinstance(s, Mapping) and "blocks" in s for s in segments):
        raise SnapshotFormatError(path=name, reason="a list, but not of allocator segments")
    return {"segments": segments, "device_traces": [], "no_history": True}


def _pick_device(data: Mapping[str, Any], device: int | None) -> tuple[int, tuple[int, ...]]:
    traces = data.get("device_traces") or []
    used = {i for i, t in enumerate(traces) if t}
    used |= {int(s.get("device", 0)) for s in data.get("segments") or []}
    devices = tuple(sorted(used)) or (0,)
    if device is not None:
        if isinstance(device, bool) or not isinstance(device, int) or device not in devices:
            # device=-1 read the last device and called it "device -1"
            raise InvalidOptionError(
                option="device",
                value=device,
                reason=f"is none of the snapshot's devices ({', '.join(map(str, devices))})",
            )
        return device, devices
    # the device with the most memory: its segments' bytes and its history's allocations (a few
    # entries on device 0 do not outweigh 10 GiB of segments on device 1)
    weight = dict.fromkeys(devices, 0)
    for seg in data.get("segments") or []:
        d = int(seg.get("device", 0))
        weight[d] = weight.get(d, 0) + int(seg.get("total_size", 0) or 0)
    for i, trace in enumerate(traces):
        allocs = (e.get("size", 0) or 0 for e in trace if e.get("action") == "alloc")
        weight[i] = weight.get(i, 0) + sum(int(a) for a in allocs)
    return max(
        devices, key=lambda d: (weight.get(d, 0), len(traces[d]) if d < len(traces) else 0)
    ), devices


def read_snapshot(
    source: str | os.PathLike[str] | bytes | Mapping[str, Any] | list[Any],
    device: int | None = None,
) -> SnapshotData:
    """Read a snapshot (a path, its bytes, or the dict ``torch.cuda.memory._snapshot()`` returns)
    for one device: ``device``, else the one with the most history entries.

    Python's cyclic garbage collector is paused while it reads (and set back as it was): unpickling
    a million small dicts and lists would run it over and over, for nothing (a snapshot holds no
    cycles), at almost half the cost."""
    with paused_gc():
        return _read(source, device)


def _read(
    source: str | os.PathLike[str] | bytes | Mapping[str, Any] | list[Any],
    device: int | None,
) -> SnapshotData:
    data, name = _load(source)
    try:
        return _read_data(data, name, device)
    except (TypeError, KeyError, AttributeError, OverflowError, IndexError) as exc:
        # a field of the wrong type (segments an int, device "gpu0", a size of 2**70): said as the
        # file's, not as a traceback from inside the reader
        raise SnapshotFormatError(path=name, reason=f"{type(exc).__name__}: {exc}") from None
    except ValueError as exc:
        if isinstance(exc, GpuMagicError):
            raise
        raise SnapshotFormatError(path=name, reason=f"a field out of range: {exc}") from None


def _read_data(data: Mapping[str, Any], name: str, device: int | None) -> SnapshotData:
    """The arrays of one device of an unpickled snapshot (its fields of any type may be wrong:
    the caller names the file)."""
    if not isinstance(data.get("segments") or [], list):
        raise TypeError(f"its 'segments' is {type(data['segments']).__name__}, not a list")
    dev, devices = _pick_device(data, device)
    traces = data.get("device_traces") or []
    trace = traces[dev] if dev < len(traces) else []
    stacks = _Stacks()
    n = len(trace)
    # one pass per field, in C where it can be: a million entries are a million dict lookups per
    # field
    code, other = _CODE.get, _CODE["other"]
    action = np.fromiter((code(e["action"], other) for e in trace), np.int8, n)
    try:  # the common case, every entry with all four numbers: one pass
        get = itemgetter("addr", "size", "stream", "time_us")
        nums = np.array([get(e) for e in trace], np.int64).reshape(n, 4)
        addr, size, stream, time_us = (np.ascontiguousarray(nums[:, i]) for i in range(4))
        has_times = True
    except (
        KeyError,
        TypeError,
        ValueError,
        OverflowError,
    ):  # an oom without addr, no times: field by field
        addr = np.fromiter((e.get("addr", 0) for e in trace), np.int64, n)
        size = np.fromiter((e.get("size", 0) for e in trace), np.int64, n)
        stream = np.fromiter((e.get("stream", 0) or 0 for e in trace), np.int64, n)
        times = [e.get("time_us") for e in trace]
        has_times = None not in times
        time_us = np.array(times, np.int64) if has_times and n else np.zeros(n, np.int64)
    stack = np.full(n, -1, np.int32)
    rows = np.flatnonzero(action == ALLOC)
    stack_of = stacks.stack
    stack[rows] = [stack_of(trace[r].get("frames")) for r in rows.tolist()]
    device_free = {
        r: int(trace[r].get("device_free", 0) or 0) for r in np.flatnonzero(action == OOM).tolist()
    }
    if not has_times:
        time_us = np.arange(n, dtype=np.int64)
    blocks, segments = _final_state(data, dev, stacks)
    annotations = _annotations(data.get("external_annotations") or [], dev)
    snap = SnapshotData(
        device=dev,
        action=action,
        addr=addr,
        size=size,
        stream=stream,
        time_us=time_us,
        stack=stack,
        frames=stacks.frames,
        stacks=stacks.stacks,
        blocks=blocks,
        segments=segments,
        device_free=device_free,
        has_times=has_times,
        devices=devices,
        source=name,
        annotations=annotations,
    )
    if data.get("no_history"):
        snap.notes.append(NO_HISTORY)
    if len(devices) > 1:
        snap.notes.append(
            f"The snapshot covers devices {', '.join(map(str, devices))}; this view is device "
            f"{dev}."
        )
    return snap


def _annotations(entries: Sequence[Any], device: int) -> list[tuple[str, int, int]]:
    """START/END pairs of one device's annotations (by name, innermost first), as (name, start,
    end); a range left open ends where the last annotation does."""
    open_: dict[str, list[int]] = {}
    out: list[tuple[str, int, int]] = []
    last = 0
    for e in entries:
        if not isinstance(e, Mapping) or int(e.get("device", device) or 0) != device:
            continue
        name, t = str(e.get("name", "")), int(e.get("time_us", 0) or 0)
        last = max(last, t)
        if e.get("stage") == "START":
            open_.setdefault(name, []).append(t)
        elif e.get("stage") == "END" and open_.get(name):
            out.append((name, open_[name].pop(), t))
    out += [(name, t, last) for name, starts in open_.items() for t in starts]
    return sorted(out, key=lambda r: (r[1], -r[2]))


def _final_state(
    data: Mapping[str, Any], device: int, stacks: _Stacks
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The blocks in use and the segments at the snapshot, for ``device``."""
    b_addr, b_size, b_req, b_stack, b_active = [], [], [], [], []
    s_addr, s_total, s_alloc, s_active, s_exp = [], [], [], [], []
    for seg in data.get("segments") or []:
        if int(seg.get("device", device)) != device:
            continue
        s_addr.append(int(seg.get("address", 0)))
        s_total.append(int(seg.get("total_size", 0)))
        s_alloc.append(int(seg.get("allocated_size", 0)))
        s_active.append(int(seg.get("active_size", 0)))
        s_exp.append(bool(seg.get("is_expandable", False)))
        for b in seg.get("blocks") or []:
            state = b.get("state", "")
            if state not in ("active_allocated", "active_awaiting_free"):
                continue
            b_addr.append(int(b.get("address", 0)))
            b_size.append(int(b.get("size", 0)))
            b_req.append(int(b.get("requested_size", b.get("size", 0))))
            frames = b.get("frames")
            if not frames and b.get("history"):  # the layout of older PyTorch releases
                frames = b["history"][-1].get("frames")
            b_stack.append(stacks.stack(frames))
            b_active.append(state == "active_allocated")
    blocks: dict[str, np.ndarray] = {
        "addr": np.array(b_addr, np.int64),
        "size": np.array(b_size, np.int64),
        "requested": np.array(b_req, np.int64),
        "stack": np.array(b_stack, np.int32),
        "allocated": np.array(b_active, bool),
    }
    segments = {
        "addr": np.array(s_addr, np.int64),
        "total": np.array(s_total, np.int64),
        "allocated": np.array(s_alloc, np.int64),
        "active": np.array(s_active, np.int64),
        "expandable": np.array(s_exp, bool),
    }
    return blocks, segments
