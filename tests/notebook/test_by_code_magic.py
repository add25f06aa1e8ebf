"""``%%gpuprofile``'s by-code view through a real IPython shell on the CPU. With no GPU, the view
attributes the CPU time of the torch ops (the outermost op of each piece of work) as it would the
kernels: every line of the cell that ran is a row, the rows make the total exactly, and the
backward goes to the line and the module whose forward caused it."""

from __future__ import annotations

import pytest
from IPython.utils.capture import capture_output

from gpumagic.trace.by_code import attribution
from gpumagic.trace.code_rows import NO_MODULE_RAN

torch = pytest.importorskip("torch")

TRAINING = """\
opt.zero_grad()
y = model(x)
loss = y.square().mean()
loss.backward()
opt.step()
loss.item()"""


@pytest.fixture
def model_ns(ip):
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(32, 128), nn.GELU(), nn.Sequential(nn.Linear(128, 32), nn.LayerNorm(32))
    )
    ip.user_ns.update(
        model=model, opt=torch.optim.SGD(model.parameters(), lr=0.1), x=torch.randn(16, 32)
    )
    return ip


def profile(ip, cell: str, flags: str = "-w 1"):
    with capture_output() as cap:
        value = ip.run_cell_magic("gpuprofile", f"{flags} -o rep --no-timeline", cell)
    return ip.user_ns["rep"], cap, value


def cpu_total(trace) -> int:
    """The independent total: the outermost torch ops' CPU time, each thread's."""
    ops = trace.ops
    return int((ops.loc[ops["depth"] == 0, "end"] - ops.loc[ops["depth"] == 0, "start"]).sum())


def test_every_line_of_a_training_cell_is_a_row_and_the_rows_make_the_total(model_ns):
    before = set(model_ns.user_ns)
    rep, cap, value = profile(model_ns, TRAINING)
    assert value == pytest.approx(model_ns.user_ns["loss"].item())  # the cell's value kept
    # nothing of the marking lands in the namespace: only the cell's own names and -o's
    assert set(model_ns.user_ns) - before == {"y", "loss", "rep"}
    lines = rep.by_line()
    body = lines[lines["line"].notna()]
    assert body["line"].tolist() == [1, 2, 3, 4, 5, 6]
    assert body["source"].tolist() == TRAINING.splitlines()
    total = cpu_total(rep.trace)
    assert total > 0 and attribution(rep.trace).total_ns == total
    assert int(lines["total_ns"].sum()) == total == int(lines["launched_ns"].sum())
    by = lines.set_index("source")
    # backward: launched by loss.backward(), put on the forward line that caused it
    assert by.loc["loss.backward()", "launched_bwd_ns"] > 0 == by.loc["loss.backward()", "bwd_ns"]
    assert by.loc["y = model(x)", "bwd_ns"] > 0 and by.loc["loss = y.square().mean()", "bwd_ns"] > 0
    text = cap.outputs[0].data["text/plain"]
    assert "By line, its forward work and that work's backward" in text
    assert "y = model(x)" in text and "loss.backward()" in text


def test_modules_are_named_as_the_code_names_them_with_their_backward(model_ns):
    rep, cap, _ = profile(model_ns, TRAINING)
    mods = rep.by_module()
    named = mods[mods["instance"] != ""]
    want = {n for n, _ in model_ns.user_ns["model"].named_modules() if n}
    assert set(named.loc[named["depth"] > 0, "module"]) == want
    assert named.loc[named["depth"] == 0, "module"].tolist() == ["model"]
    top = mods[mods["depth"] == 0]
    assert int(top["total_ns"].sum()) == cpu_total(rep.trace)
    root = named[named["depth"] == 0].iloc[0]
    outside = mods[mods["instance"] == ""].iloc[0]
    assert root["bwd_ns"] > outside["bwd_ns"]  # the model's backward is the model's
    for name in ("0", "2.0", "2.1"):  # each layer's forward and backward
        row = mods[mods["module"] == name].iloc[0]
        assert row["fwd_ns"] > 0 and row["bwd_ns"] > 0, name
    html = cap.outputs[0].data["text/html"]
    assert "By module: forward and backward" in html and "2.1" in html


