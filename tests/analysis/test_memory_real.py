"""The memory view on allocator snapshots captured on an H200
(tests/data/capture/memory_snapshots.py made them; tests/data/memory/facts.json holds what the
allocator itself said of each run)."""

from __future__ import annotations

import json

import pytest

import gpumagic
from gpumagic.analysis.memory import CATEGORIES, analyze_memory
from gpumagic.capture.memory.snapshot import read_snapshot

from ..helpers import DATA

MEMORY = DATA / "memory"
FACTS = json.loads((MEMORY / "facts.json").read_text()) if (MEMORY / "facts.json").exists() else {}
RUNS = ["train_step", "compiled", "oom"]
pytestmark = pytest.mark.skipif(not FACTS, reason="tests/data/memory not present")


def _analysis(run: str, max_points: int = 2000):
    return analyze_memory(
        read_snapshot(MEMORY / f"{run}.pickle"),
        device_memory=FACTS[run]["device_total"],
        max_points=max_points,
    )


@pytest.mark.parametrize("run", RUNS)
def test_peak_and_start_and_end_are_the_allocators_own_figures(run):
    f, m = FACTS[run], _analysis(run)
    # peak counters were reset right before recording: the peak before is what was allocated when it
    # began
    assert m.start_allocated == f["max_memory_allocated_before"]
    assert m.peak_bytes == f["max_memory_allocated_after"]
    assert (
        m.peak_bytes - m.start_allocated
        == f["max_memory_allocated_after"] - f["max_memory_allocated_before"]
    )
    assert m.at_end == {
        "allocated": f["memory_allocated_at_dump"],
        "reserved": f["memory_reserved_at_dump"],
    }
    assert int(m.samples["allocated"].iloc[-1]) == f["memory_allocated_at_dump"]
    assert int(m.samples["reserved"].iloc[-1]) == f["memory_reserved_at_dump"]
    assert not m.notes


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("max_points", [2000, 20])
def test_categories_sum_to_allocated_at_every_sample(run, max_points):
    m = _analysis(run, max_points)
    assert (m.samples[list(CATEGORIES)].sum(axis=1) == m.samples["allocated"]).all()
    assert (
        m.peak_bytes == m.samples["allocated"].max()
    )  # decimated or not, the peak is drawn exactly
    assert sum(m.category_at_peak.values()) == m.peak_bytes == m.live_at_peak["bytes"].sum()
    assert (m.samples["reserved"] >= m.samples["allocated"]).all()


def test_train_step_reads_the_scripts_lines_and_the_backward_thread():
    m = _analysis("train_step")
    lines = set(m.live_at_peak["line"])
    assert any(
        line.startswith("capture/memory_snapshots.py:31 in step") for line in lines
    )  # the forward
    assert "(no Python stack)" in lines  # the autograd engine's thread
    assert "torch.nn.modules.linear.forward" in set(m.live_at_peak["op"])
    assert m.category_at_peak["activations"] > 0 and m.category_at_peak["temporaries"] > 0
    assert not any(
        "??" in line or "unwind" in line for line in lines
    )  # C++ frames never name a line


def test_compiled_step_names_the_compiled_graph_not_cpp_frames():
    m = _analysis("compiled")
    ops = set(m.live_at_peak["op"])
    assert not any("::" in op for op in ops)
    assert m.peak_bytes == FACTS["compiled"]["max_memory_allocated_after"]


def test_oom_shows_what_was_alive_when_it_failed():
    f, m = FACTS["oom"], _analysis("oom")
    assert m.oom is not None and m.oom["bytes"] == 512 * 2**20  # "Tried to allocate 512.00 MiB"
    assert "5.78 GiB" in m.findings[0].message  # "5.78 GiB is allocated by PyTorch"
    assert m.findings[0].kind == "memory_oom" and "cap on this process" in m.findings[0].message
    assert m.live_at_oom["bytes"].sum() == m.oom["allocated"]
    view = gpumagic.load_memory_snapshot(MEMORY / "oom.pickle", device_memory=f["device_total"])
    assert view.to_dataframe()["bytes"].sum() == m.oom["allocated"]
    text = str(view)
    assert "Alive when it ran out of memory" in text and "out of memory" in text.lower()
