"""The peak memory of one call, read from the allocator's history without resetting the user's
counters (CPU)."""

from __future__ import annotations

import inspect
import sys
from types import SimpleNamespace

import pytest

from gpumagic.timing import peak_memory
from gpumagic.timing.peak_memory import block_bytes, call_entries, call_peak, peak_from_trace

MiB = 1 << 20


def _entry(action: str, addr: int, size: int, stream: int = 0, t: int = 0) -> dict:
    """One history entry with the keys torch.cuda.memory._snapshot() gives (frames only where stacks
    are kept)."""
    return {
        "action": action,
        "addr": addr,
        "size": size,
        "stream": stream,
        "time_us": 1_700_000_000_000_000 + t,
        "compile_context": "",
        "user_metadata": "",
        "frames": [],
    }


def _oom(size: int, device_free: int) -> dict:
    entry = _entry("oom", 0, size)
    del entry["addr"]  # an oom entry has device_free where the others have addr
    entry["device_free"] = device_free
    return entry


# -- peak_from_trace
# ------------------------------------------------------------------------------------------------


def test_peak_is_the_highest_running_sum_of_allocs_less_requested_frees():
    a, b, c = 0x7F0000000000, 0x7F0004000000, 0x7F0008000000
    trace = [
        _entry("segment_alloc", a, 20 * MiB),
        _entry("alloc", a, 4 * MiB),
        _entry("alloc", b, 4 * MiB),
        _entry("free_requested", a, 4 * MiB),
        _entry("free_completed", a, 4 * MiB),
        _entry("alloc", c, 2 * MiB),
        _entry("free_requested", b, 4 * MiB),
        _entry("free_requested", c, 2 * MiB),
        _entry("segment_free", a, 20 * MiB),
    ]
    assert peak_from_trace(trace) == 8 * MiB


def test_segment_and_free_completed_entries_do_not_move_the_count():
    # Counted as memory, the 20 MiB segment would make the peak 20 MiB; counting free_completed as
    # the free would keep the first block alive into the second allocation (peak 12 MiB).
    a, b = 0x1000000, 0x2000000
    trace = [
        _entry("segment_alloc", a, 20 * MiB),
        _entry("alloc", a, 8 * MiB),
        _entry("free_requested", a, 8 * MiB),
        _entry("alloc", b, 4 * MiB),
        _entry("free_completed", a, 8 * MiB),
        _entry("free_requested", b, 4 * MiB),
        _entry("free_completed", b, 4 * MiB),
        _entry("snapshot", 0, 12 * MiB),
        _oom(64 * MiB, device_free=MiB),
    ]
    assert peak_from_trace(trace) == 8 * MiB


def test_a_free_of_earlier_memory_lowers_the_start_for_later_allocations():
    trace = [
        _entry("free_requested", 0x100000, 4 * MiB),  # a block allocated before the call
        _entry("alloc", 0x200000, 6 * MiB),
    ]
    assert peak_from_trace(trace) == 2 * MiB


def test_requests_count_as_the_allocators_512_byte_blocks():
    trace = [
        _entry("alloc", 0x1000, 4),
        _entry("alloc", 0x1200, 1000),
        _entry("alloc", 0x1600, 1024),
    ]
    assert peak_from_trace(trace) == 512 + 1024 + 1024
    assert [block_bytes(n) for n in (1, 512, 513, 3_000_000)] == [512, 512, 1024, 3_000_320]


def test_allocations_on_every_stream_count():
    trace = [_entry("alloc", 0x1000, MiB, stream=0), _entry("alloc", 0x200000, MiB, stream=0x5A5A)]
    assert peak_from_trace(trace) == 2 * MiB


def test_no_allocation_no_peak():
    assert peak_from_trace([]) == 0
    assert peak_from_trace([_entry("free_requested", 0x1000, MiB)]) == 0


# -- call_entries: which entries are the call's
# ---------------------------------------------------------------------


def test_the_calls_entries_are_the_tail_holding_its_counts():
    earlier = [_entry("alloc", 1, MiB), _entry("free_requested", 2, MiB)]
    call = [
        _entry("alloc", 3, MiB),
        _entry("segment_alloc", 4, 20 * MiB),
        _entry("free_requested", 3, MiB),
    ]
    got = call_entries(earlier + call + [_entry("snapshot", 0, 0)], allocs=1, frees=1)
    assert got is not None
    assert [e["addr"] for e in got] == [3, 4, 3, 0]


