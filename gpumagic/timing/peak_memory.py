"""The peak CUDA memory one call needs, measured without touching the user's own memory counters.

The plain way to measure it, ``torch.cuda.reset_peak_memory_stats()`` before the call and
``torch.cuda.max_memory_allocated()`` after, resets counters that belong to the user: after it,
``max_memory_allocated()`` and ``memory_stats()["*.peak"]`` report the peak since gpumagic's call,
not since the user's program started or last reset them, and PyTorch has no way to put an old peak
back. This module never resets anything. It reads the counters before and after the call and, where
they cannot answer, the caching allocator's history of allocations and frees:

- If the call raised the allocator's peak (``allocated_bytes.all.peak``) above what it read before,
  that new peak less what was allocated before the call *is* the call's peak: exact, and no history
  is read.
- Otherwise the earlier peak hides the call's, and the allocator's history gives it: the running sum
  of the call's ``alloc`` (+) and ``free_requested`` (-) entries on the current device, whose
  maximum is the peak above the start (:func:`peak_from_trace`). If the process records no history,
  :func:`call_peak` turns recording on for the one call with the cheapest settings (no stack traces,
  only the two actions it reads, at most :data:`HISTORY_ENTRIES` entries) and off again afterwards,
  the call raising or not. Turning it off empties the allocator's history buffer, which was empty
  already: the allocator keeps none while recording is off. If the user records history, their
  settings are left alone and only the entries the call added are read; taking the snapshot that
  reads them appends one ``snapshot`` entry to the user's history, unless they skip that action.

Which entries move the counter, from c10/cuda/CUDACachingAllocator.cpp: ``allocated_bytes`` rises by
the block's size where the allocator records ``alloc`` (``alloc_found_block``) and falls by it where
it records ``free_requested`` (``free``), at once, even when the block waits for another stream
before it can be reused (``free_completed``, later, changes ``active_bytes``, not
``allocated_bytes``). ``segment_*`` entries are memory reserved from CUDA, ``oom`` and ``snapshot``
change nothing. The counter is per device and counts every stream, so the trace is read for the
current device, all streams together. One difference: a trace entry holds the size the caller asked
for, the counter the block it got. Each request is rounded up to the allocator's 512-byte blocks
here, which is exact for blocks split to size (all small ones, and large ones carved from a larger
free block); a large request can also get a cached block up to 1 MiB bigger whole (more under
``max_split_size``), and ``roundup_power2_divisions`` rounds requests further. The allocator's
cumulative byte counters say whether that happened during the call and by how much, so the figure
says when it is exact and otherwise gives the range the true peak lies in.

Counts check the history: the number of ``alloc`` and ``free_requested`` entries read must equal the
change in the allocator's own allocation counters (``allocation.all.allocated``/``freed``). Entries
dropped by a full history buffer, actions the user skips, or another thread allocating while the
snapshot is taken make them differ; the figure is then missing (None, with a note that says why),
never wrong.

Cost while recording is on: one small record (action, address, size, stream, a time stamp) pushed
into the allocator's history under its lock for each allocation and free, no stack traces (newer
PyTorch also listens for ``record_function`` ranges to annotate the history while it records);
afterwards one snapshot of the allocator, its segments and history entries as Python objects. On an
H100 with PyTorch 2.11 that was about 0.7 µs more per allocation or free and 0.9 µs per history
entry for the snapshot; PyTorch's default settings, with Python and C++ stack traces, cost about 1.9
µs per event and 40 µs per entry, and 57 ms to turn on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

from ..edges import TorchValue

__all__ = [
    "BLOCK_BYTES",
    "HISTORY_ENTRIES",
    "CallPeak",
    "block_bytes",
    "call_entries",
    "call_peak",
    "peak_from_trace",
]

#: The caching allocator's smallest block and the step every request is rounded up to
#: (``kMinBlockSize``).
BLOCK_BYTES = 512

#: Most history entries kept when :func:`call_peak` records history itself: a call with more
#: allocations and frees than this (and a peak below the earlier one) gets no figure rather than a
#: slow snapshot of a huge history.
HISTORY_ENTRIES = 1 << 17

#: The two actions that move the allocated-bytes counter, and the ones the allocator need not record
#: while :func:`call_peak` records history itself.
_COUNTED = ("alloc", "free_requested")
_SKIPPED = ("free_completed", "segment_alloc", "segment_free", "oom", "snapshot")
#: One entry of torch's allocator history (``action``, ``size``, ``addr``, ...): torch's dict.
TraceEntry = Mapping[str, Any]


@dataclass
class CallPeak:
    """The peak memory of one call, filled in when :func:`call_peak`'s block ends.

    ``bytes``: CUDA memory allocated at the call's peak above what was allocated just before it, on
    the device current when the block began, as ``torch.cuda.max_memory_allocated`` counts it
    (allocator blocks); None where it could not be measured. ``low``/``high``: the range the true
    figure lies in (both equal to ``bytes`` when it is exact). ``source``: "peak counter" or
    "allocator history" ("" when None). ``note``: why ``bytes`` is None or inexact, "" otherwise.
    """

    bytes: int | None = None
    low: int | None = None
    high: int | None = None
    source: str = ""
    note: str = ""

    @property
    def exact(self) -> bool:
        """Whether ``bytes`` is the allocator's own figure, not the history's guess within a
        range."""
        return self.bytes is not None and self.low == self.high == self.bytes


def block_bytes(size: int) -> int:
    """The bytes the caching allocator counts for a request of ``size`` bytes: a multiple of 512, at
    least 512."""
    return max(BLOCK_BYTES, -(-int(size) // BLOCK_BYTES) * BLOCK_BYTES)


def peak_from_trace(entries: Sequence[TraceEntry]) -> int:
    """The highest rise of allocated bytes above the start over ``entries``, in order (0 if it never
    rises).

    ``entries`` are the allocator's history entries of one device, as
    ``torch.cuda.memory._snapshot()`` gives them under ``["device_traces"][device]``: dicts with
    ``action`` and ``size`` (and ``addr``, ``stream``, ``time_us``, ...). ``alloc`` adds the
    request's block (:func:`block_bytes` of ``size``), ``free_requested`` takes it away; every other
    action leaves the count alone. A free of a block allocated before the first entry lowers the
    count below the start, so later allocations rise from there.
    """
    level = peak = 0
    for entry in entries:
        action = entry.get("action")
        if action == "alloc":
            level += block_bytes(entry["size"])
            peak = max(peak, level)
        elif action == "free_requested":
            level -= block_bytes(entry["size"])
    return peak


def call_entries(
    trace: Sequence[TraceEntry], allocs: int, frees: int
) -> Sequence[TraceEntry] | None:
    """The end of ``trace`` that holds exactly the last ``allocs`` allocations and ``frees`` frees;
    None if none does.

    The call's entries are the newest in the history (nothing allocates after it before the
    snapshot), so walking back from the end until both counts are met finds where they start. None
    when the history runs out first (a full ring buffer dropped the call's oldest entries, or the
    actions are not recorded) or holds more of one kind than the counters say happened (the history
    and the counters disagree).
    """
    if allocs == 0 and frees == 0:
        return trace[len(trace) :]
    seen_allocs = seen_frees = 0
    for start in range(len(trace) - 1, -1, -1):
        action = trace[start].get("action")
        if action == "alloc":
            seen_allocs += 1
        elif action == "free_requested":
            seen_frees += 1
        else:
            continue
        if seen_allocs >= allocs and seen_frees >= frees:
            return trace[start:] if (seen_allocs, seen_frees) == (allocs, frees) else None
    return None


class _Counters(NamedTuple):
    current: int  # allocated_bytes.all.current
    peak: int  # allocated_bytes.all.peak
    bytes_allocated: int  # allocated_bytes.all.allocated: block bytes handed out, cumulative
    bytes_freed: int  # allocated_bytes.all.freed
    allocs: int  # allocation.all.allocated: allocations, cumulative
    frees: int  # allocation.all.freed


def _counters(torch: TorchValue, device: int) -> _Counters:
    stats = torch.cuda.memory.memory_stats_as_nested_dict(device)
    size, count = stats["allocated_bytes"]["all"], stats["allocation"]["all"]
    return _Counters(
        int(size["current"]),
        int(size["peak"]),
        int(size["allocated"]),
        int(size["freed"]),
        int(count["allocated"]),
        int(count["freed"]),
    )


def _torch() -> TorchValue:
    """PyTorch if this process has imported it, else None: CUDA cannot be in use without it, and
    importing it costs."""
    return sys.modules.get("torch")


def _unmeasurable(torch: TorchValue) -> str:
    """Why no CUDA peak can be taken here ("" when it can); asks nothing that would start CUDA."""
    if torch is None:
        return "PyTorch is not loaded"
    if not torch.cuda.is_available():
        return "CUDA is not available"
    if not torch.cuda.is_initialized():
        return "CUDA is not initialised in this process"
    return ""


class _History:
    """The allocator's history recording for one call: used as found, or turned on here and off
    again by close()."""

    def __init__(self, torch: TorchValue) -> None:
        self.torch = torch
        self.ours = False  # recording was off and this turned it on: close() turns it off
        self.note = ""  # why the history cannot be read ("" when it can)
        memory = torch.cuda.memory
        enabled = getattr(torch._C, "_cuda_isHistoryEnabled", None)
        try:
            backend = getattr(memory, "get_allocator_backend", lambda: "native")()
            if backend != "native":
                self.note = f"the {backend} allocator keeps no history of allocations"
            elif enabled is None:
                self.note = "this PyTorch cannot say whether the allocator records its history"
            elif not enabled():
                self._turn_on(memory, enabled)
        except Exception as exc:  # noqa: BLE001 - no history is a reason for no figure, not an error
            self.note = f"the allocator's history could not be used ({type(exc).__name__}: {exc})"

    def _turn_on(self, memory: ModuleType, enabled: Callable[[], bool]) -> None:
        settings: dict[str, object] = {
            "context": None,
            "stacks": "python",
            "max_entries": HISTORY_ENTRIES,
        }
        try:
            try:
                memory._record_memory_history("all", skip_actions=list(_SKIPPED), **settings)
            except TypeError:  # a PyTorch before skip_actions: it records every action
                memory._record_memory_history("all", **settings)
        except Exception as exc:  # noqa: BLE001 - no history is a reason for no figure, not an error
            self.note = (
                f"the allocator's history could not be recorded ({type(exc).__name__}: {exc})"
            )
            if enabled():  # half turned on: leave it as it was found
                memory._record_memory_history(None)
            return
        self.ours = True

    def read(self, device: int) -> Sequence[TraceEntry]:
        traces = self.torch.cuda.memory._snapshot()["device_traces"]
        return traces[device] if device < len(traces) else []

    def close(self) -> None:
        if self.ours:
            self.ours = False
            self.torch.cuda.memory._record_memory_history(None)


@contextmanager
def call_peak() -> Iterator[CallPeak]:
    """Measure the peak CUDA memory of the block's work: ``with call_peak() as peak: call()``, then
    ``peak.bytes``.

    Never resets or changes the user's memory counters, and leaves the allocator's history recording
    as it found it, also when the block raises (the exception propagates; ``peak.bytes`` stays
    None). Where PyTorch is not loaded, CUDA is absent or not yet initialised, nothing is touched
    and ``peak.bytes`` is None with a note. Allocations on other devices, and by other threads
    during the block, count as the allocator counts them: only the device current at the start, all
    of its streams and threads.
    """
    peak = CallPeak()
    torch = _torch()
    reason = _unmeasurable(torch)
    if reason:
        peak.note = f"peak memory not measured: {reason}"
        yield peak
        return
    history = None
    try:
        device = torch.cuda.current_device()
        history = _History(torch)
        before = _counters(torch, device)
    except Exception as exc:  # noqa: BLE001 - the call still runs; only its figure is missing
        if history is not None:
            history.close()
        peak.note = f"peak memory not measured: {type(exc).__name__}: {exc}"
        yield peak
        return
    try:
        try:
            yield peak
        except BaseException:
            peak.note = "peak memory not measured: the call raised"
            raise
        _settle(peak, torch, device, before, history)
    finally:
        history.close()


def _settle(
    peak: CallPeak, torch: TorchValue, device: int, before: _Counters, history: _History
) -> None:
    """Fill ``peak`` from the counters after the call, and from the history where they cannot
    say."""
    try:
        after = _counters(torch, device)
        if after.peak > before.peak:  # the call set a new high: the counter holds its peak
            _exact(peak, after.peak - before.current, "peak counter")
            return
        allocs, frees = after.allocs - before.allocs, after.frees - before.frees
        if allocs < 0 or frees < 0:
            peak.note = (
                "peak memory not measured: the allocator's counters were reset during the call"
            )
            return
        if allocs == 0:  # nothing allocated: the count never rose
            _exact(peak, 0, "peak counter")
            return
        if history.note:
            peak.note = f"peak memory not measured: {history.note}"
            return
        trace = history.read(device)
        again = _counters(torch, device)
        if (again.allocs, again.frees) != (after.allocs, after.frees):
            peak.note = (
                "peak memory not measured: another thread allocated while the "
                "allocator's history was read"
            )
            return
        entries = call_entries(trace, allocs, frees)
        if entries is None:
            peak.note = f"peak memory not measured: {_missing(history, allocs, frees, len(trace))}"
            return
        _from_history(peak, entries, before, after)
    except Exception as exc:  # noqa: BLE001 - a figure that cannot be had is a note, never an error in the timer
        peak.bytes = peak.low = peak.high = None
        peak.source = ""
        peak.note = f"peak memory not measured: {type(exc).__name__}: {exc}"


def _exact(peak: CallPeak, value: int, source: str) -> None:
    peak.bytes = peak.low = peak.high = max(0, value)
    peak.source = source


def _missing(history: _History, allocs: int, frees: int, held: int) -> str:
    made = f"{allocs} allocations and {frees} frees"
    if history.ours:
        return (
            f"the call made {made}, more than the {HISTORY_ENTRIES} history entries recorded for it"
        )
    return (
        f"the allocator's history, recorded with this process's own settings, does not hold "
        f"the call's {made} "
        f"(it holds {held} entries: too few max_entries, enabled='state', or skipped actions)"
    )


def _from_history(
    peak: CallPeak, entries: Sequence[TraceEntry], before: _Counters, after: _Counters
) -> None:
    """The peak from the call's entries, with the range the allocator's own byte counters allow."""
    rise = peak_from_trace(entries)
    asked = dict.fromkeys(_COUNTED, 0)
    live: set[object] = set()  # blocks the call allocated and has not freed yet
    frees_earlier = False  # whether the call freed a block allocated before it
    for entry in entries:
        action = entry.get("action")
        if action in asked:
            asked[action] += block_bytes(entry["size"])
        if action == "alloc":
            live.add(entry.get("addr"))
        elif action == "free_requested":
            if entry.get("addr") in live:
                live.discard(entry.get("addr"))
            else:
                frees_earlier = True
    # Bytes the allocator counted beyond the rounded requests: cached blocks handed out whole,
    # bigger than asked.
    extra_alloc = after.bytes_allocated - before.bytes_allocated - asked["alloc"]
    extra_free = after.bytes_freed - before.bytes_freed - asked["free_requested"]
    if extra_alloc < 0 or extra_free < 0:
        peak.note = (
            "peak memory not measured: the allocator's history and its byte counters disagree"
        )
        return
    high = rise + extra_alloc
    if (
        after.peak == before.peak
    ):  # the counter did not rise (a lower one was reset by the call), so neither did this
        high = min(high, before.peak - before.current)
    # A block the call allocates and frees adds and takes away the same bytes: only frees of earlier
    # blocks, bigger than their rounded request, can make the history's count run above the
    # allocator's.
    low = min(max(0, rise - extra_free) if frees_earlier else rise, high)
    peak.bytes, peak.low, peak.high = min(rise, high), low, high
    peak.source = "allocator history"
    if low != high:
        peak.note = (
            f"peak memory between {low} and {high} bytes: the allocator counted some requests "
            f"as bigger blocks "
            "than its history records (a cached block handed out whole, or "
            "roundup_power2_divisions)"
        )
