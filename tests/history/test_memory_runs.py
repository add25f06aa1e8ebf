"""Memory runs in the history (``%%gpuprofile --memory -l NAME`` / ``--vs``): saved, found, kept
apart from timings and profiles, listed, and compared (on the committed H100 recording)."""

from __future__ import annotations

import copy
import json

import pytest

import gpumagic
from gpumagic.__main__ import main
from gpumagic.analysis.memory import analyze_memory
from gpumagic.analysis.memory_diff import OTHER, diff_memory, memory_summary
from gpumagic.capture.memory.names import MemoryNames, NameTable
from gpumagic.capture.memory.snapshot import read_snapshot
from gpumagic.history.memory_runs import MemoryRecorder, UnknownMemoryRunError
from gpumagic.history.saving import Recorder, UnknownReferenceError

from ..helpers import DATA, fake_result

FACTS = json.loads((DATA / "memory" / "named_step_names.json").read_text())


@pytest.fixture(scope="module")
def summary():
    names = MemoryNames(
        NameTable.from_records(FACTS["start"]), NameTable.from_records(FACTS["end"])
    )
    m = analyze_memory(read_snapshot(DATA / "memory" / "named_step.pickle"), names=names)
    return memory_summary(m)


def _smaller(summary, module="(before the recording)"):
    """The same run with a module's bytes halved (its category's too): what a change would do."""
    s = copy.deepcopy(summary)
    cut = s["by_module"][module] // 2
    s["by_module"][module] -= cut
    s["by_category"]["unknown"] -= cut
    s["peak_bytes"] -= cut
    return s, cut


def test_the_summary_adds_up_to_the_peak(summary):
    assert summary["peak_bytes"] == FACTS["max_memory_allocated"]
    assert sum(summary["by_category"].values()) == summary["peak_bytes"]
    assert sum(summary["by_module"].values()) == summary["peak_bytes"]
    assert OTHER not in summary["by_module"]  # fewer modules than kept by name
    json.dumps(summary)  # plain values: it goes to the history as JSON


def test_saved_found_by_label_and_last_and_kept_apart(tmp_path, fresh_recorder, summary):
    path = str(tmp_path / "h.sqlite")
    Recorder(path, label="t").record(fake_result(n=30), "x + 1")
    first = MemoryRecorder(path, label="base").record(summary, "step()", "H100")
    assert first.ids and first.reference is None
    smaller, _ = _smaller(summary)
    by_label = MemoryRecorder(path, vs="base").record(smaller, "step()", "H100")
    assert by_label.reference == summary and by_label.names[0] == f"#{first.ids[0]} base"
    last = MemoryRecorder(path, vs="last").record(summary, "step()", "H100")
    assert last.reference == smaller  # the previous memory run on this device
    df = gpumagic.history(path=path)
    assert df["kind"].tolist() == ["gputime", "memory", "memory", "memory"]
    memory = gpumagic.history(path=path, kind="memory")
    assert memory["label"].fillna("").tolist() == ["base", "", ""]
    with pytest.raises(UnknownMemoryRunError, match=r"no memory run with that label.*base"):
        MemoryRecorder(path, vs="nope")
    with pytest.raises(UnknownMemoryRunError):
        MemoryRecorder(path, vs="t")  # a timing's label: not a memory run
    with pytest.raises(UnknownReferenceError):
        Recorder(path, vs="base")  # a memory run's label: not a timing
    with pytest.raises(UnknownMemoryRunError):
        MemoryRecorder(path, vs="1")  # the timing's id


def test_the_diff_says_what_moved(summary):
    smaller, cut = _smaller(summary)
    d = diff_memory(summary, smaller, ("#1 base", "#2"))
    assert d.peaks == (summary["peak_bytes"], smaller["peak_bytes"])
    text = str(d)
    assert text.startswith("Memory vs #1 base: peak 1.95 GiB -> ") and "(#2)" in text
    assert "By category: unknown -32.5 MiB" in text and "(before the recording) -32.5 MiB" in text
    t = d.to_dataframe()
    assert int(t.loc[t["part"] == "category", "change"].sum()) == -cut
    assert int(t.loc[t["part"] == "module", "change"].sum()) == -cut
    assert t["change"].abs().iloc[0] == cut  # largest change first
    same = diff_memory(summary, summary)
    assert "No part of the peak moved" in str(same)
    with pytest.raises(ValueError, match="no peak_bytes"):
        diff_memory({}, summary)


def test_the_cli_lists_profiles_and_memory_runs(tmp_path, fresh_recorder, summary, capsys):
    path = tmp_path / "h.sqlite"
    Recorder(str(path), label="t").record(fake_result(n=30), "x + 1")
    MemoryRecorder(str(path), label="step").record(summary, "step()", "NVIDIA H100 80GB HBM3")
    assert main(["history", "--db", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and "peak" in out[0]
    assert "step" in out[2] and "peak 1.95 GiB" in out[2] and "memory" in out[2]
