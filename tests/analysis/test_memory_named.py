"""Every byte named, on a real H100 recording (tests/data/memory/named_step.*: one AdamW step of a
4-block transformer, warm-up outside; the names file lists every tensor the script's names reached
at the recording's start and end, with the allocator's own figures)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import pathlib

import numpy as np
import pytest

from gpumagic.analysis.memory import analyze_memory, block_bytes, format_bytes
from gpumagic.analysis.memory_owners import BEFORE, NO_STACK
from gpumagic.capture.memory.names import MemoryNames, NameTable, module_tree
from gpumagic.capture.memory.snapshot import read_snapshot
from gpumagic.render.memory_view import MemoryView

torch = pytest.importorskip("torch")

DATA = pathlib.Path(__file__).parents[1] / "data"
FACTS = json.loads((DATA / "memory" / "named_step_names.json").read_text())
COLUMNS = ("category", "module", "name", "line", "op")


def _model():
    """The recorded model's module tree, built on the meta device (no memory, no GPU)."""
    spec = importlib.util.spec_from_file_location(
        "module_traces", DATA / "capture" / "module_traces.py"
    )
    mt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mt)
    with torch.device("meta"):
        return mt.GPT(layers=4, d=1024, heads=16)


@pytest.fixture(scope="module")
def names():
    return MemoryNames(
        NameTable.from_records(FACTS["start"]),
        NameTable.from_records(FACTS["end"]),
        module_tree({"model": _model()}),
    )


@pytest.fixture(scope="module")
def snap():
    return read_snapshot(DATA / "memory" / "named_step.pickle")


@pytest.fixture(scope="module")
def named(snap, names):
    return analyze_memory(snap, names=names)


def _sum(rows, kind):
    return int(block_bytes(np.array([r["bytes"] for r in rows if r["category"] == kind])).sum())


def test_the_peak_and_the_start_are_the_allocators(named):
    assert named.peak_bytes == FACTS["max_memory_allocated"]
    assert named.start_allocated == FACTS["memory_allocated_before"]


def test_parameters_gradients_and_optimizer_state_equal_the_names_sums(named):
    at_peak, at_end = named.category_at_peak, named.by("category", at="end").set_index("category")
    for category, kind, got in (
        ("parameters", "parameter", at_peak["parameters"]),
        ("optimizer state", "optimizer state", at_peak["optimizer state"]),
        ("gradients", "gradient", int(at_end.loc["gradients", "bytes"])),
    ):
        want = _sum(FACTS["end"], kind)
        assert want > 0 and abs(got - want) <= 0.01 * want, category
    assert at_peak["inputs"] == _sum(FACTS["start"], "input")


def test_blocks_from_before_the_recording_are_no_longer_unknown(snap, names, named):
    live = named.live_at_peak
    before = live[live["allocated_ms"].isna()]
    plain = analyze_memory(snap)  # without names, what it was: all of it unknown
    assert plain.category_at_peak["unknown"] == int(before["bytes"].sum()) > 0
    named_before = before[before["name"] != ""]
    assert int(named_before["bytes"].sum()) >= 0.9 * int(before["bytes"].sum())
    assert set(named_before["category"]) <= {"parameters", "optimizer state", "inputs", "gradients"}
    assert 0.9 * named.start_allocated <= named.start_named < named.start_allocated
    assert f"({format_bytes(named.start_named)} of it named)" in str(MemoryView(named))
    # what is left unknown is exactly what no name reaches (library workspaces)
    assert named.category_at_peak["unknown"] == int(before.loc[before["name"] == "", "bytes"].sum())
    assert named_before["name"].str.startswith(("model.", "opt.state[model.", "idx")).all()


@pytest.mark.parametrize("at", ["peak", "end"])
def test_every_breakdown_sums_to_the_allocated_bytes_to_the_byte(named, at):
    total = named.peak_bytes if at == "peak" else named.at_end["allocated"]
    tables = {c: named.by(c, at=at) for c in COLUMNS}
    for column, table in tables.items():
        assert int(table["bytes"].sum()) == total, column
    counts = {c: int(t["count"].sum()) for c, t in tables.items()}
    assert len(set(counts.values())) == 1  # every block in each breakdown, once

    def special(column):
        t = tables[column].set_index(column)["bytes"]
        return {k: int(t.get(k, 0)) for k in (BEFORE, NO_STACK)}

    assert special("line")[BEFORE] == special("op")[BEFORE] > 0
    # the op the engine ran is not recorded; the backward it ran in names its line and module
    assert special("line")[NO_STACK] <= special("op")[NO_STACK]
    # the module breakdown keeps there only what no name places
    assert special("module")[BEFORE] <= special("line")[BEFORE]
    assert special("module")[NO_STACK] <= special("op")[NO_STACK]