def test_a_history_that_lost_the_calls_first_entries_gives_none():
    # A ring buffer of 2 entries kept the call's last two of three events.
    assert (
        call_entries([_entry("alloc", 2, MiB), _entry("free_requested", 1, MiB)], allocs=2, frees=1)
        is None
    )


def test_more_entries_of_one_kind_than_the_counters_saw_gives_none():
    trace = [
        _entry("alloc", 1, MiB),
        _entry("free_requested", 9, MiB),
        _entry("free_requested", 1, MiB),
    ]
    assert call_entries(trace, allocs=1, frees=1) is None


# -- call_peak on this machine
# ----------------------------------------------------------------------------------------


def test_without_cuda_nothing_is_touched_and_the_note_says_why(monkeypatch):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA is present: the GPU tests cover this machine")

    def touched(*args, **kwargs):
        raise AssertionError("call_peak touched the allocator on a machine without CUDA")

    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", touched)
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", touched)
    monkeypatch.setattr(torch.cuda.memory, "memory_stats_as_nested_dict", touched)
    ran = []
    with call_peak() as peak:
        ran.append(torch.ones(3).sum().item())
    assert ran == [3.0]
    assert peak.bytes is None and not peak.exact
    assert "CUDA is not available" in peak.note


def test_without_torch_loaded_the_note_says_so(monkeypatch):
    monkeypatch.setattr(peak_memory, "_torch", lambda: None)
    with call_peak() as peak:
        pass
    assert peak.bytes is None
    assert peak.note == "peak memory not measured: PyTorch is not loaded"


def test_the_torch_functions_used_exist_with_the_arguments_passed():
    torch = pytest.importorskip("torch")
    memory = torch.cuda.memory
    for name in (
        "_record_memory_history",
        "_snapshot",
        "memory_stats_as_nested_dict",
        "get_allocator_backend",
    ):
        assert callable(getattr(memory, name)), name
    params = inspect.signature(memory._record_memory_history).parameters
    assert {"enabled", "context", "stacks", "max_entries"} <= set(params)
    if "skip_actions" not in params:
        pytest.skip("this PyTorch records every action (call_peak falls back to that)")
    doc = memory._record_memory_history.__doc__ or ""
    for action in peak_memory._SKIPPED:
        assert f'`"{action}"`' in doc, (
            action
        )  # the actions call_peak skips are ones PyTorch accepts


# -- call_peak against a stand-in allocator
# -------------------------------------------------------------------------


class FakeAllocator:
    """The caching allocator as call_peak sees it: counters, history recording and its ring buffer,
    snapshots."""

    def __init__(
        self, recording: bool = False, max_entries: int = sys.maxsize, skip: tuple[str, ...] = ()
    ):
        self.current = self.peak = self.bytes_allocated = self.bytes_freed = self.allocs = (
            self.frees
        ) = 0
        self.recording, self.max_entries, self.skip = recording, max_entries, set(skip)
        self.trace: list[dict] = []
        self.live: dict[int, tuple[int, int]] = {}
        self.next_addr = 0x7F0000000000
        self.history_calls: list[dict] = []
        self.snapshots = 0

    # what the user's program does
    def alloc(self, size: int, block: int | None = None) -> int:
        block = block or block_bytes(size)
        addr, self.next_addr = self.next_addr, self.next_addr + block
        self.live[addr] = (size, block)
        self.current += block
        self.peak = max(self.peak, self.current)
        self.bytes_allocated += block
        self.allocs += 1
        self._record(_entry("alloc", addr, size))
        return addr

    def free(self, addr: int) -> None:
        size, block = self.live.pop(addr)
        self.current -= block
        self.bytes_freed += block
        self.frees += 1
        self._record(_entry("free_requested", addr, size))
        self._record(_entry("free_completed", addr, size))

    def _record(self, entry: dict) -> None:
        if self.recording and entry["action"] not in self.skip:
            self.trace.append(entry)
            del self.trace[: max(0, len(self.trace) - self.max_entries)]

    # stand-ins for torch
    def record_memory_history(
        self, enabled="all", context="all", stacks="all", max_entries=sys.maxsize, **kw
    ):
        self.history_calls.append(
            dict(enabled=enabled, context=context, stacks=stacks, max_entries=max_entries, **kw)
        )
        self.recording = enabled is not None
        if enabled is None:
            self.trace.clear()  # as the allocator does when recording stops
        else:
            self.max_entries = max_entries if enabled == "all" else 1
            self.skip = set(kw.get("skip_actions") or ())

    def snapshot(self):
        self.snapshots += 1
        self._record(_entry("snapshot", 0, self.current))
        return {"segments": [], "device_traces": [list(self.trace)], "allocator_settings": {}}

    def stats(self, device=None):
        size = dict(
            current=self.current,
            peak=self.peak,
            allocated=self.bytes_allocated,
            freed=self.bytes_freed,
        )
        count = dict(current=len(self.live), peak=0, allocated=self.allocs, freed=self.frees)
        return {"allocated_bytes": {"all": size}, "allocation": {"all": count}}

    def torch(self) -> SimpleNamespace:
        memory = SimpleNamespace(
            _record_memory_history=self.record_memory_history,
            _snapshot=self.snapshot,
            memory_stats_as_nested_dict=self.stats,
            get_allocator_backend=lambda: "native",
        )
        cuda = SimpleNamespace(
            is_available=lambda: True,
            is_initialized=lambda: True,
            current_device=lambda: 0,
            memory=memory,
        )
        return SimpleNamespace(
            cuda=cuda, _C=SimpleNamespace(_cuda_isHistoryEnabled=lambda: self.recording)
        )


