"""By-code attribution on real H100 training steps (``tests/data/attribution``, made by
``tests/data/capture/module_traces.py``): every kernel and memory operation on one module and one
line, the backward put on the module whose forward caused it.

The per-module check is computed here a second way, from the raw JSON and by other links than the
code under test uses: a kernel's launching op by its "External id" (not the CUDA call's correlation
and time), and a backward op's forward op by the trace's ``fwdbwd`` flow events (not the sequence
numbers), each "innermost enclosing" found by a plain scan.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from functools import cache

import pytest

from gpumagic import load_trace
from gpumagic.trace.by_code import NO_LINES, NO_MODULES, attribution

from ..helpers import ROOT

DATA = ROOT / "tests" / "data" / "attribution"
WITH_MODULES = ["gpt_modules", "cnn_modules", "gpt_compiled"]
PLAIN = ["gpt_plain", "cnn_plain"]


@cache
def trace(name: str):
    return load_trace(DATA / f"{name}.json.gz")


def gpu_total(t, memops: bool = True) -> int:
    total = int((t.kernels["end"] - t.kernels["start"]).sum())
    return total + (int((t.memops["end"] - t.memops["start"]).sum()) if memops else 0)


@pytest.mark.parametrize("name", WITH_MODULES + PLAIN)
@pytest.mark.parametrize("memops", [True, False])
def test_module_rows_make_the_kernel_total_exactly(name, memops):
    t = trace(name)
    rows = t.by_module(memops=memops)
    if name in PLAIN:
        assert rows.empty and rows.attrs["note"] == NO_MODULES
        return
    total = gpu_total(t, memops)
    assert total > 0
    top = rows[rows["depth"] == 0]
    assert int(top["fwd_ns"].sum() + top["bwd_ns"].sum()) == total
    assert int(rows["self_fwd_ns"].sum() + rows["self_bwd_ns"].sum()) == total
    assert int(rows["kernels"][rows["depth"] == 0].sum()) == len(t.kernels) + (
        len(t.memops) if memops else 0
    )
    assert rows["share"].between(0, 1).all()


@pytest.mark.parametrize("name", WITH_MODULES)
def test_backward_is_put_on_modules_not_outside(name):
    rows = trace(name).by_module()
    outside = rows[rows["instance"] == ""].iloc[0]
    backward = int(rows.loc[rows["depth"] == 0, "bwd_ns"].sum())
    in_modules = backward - int(outside["bwd_ns"])
    assert backward > 0
    # the loss and the casts around the model are outside it, so their backward is too: a small part
    assert in_modules / backward > 0.8
    assert "Optimizer.step" in outside["why"]  # the optimizer is said as such


@cache
def independent(name: str) -> dict[str, int]:
    """Instance path -> kernel + memory-operation ns (forward and backward), computed from the raw
    events by External id and fwdbwd flows."""
    with gzip.open(DATA / f"{name}.json.gz", "rt") as f:
        events = json.load(f)["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    by_ext = {}
    for op in ops:
        by_ext.setdefault(op["args"].get("External id"), op)
    modules = [
        e
        for e in events
        if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")
    ]
    flow_s = {e["id"]: e for e in events if e.get("cat") == "fwdbwd" and e["ph"] == "s"}
    targets = {
        (e["tid"], e["ts"]): flow_s[e["id"]]
        for e in events
        if e.get("cat") == "fwdbwd" and e["ph"] == "f" and e["id"] in flow_s
    }

    def holding(evs, tid, ts):
        inside = [e for e in evs if e["tid"] == tid and e["ts"] <= ts < e["ts"] + e["dur"]]
        return sorted(inside, key=lambda e: e["ts"])

    def path(tid, ts):
        chain = holding(modules, tid, ts)
        return ".".join(e["name"][len("nn.Module: ") :] for e in chain) or None

    out: dict[str, int] = defaultdict(int)
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memset", "gpu_memcpy"):
            continue
        dur = round(e["ts"] * 1000 + e["dur"] * 1000) - round(e["ts"] * 1000)
        op = by_ext.get(e["args"].get("External id"))
        where = None
        if op is not None:
            where = (op["tid"], op["ts"])
            for outer in reversed(holding(ops, op["tid"], op["ts"])):
                fwd = targets.get((outer["tid"], outer["ts"]))
                if fwd is None and outer["name"].startswith("autograd::engine::evaluate_function"):
                    # the engine's op for a node (the node's op and the gradients it sums): the
                    # flow ends on the node's op inside it
                    end = outer["ts"] + outer["dur"]
                    fwd = next(
                        (
                            targets[k]
                            for k in targets
                            if k[0] == outer["tid"] and outer["ts"] <= k[1] < end
                        ),
                        None,
                    )
                if fwd is not None:  # a backward op: its forward op's place
                    where = (fwd["tid"], fwd["ts"])
                    break
        out[path(*where) if where else None] += dur
    return dict(out)


@pytest.mark.parametrize("name", WITH_MODULES)
def test_each_module_agrees_with_an_independent_computation(name):
    rows = trace(name).by_module()
    mine = {
        (r["instance"] or None): r["self_fwd_ns"] + r["self_bwd_ns"] for _, r in rows.iterrows()
    }
    theirs = independent(name)
    total = gpu_total(trace(name))
    assert sum(theirs.values()) == pytest.approx(total, abs=len(theirs) + 600)
    compared = 0
    for module, ns in theirs.items():
        if ns < 0.001 * total:
            continue
        assert mine.get(module, 0) == pytest.approx(ns, rel=0.01), module
        compared += 1
    assert compared >= (2 if name == "gpt_compiled" else 10)


def test_forward_and_backward_per_block_of_the_gpt():
    rows = trace("gpt_modules").by_module().set_index("instance")
    blocks = [f"GPT_0.Block_{i}" for i in range(3)]
    for b in blocks:
        assert rows.loc[b, "bwd_ns"] > rows.loc[b, "fwd_ns"] > 0  # backward costs more
        kids = rows[rows.index.str.startswith(b + ".") & (rows["depth"] == 2)]
        own = rows.loc[b, "self_fwd_ns"] + rows.loc[b, "self_bwd_ns"]
        assert int(kids["total_ns"].sum()) + own == rows.loc[b, "total_ns"]
    # three identical blocks cost the same within 5%
    totals = [rows.loc[b, "total_ns"] for b in blocks]
    assert max(totals) / min(totals) < 1.05


def test_dotted_names_from_the_live_model():
    torch = pytest.importorskip("torch")
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "module_traces", ROOT / "tests" / "data" / "capture" / "module_traces.py"
    )
    capture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(capture)
    facts = json.loads((DATA / "facts.json").read_text())
    with torch.device("meta"):
        gpt, cnn = capture.GPT(), capture.resnet()
    for name, model, known in (
        ("gpt_modules", gpt, facts["gpt_modules"]),
        ("cnn_modules", cnn, facts["cnn_modules"]),
    ):
        rows = trace(name).by_module(model=model)
        named = set(rows.loc[rows["depth"] > 0, "module"])
        assert named <= set(known)
        # every module whose forward ran is named (a ModuleList is never called)
        called = {n for n in known if n != "blocks"}
        assert named == called, called ^ named
    rows = trace("gpt_modules").by_module(model={"model": gpt}).set_index("instance")
    assert rows.loc["GPT_0", "module"] == "model"
    # one top-level module: its children named as under it, as the code writes them
    assert rows.loc["GPT_0.Block_1.Attention_1", "module"] == "blocks.1.attn"


@pytest.mark.parametrize("name", WITH_MODULES)
def test_lines_of_a_loaded_trace_are_its_functions(name):
    t = trace(name)
    rows = t.by_line()
    assert int(rows["total_ns"].sum()) == gpu_total(t) == int(rows["launched_ns"].sum())
    assert "first line" in rows.attrs["note"]
    step = rows[rows["source"].str.contains(r"_step$")].iloc[0]
    # the step function launched the backward; the model's forwards own most of it
    assert step["launched_bwd_ns"] > 0
    forwards = rows[rows["source"].str.endswith(": forward")]
    assert int(forwards["bwd_ns"].sum()) > step["bwd_ns"]
    assert not rows["source"].str.contains("torch/").any()


@pytest.mark.parametrize("name", PLAIN)
def test_a_plain_trace_says_what_to_record(name):
    t = trace(name)
    assert t.by_line().empty and t.by_line().attrs["note"] == NO_LINES
    assert "with_modules=True" in NO_MODULES and "with_stack=True" in NO_LINES
    # forward and backward are still told apart: the sequence numbers are always recorded
    items = attribution(t).items
    assert 0 < int(items.loc[items["backward"], "dur"].sum()) < gpu_total(t)


def test_launch_bound_modules_are_flagged_with_their_numbers():
    gpt = trace("gpt_modules").by_module().set_index("instance")
    cnn = trace("cnn_modules").by_module().set_index("instance")
    for rows in (gpt, cnn):
        named = rows[rows.index != ""]
        assert (named["fwd_busy_ns"] <= named["fwd_span_ns"]).all()
        # one stream: the kernels of a forward never overlap, so busy is their time
        assert (named["fwd_busy_ns"] == named["fwd_ns"]).all()
        bound = (named["fwd_busy_ns"] < 0.5 * named["fwd_span_ns"]) & (
            named["fwd_span_ns"] >= 20_000
        )
        assert (named["launch_bound"] == bound).all()
        assert named.loc[named["launch_bound"], "why"].str.startswith("launch-bound").all()
    # the profiled GPT step idles the GPU (81% of its span): its blocks wait on the host; the
    # ResNet's convolutions keep it busy
    assert all(gpt.loc[f"GPT_0.Block_{i}", "launch_bound"] for i in range(3))
    assert not cnn.loc["Sequential_0.Residual_0.Conv2d_1", "launch_bound"]