def test_activations_go_to_the_module_whose_forward_made_them(named):
    live = named.live_at_peak
    act = live[live["category"] == "activations"]
    in_modules = act[act["module"].str.startswith("model.")]
    assert in_modules["bytes"].sum() >= 0.85 * act["bytes"].sum()  # the rest: the loss, in the step
    # made inside a module (an nn op on the stack): never left to "outside any module"
    nn_made = act[act["op"].str.startswith("torch.nn.modules.")]
    assert nn_made["module"].str.startswith("model.").all()
    # the four blocks told apart (one loop line calls them all): each holds the same bytes
    per_block = {
        i: int(act.loc[act["module"].str.startswith(f"model.blocks.{i}."), "bytes"].sum())
        for i in range(4)
    }
    assert len(set(per_block.values())) == 1 and per_block[0] > 0
    # the two Linears of one Sequential told apart by the order of calls, ln1/ln2 by the line
    modules = set(act["module"])
    assert {"model.blocks.0.mlp.0", "model.blocks.0.mlp.2", "model.blocks.0.ln1"} <= modules | set(
        live["module"]
    )


def test_a_parameter_also_bound_to_a_name_is_counted_once(snap, names, named):
    p = next(r for r in FACTS["start"] if r["name"] == "model.head.weight")
    alias = {**p, "name": "w", "category": "input"}
    twice = MemoryNames(
        NameTable.from_records([alias, *FACTS["start"]]),
        NameTable.from_records([alias, *FACTS["end"]]),
        names.modules,
    )
    assert len(twice.start) == len(names.start)
    m = analyze_memory(snap, names=twice)
    assert m.peak_bytes == named.peak_bytes
    assert m.category_at_peak == named.category_at_peak
    assert "w" not in set(m.live_at_peak["name"])
    assert "model.head.weight" in set(m.live_at_peak["name"])


def test_what_would_change_it_estimates_from_the_named_breakdown(snap, named):
    est = {f.kind: f for f in named.findings if f.kind.startswith("memory_estimate_")}
    assert set(est) == {
        "memory_estimate_precision",
        "memory_estimate_checkpointing",
        "memory_estimate_batch",
    }
    assert all(f.message.startswith("Estimate: ") for f in est.values())
    cats = named.category_at_peak
    # every named parameter and optimizer state of this model is fp32: bf16 halves them
    fixed = cats["parameters"] + cats["optimizer state"] + cats["gradients"]
    assert est["memory_estimate_precision"].numbers["saved_bytes"] == fixed // 2
    ck = est["memory_estimate_checkpointing"].numbers
    assert sorted(ck["by_module"]) == [f"model.blocks.{i}" for i in range(4)]
    assert ck["saved_bytes"] == ck["activation_bytes"] - max(ck["by_module"].values())
    assert ck["activation_bytes"] <= cats["activations"]
    grows = cats["activations"] + cats["temporaries"] + cats["inputs"]
    assert est["memory_estimate_batch"].numbers["grows_bytes"] == grows
    # without names the parts cannot be told apart: no estimates
    plain = analyze_memory(snap)
    assert not [f for f in plain.findings if f.kind.startswith("memory_estimate_")]


def test_unit_of():
    from gpumagic.analysis.memory_levers import unit_of

    assert unit_of("model.blocks.3.mlp.0") == "model.blocks.3"
    assert unit_of("model.head") == "model.head"
    assert unit_of("net.0.conv1") == "net.0"
    assert unit_of("(no Python stack)") == ""


def test_the_view_shows_the_module_breakdown_and_the_estimates(named):
    from gpumagic.render.memory_view import MemoryView

    view = MemoryView(named, label="step")
    text, html = str(view), view.html(figure=None)
    assert "Alive at the peak, by module:" in text
    assert "model.blocks.3.mlp.0" in text and "model.blocks.3.mlp.0" in html
    assert text.count("Estimate: ") == 3
    assert view.to_dataframe()["module"].str.startswith("model.").any()


def test_no_estimate_from_parts_that_are_not_there(named, names):
    from gpumagic.analysis.memory_levers import levers_of

    live = named.live_at_peak
    without = dataclasses.replace(named, live_at_peak=live[live["category"] != "activations"])
    kinds = {f.kind for f in levers_of(without, names)}
    assert "memory_estimate_checkpointing" not in kinds
    assert levers_of(dataclasses.replace(named, live_at_peak=live.iloc[:0]), names) == []


