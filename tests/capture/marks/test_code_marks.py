"""The by-code view under Nsight Systems (``capture/marks/code_marks.py``): the cell's line ranges,
its models' forward ranges and ``emit_nvtx``'s op ranges read back from an nsys NVTX table give the
same modules, lines and backward the in-process path gives; the op ranges leave the range table; the
ranges are NVTX only inside ``nvtx_ranges``."""

from __future__ import annotations

import pytest

from gpumagic.capture.marks import cell_lines
from gpumagic.capture.marks.code_marks import code_from_nvtx
from gpumagic.trace import Trace, frame

MAIN, ENGINE_THREAD = 11, 12
CELL = "y = net(x)\ny.sum().backward()"


def _range(text, start, end, thread=MAIN, depth=0):
    return {"text": text, "start": start, "end": end, "thread": thread, "depth": depth}


def _trace() -> Trace:
    """One forward of a two-layer model on line 1 (each layer's GEMM), then its backward on line
    2, run by the engine on its own thread (each layer's backward GEMM), and a user range."""
    nvtx = [
        _range("cell:1", 0, 10_000),
        _range("my range", 50, 9_000, depth=1),
        _range("gpumagic line 1", 100, 2_000, depth=2),
        _range("gpumagic module Net_0 net", 110, 1_900, depth=3),
        _range("gpumagic module Linear_0 fc1", 120, 900, depth=4),
        _range("aten::linear, seq = 7, op_id = 1", 130, 880, depth=5),
        _range("aten::addmm, seq = 7, op_id = 2", 140, 870, depth=6),
        _range("gpumagic module Linear_1 fc2", 1_000, 1_800, depth=4),
        _range("aten::linear, seq = 8, op_id = 3", 1_010, 1_790, depth=5),
        _range("gpumagic line 2", 2_100, 8_000, depth=2),
        _range("aten::empty, op_id = 4", 2_150, 2_160, depth=3),
        _range(
            "autograd::engine::evaluate_function: AddmmBackward0, seq = 8, op_id = 5",
            3_000,
            4_000,
            ENGINE_THREAD,
        ),
        _range("aten::mm, seq = 0, op_id = 6", 3_100, 3_900, ENGINE_THREAD, depth=1),
        _range(
            "autograd::engine::evaluate_function: AddmmBackward0, seq = 7, op_id = 7",
            5_000,
            6_000,
            ENGINE_THREAD,
        ),
    ]
    launches = [(200, MAIN), (1_100, MAIN), (3_200, ENGINE_THREAD), (5_100, ENGINE_THREAD)]
    api = [
        {"name": "cudaLaunchKernel", "start": t, "end": t + 20, "thread": th, "correlation": i}
        for i, (t, th) in enumerate(launches)
    ]
    kernels = [
        {"name": f"gemm{i}", "start": 7_000 + 400 * i, "end": 7_300 + 400 * i, "device": 0}
        | {"stream": 7, "correlation": i}
        for i in range(4)
    ]
    meta = {"backend": "nsys", "recorded": ["kernels", "api", "nvtx"]}
    return Trace(
        kernels=frame("kernels", kernels),
        api=frame("api", api),
        nvtx=frame("nvtx", nvtx),
        meta=meta,
    )


def test_an_nsys_traces_ranges_give_modules_lines_and_backward_as_in_process():
    trace = _trace()
    code_from_nvtx(trace, CELL)
    mods = trace.by_module().set_index("module")
    # each layer holds its forward GEMM and, through the sequence numbers, its backward GEMM
    assert mods.loc["fc1", "fwd_ns"] == 300 and mods.loc["fc1", "bwd_ns"] == 300
    assert mods.loc["fc2", "fwd_ns"] == 300 and mods.loc["fc2", "bwd_ns"] == 300
    assert mods.loc["net", "total_ns"] == 1_200
    lines = trace.by_line().set_index("line")
    # backward work goes to the line whose forward made it, and is launched by line 2
    assert lines.loc[1, "fwd_ns"] == 600 and lines.loc[1, "bwd_ns"] == 600
    assert lines.loc[2, "launched_ns"] == 600 and lines.loc[1, "source"] == "y = net(x)"
    # the op ranges and the view's ranges left the range table; the user's range stayed, at its
    # depth under the cell's range
    assert list(trace.nvtx["text"]) == ["cell:1", "my range"]
    assert list(trace.nvtx["depth"]) == [0, 1]
    auto = trace.meta["code"]["autograd"]
    assert sorted(zip(auto["seq"], auto["fwd_thread"])) == [(7, 0), (7, 0), (7, 1), (8, 0), (8, 1)]


def test_a_loaded_export_without_gpumagics_ranges_is_left_as_it_was():
    trace = _trace()
    trace.nvtx = trace.nvtx[~trace.nvtx["text"].str.startswith(("gpumagic", "aten", "autograd"))]
    before = trace.nvtx.copy()
    code_from_nvtx(trace, None, marked=False)
    assert trace.nvtx.equals(before) and "with_modules" not in trace.meta


def test_ranges_are_nvtx_only_inside_nvtx_ranges(monkeypatch):
    pushed = []
    monkeypatch.setattr(
        "gpumagic.capture.marks.nvtx_calls.push_pop",
        lambda: (pushed.append, lambda: pushed.append("pop")),
    )
    with cell_lines.nvtx_ranges(), cell_lines.fast_range("gpumagic line 3"):
        pass
    assert pushed == ["gpumagic line 3", "pop"]
    with pytest.raises(ValueError), cell_lines.nvtx_ranges():
        raise ValueError
    assert not cell_lines._NVTX  # left as it was, whatever happened
    assert not isinstance(cell_lines.fast_range("x"), cell_lines._NvtxRange)


def test_a_real_nsys_capture_of_a_notebook_training_step_reads_back_by_module_and_line(
    committed_nsys,
):
    """``tests/data/nsys/nsys_code.sqlite.gz``: ``%%gpuprofile --nsys`` of a two-block model's
    step on an H200 (two micro-steps, fused AdamW; ``tests/gpu/test_nsys_code_gpu.py``'s cell),
    its export as the warm child wrote it."""
    from gpumagic.capture.nsys.backend import load_nsys

    trace = load_nsys(committed_nsys("nsys_code"))
    mods = trace.by_module(memops=False).set_index("module")
    total = int((trace.kernels["end"] - trace.kernels["start"]).sum())
    assert (
        int(mods.loc["net", "total_ns"] + mods.loc["(outside every module)", "total_ns"]) == total
    )
    for leaf in ("blocks.0.up", "blocks.0.down", "blocks.1.up", "blocks.1.down", "head"):
        assert mods.loc[leaf, "fwd_ns"] > 0 and mods.loc[leaf, "bwd_ns"] > 0, leaf
    # a GEMM layer's backward is two GEMMs per micro-step to its forward's one: about twice
    up = mods.loc["blocks.0.up"]
    assert 1.7 < up["bwd_ns"] / up["fwd_ns"] < 2.3
    # the optimizer's kernels and the loss's are outside every module, and few
    assert mods.loc["(outside every module)", "share"] < 0.05
    lines = trace.by_line(memops=False).set_index("line")
    assert lines.loc[3, "bwd_ns"] > lines.loc[3, "fwd_ns"] > 0  # the forward line holds backward
    assert lines.loc[4, "launched_ns"] > lines.loc[4, "fwd_ns"]  # loss.backward() launched it
    assert not trace.nvtx["text"].astype(str).str.contains("op_id = ").any()
