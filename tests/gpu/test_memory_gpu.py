"""%%gpuprofile --memory on a real GPU: the figures against the allocator's own, and the allocator
left as found."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

CELL = """
opt.zero_grad(set_to_none=True)
loss = model(x).float().pow(2).mean()
loss.backward()
opt.step()
"""


@pytest.fixture
def shell(ip):
    """The suite's shared shell (tests/conftest.py: one InteractiveShell per process) with a model
    to train."""
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)
    ).cuda()
    ip.user_ns.update(
        torch=torch,
        model=model,
        opt=torch.optim.AdamW(model.parameters()),
        x=torch.randn(2048, 1024, device="cuda"),
    )
    yield ip
    for name in ("model", "opt", "x", "loss", "mem"):
        ip.user_ns.pop(name, None)
    torch.cuda.synchronize()


def _history_enabled() -> bool:
    return bool(torch._C._cuda_isHistoryEnabled())


def test_categories_sum_and_the_peak_is_the_allocators(shell):
    torch.cuda.synchronize()
    # this test's own reset, before the cell (gpumagic never resets)
    torch.cuda.reset_peak_memory_stats()
    shell.run_cell_magic("gpuprofile", "--memory -o mem", CELL)
    peak_counter = torch.cuda.max_memory_allocated()
    view = shell.user_ns["mem"]
    m = view.analysis
    cats = m.samples[
        [
            "parameters",
            "optimizer state",
            "inputs",
            "activations",
            "gradients",
            "temporaries",
            "unknown",
        ]
    ]
    assert (
        (cats.sum(axis=1) - m.samples["allocated"]).abs() <= 0.01 * m.samples["allocated"]
    ).all()
    # the counter also saw the warm-up (outside the recording): the cell's peak is at most the
    # counter's
    assert m.peak_bytes <= peak_counter
    assert m.at_end["allocated"] == torch.cuda.memory_allocated()
    # parameters and optimizer state were made before the recording: the namespace names them
    assert m.category_at_peak["parameters"] > 0 and m.category_at_peak["optimizer state"] > 0
    assert not _history_enabled()  # turned off again: it was off before


def test_peak_equals_max_memory_allocated_over_the_cell(shell):
    shell.run_cell_magic(
        "gpuprofile", "-w 1 --memory -o mem", CELL
    )  # warm: the optimizer state exists
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    shell.run_cell_magic("gpuprofile", "-w 0 --memory -o mem", CELL)
    assert shell.user_ns["mem"].analysis.peak_bytes == torch.cuda.max_memory_allocated()


def test_peak_counters_and_a_users_own_recording_are_left_alone(shell):
    shell.run_cell(CELL)  # warm
    torch.cuda.synchronize()
    big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    del big
    before = torch.cuda.memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=50_000, stacks="python")
    try:
        shell.run_cell_magic("gpuprofile", "--memory -o mem", CELL)
        assert _history_enabled()  # the user's recording still on
        after = torch.cuda.memory_stats()
        assert (
            after["allocated_bytes.all.peak"] == before["allocated_bytes.all.peak"]
        )  # the earlier peak stands
        notes = " ".join(shell.user_ns["mem"].notes)
        assert "own settings" in notes
        # the user's history still records: an allocation made now is in their snapshot
        y = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
        trace = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
        assert any(e["action"] == "alloc" and e["size"] == 3 << 20 for e in trace)
        del y
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    assert not _history_enabled()


def test_out_of_memory_is_shown_then_raised(shell):
    total = torch.cuda.get_device_properties(0).total_memory
    shell.user_ns["n"] = total * 2
    result = shell.run_cell(
        "%%gpuprofile -w 0 --memory -o mem\ny = torch.empty(n, dtype=torch.uint8, device='cuda')"
    )
    assert isinstance(result.error_in_exec, torch.OutOfMemoryError)
    m = shell.user_ns["mem"].analysis
    # a request beyond the device is refused before the allocator records an oom entry: the bytes
    # are the error's "Tried to allocate 279.60 GiB", rounded to 2 decimals there
    assert m.oom is not None and m.oom["bytes"] >= total * 2 * 0.999
    assert m.findings[0].kind == "memory_oom"
    assert not _history_enabled()
    shell.user_ns.pop("n", None)