def test_the_time_axis_says_what_the_cell_was_doing(snap, named):
    r = named.ranges
    assert set(r["lane"]) == {"phase", "module", "annotation"}
    end = float(named.samples["time_ms"].max())
    assert (r["start_ms"] >= 0).all() and (r["end_ms"] <= end + 1e-9).all()
    assert (r["start_ms"] <= r["end_ms"]).all()
    phases = r[r["lane"] == "phase"].sort_values("start_ms")
    assert phases["label"].tolist() == ["forward", "backward", "optimizer"]
    mods = r[r["lane"] == "module"].set_index("label")
    fwd = [mods.loc[f"model.blocks.{i}", "start_ms"] for i in range(4)]
    bwd = [mods.loc[f"model.blocks.{i} (backward)", "start_ms"] for i in range(4)]
    assert fwd == sorted(fwd) and bwd == sorted(bwd, reverse=True)  # backward runs the other way
    back = phases.set_index("label").loc["backward"]
    assert back["start_ms"] <= min(bwd) and max(bwd) <= back["end_ms"]
    notes = r[r["lane"] == "annotation"].set_index("label")
    assert "cell:step" in notes.index and "Optimizer.step#AdamW.step" in notes.index
    # the optimizer's own range and the optimizer phase read from the stacks agree
    opt = phases.set_index("label").loc["optimizer"]
    assert abs(notes.loc["Optimizer.step#AdamW.step", "start_ms"] - opt["start_ms"]) < 1.0
    when = next(f for f in named.findings if f.kind == "memory_when")
    assert when.numbers["phase"] == "backward" and "(backward)" in when.numbers["module"]
    assert when.message.startswith(f"The peak ({'1.95 GiB'} at ")
    # without names: phases and the annotations, no modules
    plain = analyze_memory(snap).ranges
    assert set(plain["lane"]) == {"phase", "annotation"}


def test_the_figure_draws_the_ranges_on_the_memory_axis(named):
    pytest.importorskip("bokeh")
    from gpumagic.render.memory_figure import memory_figure

    fig = memory_figure(named)
    plot, lanes = fig.children
    assert lanes.x_range is plot.x_range  # one time axis: zooming one zooms the other
    assert fig.height == plot.height + lanes.height
    drawn = lanes.renderers[0].data_source.data
    assert list(drawn["label"]) == named.ranges["label"].tolist()
    assert "blocks.0" in drawn["text"]  # short names on the bars that fit


def test_a_saved_snapshot_is_named_as_the_magic_names_it(names, named):
    import gpumagic

    view = gpumagic.load_memory_snapshot(DATA / "memory" / "named_step.pickle", names=names)
    assert view.analysis.category_at_peak == named.category_at_peak
    assert view.analysis.by("module").equals(named.by("module"))


def test_without_stacks_the_names_still_name_and_no_phase_is_made_up(snap, names, named):
    bare = dataclasses.replace(snap, stack=np.full(len(snap), -1, np.int32))
    bare.blocks = {**snap.blocks, "stack": np.full(len(snap.blocks["stack"]), -1, np.int32)}
    m = analyze_memory(bare, names=names)
    assert not m.stacks_recorded and m.peak_bytes == named.peak_bytes
    # what the names know they still say: parameters, optimizer state, new gradients at the end
    for c in ("parameters", "optimizer state"):
        assert m.category_at_peak[c] == named.category_at_peak[c]
    end = m.by("category", at="end").set_index("category")["bytes"]
    assert (
        end["gradients"]
        == named.by("category", at="end").set_index("category").loc["gradients", "bytes"]
    )
    assert "phase" not in set(m.ranges["lane"]) and "module" not in set(m.ranges["lane"])
    assert set(m.live_at_peak["line"]) <= {"(stacks not recorded)", "(before the recording)"}


def test_the_outermost_module_is_the_one_the_calling_line_names(snap, names):
    # another model of the same class in the namespace: the step's line `logits = model(idx)` says
    # which one ran
    with torch.device("meta"):
        other = _model()
    tree = module_tree({"other": other, "model": _model()})
    m = analyze_memory(snap, names=MemoryNames(names.start, names.end, tree))
    act = m.live_at_peak[m.live_at_peak["category"] == "activations"]
    made = act.loc[act["op"].str.startswith("torch.nn.modules."), "module"]
    assert made.str.startswith("model.").all() and len(made)


def test_names_without_the_module_tree_say_why_activations_sit_outside_modules(snap, names, named):
    from gpumagic.analysis.memory import NO_MODULE_TREE

    bare = analyze_memory(snap, names=MemoryNames(names.start, names.end))
    assert NO_MODULE_TREE in bare.notes and NO_MODULE_TREE in str(MemoryView(bare))
    assert NO_MODULE_TREE not in named.notes  # with the tree, activations are on modules


