"""call_peak on a real GPU: the allocator's own figure, the user's counters left as they were (skips
without CUDA)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

from gpumagic.timing.peak_memory import call_peak  # noqa: E402

N = 4096
MiB = 1 << 20


def matmul_sum():
    return (torch.randn(N, N, device="cuda") @ torch.randn(N, N, device="cuda")).sum()


def odd_sizes():
    """Small-pool and large-pool requests that are not multiples of the allocator's blocks, all
    alive at the end."""
    return [
        torch.empty(n, dtype=torch.uint8, device="cuda")
        for n in (1, 777, 5000, 1_500_001, 33_333_333)
    ]


def reset_figure(call) -> int:
    """What reset_peak_memory_stats + max_memory_allocated say for one call (the way that resets the
    counters)."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    value = call()
    del value
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def raise_earlier_peak(nbytes: int = 2 << 30) -> None:
    """Allocate and free a big tensor: the process's peak is then far above what the call needs."""
    x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    del x


def history_on() -> bool:
    return torch._C._cuda_isHistoryEnabled()


@pytest.fixture(autouse=True)
def cuda_ready():
    torch.cuda.init()
    matmul_sum()  # cuBLAS handle and workspace, allocator segments: before any figure is taken
    odd_sizes()
    assert not history_on(), "a test left the allocator's history recording on"
    yield
    torch.cuda.memory._record_memory_history(None)  # whatever a failing test left behind


def measured(call, earlier_peak: bool) -> tuple[int, str]:
    if earlier_peak:
        raise_earlier_peak()
    else:
        torch.cuda.reset_peak_memory_stats()  # this test's own doing: the call then sets a new high
    with call_peak() as peak:
        value = call()
        del value
    assert peak.exact, (peak.low, peak.high, peak.note)
    return peak.bytes, peak.source


@pytest.mark.parametrize("earlier_peak", [False, True], ids=["peak-counter", "allocator-history"])
def test_call_peak_equals_the_reset_figure_in_either_order(earlier_peak):
    figures, sources = [], set()
    for way in (
        "call_peak",
        "reset",
        "reset",
        "call_peak",
    ):  # each way both before and after the other
        if way == "reset":
            figures.append(reset_figure(matmul_sum))
        else:
            value, source = measured(matmul_sum, earlier_peak)
            figures.append(value)
            sources.add(source)
    assert len(set(figures)) == 1, figures
    assert figures[0] >= 3 * N * N * 4  # both operands and the product live at once
    assert sources == {"allocator history" if earlier_peak else "peak counter"}


def test_odd_sizes_from_the_history_match_the_allocators_count_or_bracket_it():
    raise_earlier_peak()
    base = torch.cuda.memory_allocated()
    with call_peak() as peak:
        held = odd_sizes()
        truth = (
            torch.cuda.memory_allocated() - base
        )  # all alive: this is the call's peak, in the same run
        del held
    assert peak.source == "allocator history"
    assert peak.low <= truth <= peak.high, (peak.low, truth, peak.high, peak.note)
    if peak.exact:
        assert peak.bytes == truth


def test_the_users_peak_counters_read_the_same_after_call_peak():
    raise_earlier_peak()
    keys = ("allocated_bytes.all.peak", "active_bytes.all.peak", "requested_bytes.all.peak")
    before_max = torch.cuda.max_memory_allocated()
    before = {k: torch.cuda.memory_stats()[k] for k in keys}
    with call_peak() as peak:
        matmul_sum()
    assert (
        peak.bytes is not None and peak.bytes < before_max
    )  # the call's own peak stayed below the earlier one
    assert torch.cuda.max_memory_allocated() == before_max
    assert {k: torch.cuda.memory_stats()[k] for k in keys} == before


def test_history_recording_is_off_afterwards_when_it_was_off_before():
    raise_earlier_peak()
    with call_peak() as peak:
        assert history_on()
        matmul_sum()
    assert peak.source == "allocator history"
    assert not history_on()
    with pytest.raises(RuntimeError, match="inside the call"), call_peak():
        matmul_sum()
        raise RuntimeError("inside the call")
    assert not history_on()
    assert all(
        not trace for trace in torch.cuda.memory._snapshot()["device_traces"]
    )  # nothing kept behind


def test_a_users_own_recording_stays_on_keeps_its_entries_and_gives_the_figure():
    device = torch.cuda.current_device()
    torch.cuda.memory._record_memory_history(
        "all", context="alloc", stacks="python", max_entries=100_000
    )
    try:
        raise_earlier_peak()
        first = torch.cuda.memory._snapshot()["device_traces"][device][0]
        with call_peak() as peak:
            matmul_sum()
        assert history_on()
        trace = torch.cuda.memory._snapshot()["device_traces"][device]
        assert (trace[0]["action"], trace[0]["addr"], trace[0]["time_us"]) == (
            first["action"],
            first["addr"],
            first["time_us"],
        )
        assert peak.exact and peak.source == "allocator history", peak.note
        assert peak.bytes == reset_figure(matmul_sum)
    finally:
        torch.cuda.memory._record_memory_history(None)