def test_a_cell_without_a_model_says_so_and_is_still_told_by_line(ip):
    ip.user_ns["a"] = torch.randn(64, 64)
    rep, cap, _ = profile(ip, "b = a @ a\nc = b.relu()\nfor _ in range(3):\n    c = c + 1")
    assert rep.by_module().empty and rep.by_module().attrs["note"] == NO_MODULE_RAN
    lines = rep.by_line()
    body = lines[lines["line"].notna()]
    assert body["line"].tolist() == [1, 2, 3, 4]  # the loop's body line is its own row
    assert body.set_index("line").loc[4, "total_ns"] > 0
    assert int(lines["total_ns"].sum()) == cpu_total(rep.trace)
    assert NO_MODULE_RAN in cap.outputs[0].data["text/plain"]


def test_the_line_ranges_stay_out_of_the_range_table(model_ns):
    rep, _, _ = profile(model_ns, TRAINING, "-w 0 --label step")
    assert not rep.trace.nvtx["text"].str.startswith("gpumagic").any()
    assert not rep.trace.ops["name"].str.startswith("gpumagic").any()  # nor in the op table
    assert "step" in set(rep.trace.nvtx["text"])
    assert len(rep.trace.meta["code"]["lines"]["text"]) == 6
    # one range per module forward: the six modules of the model, once each
    assert len(rep.trace.meta["code"]["modules"]["text"]) == 6
    # the ops' nesting is theirs again: the model's Linear is an outermost op, as without ranges
    ops = rep.trace.ops
    assert (ops["depth"] >= 0).all()
    assert "aten::linear" in set(ops.loc[ops["depth"] == 0, "name"])


def test_a_compiled_model_is_one_module_its_backward_included(model_ns):
    from torch._dynamo.utils import counters

    cmodel = torch.compile(model_ns.user_ns["model"], backend="aot_eager")
    model_ns.user_ns["cmodel"] = cmodel
    cmodel(model_ns.user_ns["x"]).sum().backward()  # compiled here, before the capture
    graphs = counters["stats"]["unique_graphs"]
    cell = "y = cmodel(x)\nloss = y.square().mean()\nloss.backward()"
    rep, _, _ = profile(model_ns, cell, "-w 2")
    # no hook reached the compiled graph: nothing was compiled again
    assert counters["stats"]["unique_graphs"] == graphs
    assert not any(m._forward_pre_hooks for m in model_ns.user_ns["model"].modules())
    mods = rep.by_module()
    top = mods[mods["depth"] == 0]
    assert int(top["total_ns"].sum()) == cpu_total(rep.trace)
    compiled = mods[mods["module"] == "cmodel"]
    assert len(compiled) == 1
    assert compiled.iloc[0]["fwd_ns"] > 0 and compiled.iloc[0]["bwd_ns"] > 0
    lines = rep.by_line().set_index("source")
    assert lines.loc["y = cmodel(x)", "bwd_ns"] > 0


def test_a_trace_written_with_trace_reads_back_with_its_modules_lines_and_backward(
    model_ns, tmp_path
):
    from gpumagic import load_trace

    path = tmp_path / "step.json"
    rep, _, _ = profile(model_ns, TRAINING, f"-w 1 --trace {path}")
    back = load_trace(path)
    for view in ("by_module", "by_line"):
        mine, theirs = getattr(rep, view)(), getattr(back, view)()
        key = "module" if view == "by_module" else "line"
        cols = [key, "fwd_ns", "bwd_ns"]
        assert mine[cols].equals(theirs[cols]), view
    import json

    assert "code" not in json.loads(path.read_text())["metadata"]  # its lists are events instead


def test_lines_are_shown_as_written_not_as_ipython_transforms_them(model_ns):
    cell = "y = model(x)\n%time z = model(x)\nw = y + 1"
    rep, _, _ = profile(model_ns, cell, flags="-w 0 -n 1")
    lines = rep.by_line()
    assert lines.loc[lines["line"].notna(), "source"].tolist() == cell.splitlines()


NESTED = """\
opt.zero_grad()
for micro in range(2):
    with torch.autocast("cpu", enabled=False):
        if micro >= 0:
            y = model(x)
            loss = y.square().mean() / 2
        loss.backward()
opt.step()"""


