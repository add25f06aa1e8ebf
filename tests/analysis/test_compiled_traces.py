"""Compiled code and CUDA graphs read from real GPU captures (tests/data/compiled, made on an H200
with ``tests/data/capture/compiled_code.py``): what each Inductor kernel fused, graph replays'
kernels, and advice that knows what the cell already uses."""

from __future__ import annotations

import gzip
import sys
import types

import pytest

from gpumagic.analysis import findings
from gpumagic.analysis.launch_remedies import compiled_regions, graph_kernels, launch_remedies
from gpumagic.capture.chrome.reader import load_trace
from gpumagic.capture.torch.inductor_kernels import (
    fused_descriptions,
    fused_from_loaded_code,
    parse_output_code,
)
from gpumagic.render.report import ProfileReport

from ..helpers import DATA

COMPILED = DATA / "compiled"


@pytest.fixture(scope="module")
def output_code() -> str:
    with gzip.open(COMPILED / "inductor_output_code.py.txt.gz", "rt") as f:
        return f.read()


def test_each_triton_kernel_is_read_with_the_ops_and_nodes_it_fused(output_code):
    fused = parse_output_code(output_code)
    chain = fused["triton_poi_fused_add_gelu_mul_0"]
    assert chain.aten == ("aten.gelu", "aten.mul", "aten.add")
    assert chain.nodes == ("gelu", "mul", "add")
    backward = fused["triton_red_fused_gelu_gelu_backward_sum_1"]
    assert backward.aten == ("aten.gelu", "aten.gelu_backward", "aten.sum")
    assert len(backward.nodes) == 10
    # every kernel the code defines, and only those: the comments above the calls in call() are not
    # definitions
    defined = {
        line.split(" = ")[0]
        for line in output_code.splitlines()
        if " = async_compile.triton(" in line
    }
    assert set(fused) == defined


def test_kernels_are_read_from_the_output_code_the_process_loaded(
    output_code, tmp_path, monkeypatch
):
    path = tmp_path / "cabc.py"
    path.write_text(output_code)
    module = types.ModuleType("cabc")
    module.__file__ = str(path)
    module.triton_poi_fused_add_gelu_mul_0 = object()
    other = types.ModuleType(
        "cother"
    )  # a loaded module that defines none of the kernels asked for: not opened
    other.__file__ = str(tmp_path / "missing.py")
    cache = types.SimpleNamespace(PyCodeCache=types.SimpleNamespace(modules=[other, module]))
    monkeypatch.setitem(sys.modules, "torch._inductor.codecache", cache)
    found = fused_from_loaded_code(["triton_poi_fused_add_gelu_mul_0", "nvjet_sm90_tst_48x64"])
    assert list(found) == ["triton_poi_fused_add_gelu_mul_0"]
    assert fused_descriptions(found) == {
        "triton_poi_fused_add_gelu_mul_0": "fuses aten.gelu, aten.mul, aten.add; graph nodes "
        "gelu, mul, add"
    }


def test_nothing_is_read_where_inductor_never_loaded(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch._inductor.codecache", raising=False)
    assert fused_from_loaded_code(["triton_poi_fused_add_gelu_mul_0"]) == {}


def test_the_kernel_table_shows_what_each_compiled_kernel_fused(output_code):
    trace = load_trace(COMPILED / "torch_compiled_block.json.gz")
    names = set(trace.kernels["name"])
    assert {"triton_poi_fused_gelu_0", "triton_poi_fused_add_gelu_mul_0"} <= names
    assert compiled_regions(trace) == 2
    fused = parse_output_code(output_code)
    trace.meta["fused"] = fused_descriptions({n: f for n, f in fused.items() if n in names})
    html = ProfileReport(trace)._repr_html_()
    assert "fuses aten.gelu, aten.mul, aten.add; graph nodes gelu, mul, add" in html


def test_graph_replays_kernels_are_listed_and_kept_with_their_launch():
    trace = load_trace(COMPILED / "torch_cuda_graph.json.gz")
    replay = graph_kernels(trace)
    launches = trace.api[trace.api["name"].str.startswith("cudaGraphLaunch")]
    assert set(replay.dropna()) == set(launches["correlation"])
    assert int(replay.notna().sum()) == 8  # 3 kernels of the captured graph, 5 of reduce-overhead's
    assert replay.dropna().value_counts().sort_values().tolist() == [3, 5]
    unused, already = launch_remedies(trace)
    assert unused == [] and "8 of 9 kernels already ran in 2 CUDA graph replays" in already


def test_advice_to_use_graphs_and_compile_is_not_given_to_a_cell_that_does():
    report = ProfileReport(load_trace(COMPILED / "torch_cuda_graph.json.gz"))
    text = " ".join(f.message for f in report.findings)
    assert "Overhead-bound" in text
    assert "CUDA graphs or torch.compile help" not in text
    assert "already ran in 1 CUDA graph replay" in text and "torch.compile'd region ran" in text
    plain = ProfileReport(load_trace(DATA / "torch_block.json.gz"))
    assert all("already ran in" not in f.message for f in findings(plain.trace))