@pytest.fixture
def fake(monkeypatch):
    allocator = FakeAllocator()
    monkeypatch.setattr(peak_memory, "_torch", allocator.torch)
    return allocator


def _high_earlier_peak(fake: FakeAllocator, size: int = 512 * MiB) -> None:
    fake.free(fake.alloc(size))


def _three_tensors(fake: FakeAllocator) -> None:
    a, b = fake.alloc(64 * MiB), fake.alloc(64 * MiB)
    c = fake.alloc(64 * MiB)
    fake.free(a)
    fake.free(b)
    fake.free(fake.alloc(4))
    fake.free(c)


def test_below_an_earlier_peak_the_history_gives_the_calls_peak_and_the_counters_stay(fake):
    kept = fake.alloc(10 * MiB)
    _high_earlier_peak(fake)
    before = fake.stats()
    with call_peak() as peak:
        _three_tensors(fake)
    assert peak.bytes == 192 * MiB and peak.exact
    assert peak.source == "allocator history" and peak.note == ""
    assert (
        fake.stats()["allocated_bytes"]["all"]["peak"] == before["allocated_bytes"]["all"]["peak"]
    )
    assert kept in fake.live


def test_recording_is_turned_on_cheaply_for_the_call_and_off_again(fake):
    _high_earlier_peak(fake)
    with call_peak() as peak:
        assert fake.recording
        _three_tensors(fake)
    assert not fake.recording and fake.trace == []
    on, off = fake.history_calls
    assert on["enabled"] == "all" and on["context"] is None and on["stacks"] == "python"
    assert on["max_entries"] == peak_memory.HISTORY_ENTRIES
    assert set(on["skip_actions"]) == {
        "free_completed",
        "segment_alloc",
        "segment_free",
        "oom",
        "snapshot",
    }
    assert off["enabled"] is None
    assert peak.bytes == 192 * MiB


def test_recording_is_turned_off_when_the_call_raises(fake):
    _high_earlier_peak(fake)
    with pytest.raises(ZeroDivisionError), call_peak() as peak:
        fake.alloc(MiB)
        _ = 1 / 0
    assert not fake.recording
    assert [c["enabled"] for c in fake.history_calls] == ["all", None]
    assert peak.bytes is None and "raised" in peak.note


def test_a_users_recording_is_read_not_toggled_and_their_earlier_entries_are_left_out(fake):
    fake.recording = True
    _high_earlier_peak(fake)  # the user's own entries before the call
    held = fake.alloc(32 * MiB)
    with call_peak() as peak:
        fake.free(held)  # frees 32 MiB of the user's before allocating 48: the peak rise is 16 MiB
        fake.free(fake.alloc(48 * MiB))
    assert fake.history_calls == []
    assert fake.recording
    assert (
        fake.trace[0]["action"] == "alloc" and fake.trace[0]["size"] == 512 * MiB
    )  # the user's history is kept
    assert peak.bytes == 16 * MiB and peak.exact


def test_a_users_history_too_small_for_the_call_gives_none_not_a_wrong_figure(fake):
    fake.recording, fake.max_entries = True, 3
    _high_earlier_peak(fake)
    with call_peak() as peak:
        _three_tensors(fake)
    assert peak.bytes is None
    assert "does not hold the call's 4 allocations and 4 frees" in peak.note
    assert fake.history_calls == [] and fake.recording


