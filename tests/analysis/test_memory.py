"""The memory view on snapshots written in torch's own format (memory_fake.py beside this file): the
reader, the timeline, the exact peak and its live set, the categories, the findings, the view's
faces, and OOM."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import gpumagic
from gpumagic.analysis.memory import CATEGORIES, analyze_memory
from gpumagic.capture.memory.snapshot import SnapshotFormatError, read_snapshot
from gpumagic.render.memory_view import MemoryView

from ..helpers import DATA
from .memory_fake import USER, FakeAllocator, forward, optim, training_run


def _walk(a: FakeAllocator) -> list[int]:
    """The allocated level after every entry of ``a``'s history, replayed independently of the
    analysis."""
    live: dict[int, int] = {}
    snap = a.snapshot()
    hist = {e["addr"] for e in snap["device_traces"][0] if e["action"] == "alloc"}
    for seg in snap["segments"]:
        for b in seg["blocks"]:
            if b["state"] == "active_allocated" and b["address"] not in hist:
                live[b["address"]] = b["size"]
    levels = []
    for e in snap["device_traces"][0]:
        if e["action"] == "alloc":
            live[e["addr"]] = max(512, -(-e["size"] // 512) * 512)
        elif e["action"] == "free_requested":
            live.pop(e["addr"], None)
        levels.append(sum(live.values()))
    return levels


def test_the_peak_is_exact_and_the_level_ends_at_the_snapshots_own_total():
    a, expect = training_run(3)
    m = analyze_memory(read_snapshot(a.snapshot()))
    assert m.peak_bytes == expect["peak"] == max(_walk(a))
    assert m.start_allocated == expect["before"]
    assert m.at_end["allocated"] == a.allocated() == int(m.samples["allocated"].iloc[-1])
    assert m.at_end["reserved"] == a.reserved() == int(m.samples["reserved"].iloc[-1])
    assert not m.notes


def test_categories_sum_to_allocated_at_every_sample():
    a, _ = training_run(4)
    m = analyze_memory(
        read_snapshot(a.snapshot()), max_points=10
    )  # decimated: every kept sample still sums
    cats = m.samples[list(CATEGORIES)].sum(axis=1)
    assert (cats == m.samples["allocated"]).all()
    assert m.peak_bytes in set(m.samples["allocated"])  # the peak survives decimation


def test_categories_from_stacks_and_lifetimes():
    a, _ = training_run(2)
    m = analyze_memory(read_snapshot(a.snapshot()))
    live = m.live_at_peak.set_index("line")
    assert (
        live.loc["me/train.py:10 in step", "category"] == "activations"
    )  # alive when backward allocates
    assert live.loc["me/train.py:5 in <module>", "category"] == "parameters"
    assert live.loc["me/train.py:20 in step", "category"] == "optimizer state"
    assert (
        live.loc["(no Python stack)", "category"] == "temporaries"
    )  # a backward intermediate, freed in backward
    assert m.category_at_peak["activations"] == (16 << 20) + (2 << 20)
    assert sum(m.category_at_peak.values()) == m.peak_bytes
    # the gradient made in backward outlives it
    grads = m.samples["gradients"]
    assert grads.max() == 4 << 20


def test_known_addresses_name_the_blocks_allocated_before_the_recording():
    a = FakeAllocator(record=False)
    x = a.alloc(
        3 << 20
    )  # no frames: recorded before the history, as %%gpuprofile --memory sees an input
    a.record = True
    a.free(a.alloc(1 << 20, forward()))
    m = analyze_memory(read_snapshot(a.snapshot()), known={x: "inputs"})
    assert m.samples["inputs"].iloc[0] == 3 << 20
    plain = analyze_memory(read_snapshot(a.snapshot()))
    assert plain.samples["unknown"].iloc[0] == 3 << 20
    assert plain.live_at_peak["line"].iloc[0] == "(before the recording)"


def test_live_set_by_line_and_op_largest_first():
    a, _ = training_run(2)
    m = analyze_memory(read_snapshot(a.snapshot()))
    by_line = m.by("line")
    assert list(by_line["bytes"]) == sorted(by_line["bytes"], reverse=True)
    assert by_line["bytes"].sum() == m.peak_bytes
    assert "torch.nn.modules.linear.forward" in set(m.by("op")["op"])


def test_findings_name_their_numbers():
    a, _ = training_run(6)
    m = analyze_memory(read_snapshot(a.snapshot()), device_memory=80 << 30)
    kinds = {f.kind: f for f in m.findings}
    assert "32 MiB" in kinds["memory_peak"].message and "80 GiB" in kinds["memory_peak"].message
    assert kinds["memory_category"].numbers["category"] == "activations"
    assert (
        kinds["memory_remade"].numbers["remade"] == 5
    )  # the optimizer's temporary, made again each step
    assert kinds["memory_empty_cache"].numbers["bytes"] == a.reserved() - sum(
        s["size"]
        for s in a.segments.values()
        if any(b["seg"] == s["addr"] for b in a.blocks.values())
    )


def test_fragmentation_gap_at_the_peak():
    a = FakeAllocator()
    a.segment(64 << 20)  # reserved well above what is used
    keep = a.alloc(8 << 20, forward())
    m = analyze_memory(read_snapshot(a.snapshot()))
    gap = next(f for f in m.findings if f.kind == "memory_gap")
    assert gap.numbers["gap_bytes"] == m.peak_reserved - m.peak_bytes == (64 << 20) - (8 << 20)
    assert gap.severity == "warn" and keep


def test_an_oom_the_history_did_not_record_is_placed_at_its_end_from_the_error():
    import json

    from gpumagic.notebook.memory_magic import _failed_request

    a = FakeAllocator()
    a.alloc(40 << 20, forward(30))
    a.alloc(2 << 20, forward(31))
    facts = json.loads((DATA / "memory" / "facts.json").read_text())
    error = type("OutOfMemoryError", (RuntimeError,), {})(
        facts["oom_error"]
    )  # torch's own message, from the H200
    request = _failed_request(error)
    assert request == 512 << 20  # "Tried to allocate 512.00 MiB"
    assert (
        _failed_request(RuntimeError(facts["oom_error"])) is None
    )  # only an out-of-memory error says so
    m = analyze_memory(read_snapshot(a.snapshot()), failed_request=request)
    assert m.oom["bytes"] == 512 << 20 and m.oom["allocated"] == 42 << 20
    assert m.live_at_oom["bytes"].sum() == 42 << 20
    assert m.findings[0].kind == "memory_oom"
    assert analyze_memory(read_snapshot(a.snapshot())).oom is None
    # a cell whose only allocation failed leaves no entry at all: the failure is still said, with
    # nothing alive
    empty = analyze_memory(read_snapshot(FakeAllocator().snapshot()), failed_request=request)
    assert empty.oom["bytes"] == 512 << 20 and empty.oom["allocated"] == 0
    assert empty.findings[0].kind == "memory_oom"
    view = MemoryView(empty, label="oom")
    assert "512 MiB" in str(view) and "512 MiB" in view._repr_html_()


def test_oom_shows_what_was_alive_when_it_failed():
    a = FakeAllocator()
    big = a.alloc(40 << 20, forward(30))
    a.alloc(2 << 20, forward(31))
    a.oom(1 << 30, device_free=5 << 20)
    a.free(big)  # the exception unwinds: frames drop their tensors
    m = analyze_memory(read_snapshot(a.snapshot()))
    assert m.oom["bytes"] == 1 << 30 and m.oom["device_free"] == 5 << 20
    assert m.oom["allocated"] == (42 << 20)
    assert m.live_at_oom["bytes"].sum() == 42 << 20
    assert m.findings[0].kind == "memory_oom" and "1 GiB" in m.findings[0].message
    view = MemoryView(m, label="oom")
    assert view.to_dataframe()["bytes"].sum() == 42 << 20
    html = view.html(None)
    assert (
        "Alive when it ran out of memory" in html
        and "At the peak the same blocks were alive" in html
    )
    assert "out of memory" in str(view)


def test_reader_refuses_objects_and_non_snapshots(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("ran",))

    p = tmp_path / "evil.pickle"
    p.write_bytes(pickle.dumps({"segments": [], "device_traces": [[Evil()]]}))
    with pytest.raises(SnapshotFormatError, match="names a Python object"):
        read_snapshot(p)
    q = tmp_path / "list.pickle"
    q.write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(SnapshotFormatError, match="segments"):
        read_snapshot(q)
    with pytest.raises(FileNotFoundError):
        read_snapshot(tmp_path / "missing.pickle")


def test_no_history_and_no_stacks():
    a = FakeAllocator(record=False)
    a.alloc(4 << 20, forward())
    m = analyze_memory(read_snapshot(a.snapshot()))  # segments only: no history at all
    assert m.events == 0 and m.peak_bytes == 4 << 20
    b = FakeAllocator()
    b.free(b.alloc(4 << 20))
    b.alloc(1 << 20)
    m = analyze_memory(read_snapshot(b.snapshot()))
    assert not m.stacks_recorded and set(m.live_at_peak["category"]) == {"unknown"}
    assert any("without stack traces" in n for n in m.notes)


def test_shared_frames_give_one_stack_and_user_lines():
    a = FakeAllocator()
    for _ in range(5):
        a.alloc(1 << 20, optim(21))
    s = read_snapshot(a.snapshot())
    assert len(s.stacks) == 1 and s.stack_frames(0)[-1][0] == USER


def test_load_memory_snapshot_faces(tmp_path):
    a, _ = training_run(2)
    path = a.dump(str(tmp_path / "snap.pickle"))
    view = gpumagic.load_memory_snapshot(path, device_memory=80 << 30)
    text = str(view)
    assert text.startswith("Memory of snap.pickle: peak 32 MiB")
    assert "by source line" in text and "train.py:10 in step" in text
    page = view._repr_html_()
    assert "<iframe" in page and "Alive at the peak" in page and "activations" in page
    bundle = view._repr_mimebundle_()
    assert "gm-timeline" in bundle["text/html"] and bundle["text/plain"] == text
    df = view.to_dataframe()
    assert df["bytes"].sum() == view.peak_bytes
    assert list(view.timeline().columns)[:3] == ["time_ms", "allocated", "reserved"]
    out = view.save_html(tmp_path / "mem.html")
    with open(out, encoding="utf-8") as f:
        assert "Bokeh" in f.read()


def test_the_user_history_tail_keeps_what_came_before_as_already_allocated():
    a, _ = training_run(3)
    snap = read_snapshot(a.snapshot())
    cut = len(snap) // 2
    whole, tail = analyze_memory(snap), analyze_memory(snap.tail(cut))
    levels = _walk(a)
    assert tail.start_allocated == levels[cut - 1]
    assert tail.peak_bytes == max(levels[cut:])
    assert tail.at_end == whole.at_end
    assert np.isclose(tail.samples["time_ms"].iloc[0], 0.0)


def test_the_magic_says_what_it_needs_without_cuda(ip):
    import torch
    from IPython.core.error import UsageError

    if torch.cuda.is_available():
        pytest.skip("CUDA present: tests/gpu/test_memory_gpu.py runs the magic")
    with pytest.raises(UsageError, match="needs a CUDA GPU"):
        ip.run_cell_magic("gpuprofile", "--memory", "x = 1")
    with pytest.raises(UsageError, match="--memory"):
        ip.run_cell_magic("gpuprofile", "--memory --nsys", "x = 1")


def test_the_device_shown_is_the_one_with_the_most_memory_segments_weighed_too():
    # 10 GiB of segments on device 1 and no history there; one 512 B allocation on device 0
    gib = 1 << 30
    snap = {
        "segments": [
            {
                "device": 1,
                "address": 1 << 40,
                "total_size": 10 * gib,
                "allocated_size": 10 * gib,
                "segment_type": "large",
                "blocks": [{"address": 1 << 40, "size": 10 * gib, "state": "active_allocated"}],
            }
        ],
        "device_traces": [
            [{"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "frames": []}],
            [],
        ],
    }
    got = read_snapshot(snap)
    assert got.device == 1 and got.devices == (0, 1)
    assert read_snapshot(snap, device=0).device == 0  # asked for: as asked


def test_a_segment_list_without_history_reads_and_says_what_it_cannot_tell():
    a, _ = training_run()
    segments = a.snapshot()["segments"]  # what torch.cuda.memory_snapshot() returns: a list
    for source in (segments, pickle.dumps(segments)):
        got = read_snapshot(source)
        assert len(got.action) == 0 and len(got.segments)
        assert any("segments alone (torch.cuda.memory_snapshot())" in n for n in got.notes)
    with pytest.raises(SnapshotFormatError, match="a list, but not of allocator segments"):
        read_snapshot([{"not": "a segment"}])