def _source_line(label):
    """The text of a ``file:line in function`` label's line in the recorded script."""
    number = int(label.split(" in ")[0].rsplit(":", 1)[1])
    return (DATA / "capture" / "module_traces.py").read_text().splitlines()[number - 1]


def test_the_engines_blocks_at_the_peak_are_named_by_the_backward_they_ran_in(named):
    live = named.live_at_peak
    engine = live[live["op"] == NO_STACK]
    assert int(engine["bytes"].sum()) >= 0.05 * named.peak_bytes  # a real share to name
    for column in ("module", "line"):
        unnamed = int(live.loc[live[column] == NO_STACK, "bytes"].sum())
        assert unnamed <= 0.05 * named.peak_bytes, column
    # the peak falls in the head's backward: its blocks are the head's, on the line calling it
    assert "in model.head (backward)" in next(
        f.message for f in named.findings if f.kind == "memory_when"
    )
    assert set(engine["module"]) <= {
        label for label in named.ranges["label"] if label.endswith(" (backward)")
    } | {m for m in live["module"] if m.startswith("model.")}
    head = engine[engine["module"] == "model.head (backward)"]
    assert int(head["bytes"].sum()) > 0
    lines = set(head["line"])
    assert len(lines) == 1 and lines.pop().endswith(" (backward)")
    assert "self.head(" in _source_line(head["line"].iloc[0].removesuffix(" (backward)"))


def test_each_blocks_backward_is_named_on_the_line_that_calls_the_blocks(snap, names, monkeypatch):
    """Over the whole recording (not only the peak): every engine allocation inside a block's
    backward goes to that block and to the loop's ``x = block(x)`` line."""
    from gpumagic.analysis import memory as memory_module

    seen = {}
    real = memory_module.name_backward

    def spy(own, ranges, *args):
        out = real(own, ranges, *args)
        seen["own"], seen["ranges"] = out
        return out

    monkeypatch.setattr(memory_module, "name_backward", spy)
    analyze_memory(snap, names=names)
    own = seen["own"]
    blocks = [m for m in set(own.hist_module.tolist()) if m.startswith("model.blocks.")]
    back = sorted(m for m in blocks if m.endswith(" (backward)"))
    assert back == [f"model.blocks.{i} (backward)" for i in range(4)]
    for label in back:
        lines = set(own.hist_line[own.hist_module == label].tolist())
        assert len(lines) == 1
        assert "block(x)" in _source_line(lines.pop().removesuffix(" (backward)"))


def test_a_second_micro_batchs_backward_is_named_though_it_makes_no_new_gradients():
    """H200: two micro-batches of the same model, each loss / 2 then backward(), then AdamW
    (tests/data/capture/accumulation_memory.py): the second backward adds into the gradients the
    first made, so it allocates no new one to time its units by; it is aligned with the first."""
    facts = json.loads((DATA / "memory" / "accumulation_names.json").read_text())
    names = MemoryNames(
        NameTable.from_records(facts["start"]),
        NameTable.from_records(facts["end"]),
        module_tree({"model": _model()}),
    )
    m = analyze_memory(read_snapshot(DATA / "memory" / "accumulation_step.pickle"), names=names)
    assert m.peak_bytes == facts["max_memory_allocated"]
    phases = m.ranges[(m.ranges["lane"] == "phase") & (m.ranges["label"] == "backward")]
    assert len(phases) == 2
    second = phases["start_ms"].max()
    units = m.ranges[(m.ranges["lane"] == "module") & (m.ranges["start_ms"] >= second)]
    want = {"model.head", "model.ln_f", "model.embed"} | {f"model.blocks.{i}" for i in range(4)}
    assert set(units["label"]) == {f"{u} (backward)" for u in want}
    assert units.sort_values("start_ms")["label"].iloc[0] == "model.head (backward)"
    live = m.live_at_peak
    assert m.peak_time_ms >= second  # the peak is in the second backward
    for column in ("module", "line"):
        unnamed = int(live.loc[live[column] == NO_STACK, "bytes"].sum())
        assert unnamed <= 0.05 * m.peak_bytes, (column, unnamed)
    when = next(f.message for f in m.findings if f.kind == "memory_when")
    assert " (backward)" in when


def test_byte_amounts_read_as_a_person_writes_them():
    from gpumagic.analysis.transfers import _mb

    assert format_bytes(1023 * 2**20 + 2**19) == "1 GiB"  # not "1.02e+03 MiB"
    assert format_bytes(999 * 2**20) == "999 MiB" and format_bytes(512) == "512 B"
    assert "e+" not in "".join(format_bytes(n) for n in range(2**20 - 600, 2**20, 7))
    assert _mb(4) == "4 B" and _mb(4096) == "4.1 kB" and _mb(3_000_000) == "3 MB"  # not "0.0 kB"