def test_a_users_history_that_skips_frees_gives_none(fake):
    fake.recording, fake.skip = True, {"free_requested"}
    _high_earlier_peak(fake)
    with call_peak() as peak:
        _three_tensors(fake)
    assert peak.bytes is None and "skipped actions" in peak.note


def test_a_call_that_sets_a_new_high_is_read_from_the_peak_counter_without_a_snapshot(fake):
    kept = fake.alloc(8 * MiB)
    with call_peak() as peak:
        _three_tensors(fake)
    assert peak.bytes == 192 * MiB and peak.exact and peak.source == "peak counter"
    assert fake.snapshots == 0
    assert not fake.recording
    assert kept in fake.live


def test_a_call_that_allocates_nothing_has_a_zero_peak(fake):
    _high_earlier_peak(fake)
    held = fake.alloc(MiB)
    with call_peak() as peak:
        fake.free(held)
    assert peak.bytes == 0 and peak.exact and fake.snapshots == 0


def test_a_block_bigger_than_asked_gives_a_range_the_allocators_figure_lies_in(fake):
    _high_earlier_peak(fake)
    with call_peak() as peak:
        a = fake.alloc(64 * MiB, block=64 * MiB + 768 * 1024)  # a cached block handed out whole
        b = fake.alloc(64 * MiB)
        fake.free(a)
        fake.free(b)
    true_peak = 128 * MiB + 768 * 1024
    assert not peak.exact
    assert peak.low <= true_peak <= peak.high
    assert (peak.low, peak.high) == (
        128 * MiB,
        true_peak,
    )  # no earlier block freed: the history is a floor
    assert "between" in peak.note


def test_an_earlier_block_bigger_than_asked_freed_by_the_call_lowers_the_floor(fake):
    held = fake.alloc(64 * MiB, block=64 * MiB + 512 * 1024)
    _high_earlier_peak(fake)
    with call_peak() as peak:
        fake.free(held)
        fake.free(fake.alloc(80 * MiB))
    true_peak = 80 * MiB - (64 * MiB + 512 * 1024)
    assert (peak.low, peak.high) == (true_peak, 16 * MiB)
    assert peak.bytes == 16 * MiB and not peak.exact


def test_a_history_and_counters_that_disagree_give_none(fake):
    _high_earlier_peak(fake)
    with call_peak() as peak:
        a = fake.alloc(MiB)
        fake.bytes_allocated -= 512  # counted fewer bytes than the history's rounded request
        fake.free(a)
    assert peak.bytes is None and "disagree" in peak.note


def test_a_peak_reset_by_the_call_itself_does_not_cap_the_figure(fake):
    _high_earlier_peak(fake)
    with call_peak() as peak:
        fake.free(fake.alloc(1024 * MiB))  # above the earlier 512 MiB peak ...
        fake.peak = (
            fake.current
        )  # ... then torch.cuda.reset_peak_memory_stats() inside the statement
    assert peak.bytes == 1024 * MiB and peak.exact and peak.source == "allocator history"


def test_counters_reset_during_the_call_give_none(fake):
    _high_earlier_peak(fake)
    with call_peak() as peak:
        fake.free(fake.alloc(MiB))
        fake.allocs = fake.frees = (
            0  # torch.cuda.reset_accumulated_memory_stats() inside the statement
        )
    assert peak.bytes is None and "reset during the call" in peak.note
    assert not fake.recording


def test_an_allocator_without_history_gives_none_unless_the_counter_rose(fake, monkeypatch):
    torch = fake.torch()
    torch.cuda.memory.get_allocator_backend = lambda: "cudaMallocAsync"
    monkeypatch.setattr(peak_memory, "_torch", lambda: torch)
    _high_earlier_peak(fake)
    with call_peak() as peak:
        fake.free(fake.alloc(MiB))
    assert peak.bytes is None and "cudaMallocAsync" in peak.note
    assert fake.history_calls == []
    with call_peak() as peak:
        fake.free(fake.alloc(1024 * MiB))
    assert peak.bytes == 1024 * MiB and peak.exact


def test_a_failure_to_turn_recording_on_leaves_it_off_and_still_runs_the_call(fake):
    def broken(enabled="all", **kw):
        if enabled is not None:
            fake.recording = True  # half on, then fails
            raise RuntimeError("no history here")
        fake.recording = False

    fake.record_memory_history = broken
    _high_earlier_peak(fake)
    ran = []
    with call_peak() as peak:
        ran.append(fake.alloc(MiB))
    assert ran and not fake.recording
    assert peak.bytes is None and "no history here" in peak.note
