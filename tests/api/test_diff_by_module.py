"""``gpumagic.diff`` by module: two runs' module rows side by side, from live captures (CPU, through
IPython) and from loaded traces; the summaries that history saves keep them."""

from __future__ import annotations

import pytest
from IPython.utils.capture import capture_output

import gpumagic
from gpumagic import load_trace
from gpumagic.analysis.profile_summary import ProfileSummary, summarize

from ..helpers import ROOT

torch = pytest.importorskip("torch")
DATA = ROOT / "tests" / "data" / "attribution"


def top_total(rows) -> int:
    return int(rows.loc[rows["depth"] == 0, "total_ns"].sum())


def test_a_bigger_batch_costs_more_in_every_layer(ip):
    from torch import nn

    torch.manual_seed(0)
    ip.user_ns["model"] = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))
    reps = []
    for batch in (8, 1024):
        ip.user_ns["x"] = torch.randn(batch, 256)
        with capture_output():
            ip.run_cell_magic(
                "gpuprofile", "-w 1 -o rep --no-timeline", "model(x).sum().backward()"
            )
        reps.append(ip.user_ns["rep"])
    a, b = reps
    d = gpumagic.diff(a, b, name_a="batch 8", name_b="batch 1024")
    mods = d.by_module().set_index("module")
    assert {"model", "0", "1", "2"} <= set(mods.index)
    for layer in ("0", "2"):  # each Linear's forward and backward grow with the batch
        r = mods.loc[layer]
        assert r["fwd_ns_b"] > r["fwd_ns_a"] > 0 and r["bwd_ns_b"] > r["bwd_ns_a"] > 0
        assert r["delta_ns"] == r["fwd_ns_b"] + r["bwd_ns_b"] - r["fwd_ns_a"] - r["bwd_ns_a"]
    top = mods[mods["depth"] == 0]
    assert int(top["delta_ns"].sum()) == top_total(b.by_module()) - top_total(a.by_module())
    assert "GPU time by module, forward and backward" in d._repr_html_()
    text = str(d)
    assert "A fwd+bwd" in text and any(line.endswith("  0") for line in text.splitlines())


def test_the_saved_summary_keeps_the_modules():
    trace = load_trace(DATA / "gpt_modules.json.gz")
    saved = ProfileSummary.from_dict(summarize(trace).to_dict())
    rows = trace.by_module()
    assert saved.modules["module"].tolist() == rows["module"].tolist()
    assert saved.modules["bwd_ns"].sum() == rows["bwd_ns"].sum()
    d = gpumagic.diff(saved, trace)
    assert (d.by_module()["delta_ns"] == 0).all() and len(d.by_module()) == len(rows)


def test_a_run_without_module_information_gives_no_module_diff():
    d = gpumagic.diff(
        load_trace(DATA / "gpt_modules.json.gz"), load_trace(DATA / "gpt_plain.json.gz")
    )
    assert d.by_module().empty and "A fwd+bwd" not in str(d)
    old = summarize(load_trace(DATA / "cnn_modules.json.gz")).to_dict()
    del old["modules"]  # a summary saved before the module rows existed
    assert ProfileSummary.from_dict(old).modules.empty