def test_work_inside_for_with_and_if_lands_on_its_innermost_line_and_the_tree_sums(model_ns):
    model_ns.user_ns["torch"] = torch
    rep, cap, _ = profile(model_ns, NESTED)
    lines = rep.by_line().set_index("source")
    model_line, loop = lines.loc["y = model(x)"], lines.loc["for micro in range(2):"]
    # the model's forward and its backward are on the line that ran it, four levels down
    assert model_line["fwd_ns"] > 0 and model_line["bwd_ns"] > 0 and model_line["depth"] == 3
    assert (
        lines.loc['with torch.autocast("cpu", enabled=False):', "total_ns"] < model_line["total_ns"]
    )
    assert lines.loc["if micro >= 0:", "parent"] == 3 and model_line["parent"] == 4
    # every level sums: a line's incl_ns is its own work and its body's
    body = lines[lines.index != "(outside the cell's lines)"].reset_index()
    for _, row in body.iterrows():
        kids = body[body["parent"] == row["line"]]
        assert row["incl_ns"] == row["total_ns"] + int(kids["incl_ns"].sum()), row["source"]
    top = body[body["depth"] == 0]
    outside = lines.loc["(outside the cell's lines)", "total_ns"]
    assert int(top["incl_ns"].sum()) + outside == cpu_total(rep.trace)
    assert loop["incl_ns"] > 0.5 * cpu_total(rep.trace)
    text = cap.outputs[0].data["text/plain"]
    assert "        y = model(x)" in text and "[with its body:" in text


EARLIER_CELL = """
def loss_of(x):
    y = model(x)
    return y.square().mean()

def train_step(x):
    for micro in range(2):
        loss = loss_of(x) / 2
        loss.backward()
"""


def test_a_function_of_an_earlier_cell_shows_under_its_calling_line_with_its_lines(
    model_ns, tmp_path
):
    ip = model_ns
    ip.run_cell(EARLIER_CELL, store_history=True)
    try:
        rep, cap, _ = profile(ip, "opt.zero_grad()\ntrain_step(x)\nz = loss_of(x)\nopt.step()")
        lines = rep.by_line()
        body = lines[lines["key"].notna()]
        calls = body[body["source"].str.startswith("loss_of()")]
        assert len(calls) == 2  # one under each place it was called from
        under_step = body[
            body["parent"] == int(body.loc[body["source"] == "train_step(x)", "key"].iloc[0])
        ]
        assert under_step["source"].str.startswith("train_step()").all() and len(under_step) == 1
        model_lines = body[body["source"] == "y = model(x)"]
        assert len(model_lines) == 2 and (model_lines["fwd_ns"] > 0).all()
        assert (model_lines["bwd_ns"] > 0).sum() == 1  # only the step's calls ran a backward
        # the function's lines carry their own numbers (loss_of's first line, then y = ...)
        assert set(model_lines["line"]) == {ip.user_ns["loss_of"].__code__.co_firstlineno + 1}
        assert (model_lines["depth"] > calls["depth"].min()).all()
        # every level sums: a row's incl_ns is its own work and its children's
        for _, r in body.iterrows():
            kids = body[body["parent"] == r["key"]]
            assert r["incl_ns"] == r["total_ns"] + int(kids["incl_ns"].sum()), r["source"]
        outside = int(lines.loc[lines["key"].isna(), "total_ns"].sum())
        assert int(body.loc[body["depth"] == 0, "incl_ns"].sum()) + outside == cpu_total(rep.trace)
        assert "In [" in calls["source"].iloc[0]  # where the function was defined
        text = cap.outputs[0].data["text/plain"]
        assert "    train_step()  [In [" in text
        # the functions are the same objects, their own code again
        assert "gpumagic" not in ip.user_ns["train_step"].__code__.co_consts.__repr__()
        # a written trace reads back with the same rows, their text included
        from gpumagic import load_trace

        path = tmp_path / "step.json"
        rep, _, _ = profile(ip, "opt.zero_grad()\ntrain_step(x)", f"-w 1 --trace {path}")
        cols = ["line", "source", "depth", "key", "parent", "kernels"]
        assert load_trace(path).by_line()[cols].equals(rep.by_line()[cols])
    finally:
        for name in ("loss_of", "train_step", "z", "loss"):
            ip.user_ns.pop(name, None)
