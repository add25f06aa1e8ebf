"""A CUDA graph replay's kernels go to the module and line that captured their nodes where the
capture is in the trace (trace/graph_nodes), and are said to be unknown where it is not."""

from __future__ import annotations

from gpumagic.trace import Trace, frame

CELL = (
    "g2 = torch.cuda.CUDAGraph()\nwith torch.cuda.graph(g2):\n    y2 = model(x)\n"
    "g2.replay()\ng2.replay()"
)
NAMES = ("gemm_up", "gelu", "gemm_down")


def _ranges(rows):
    return {
        "text": [r[0] for r in rows],
        "start": [r[1] for r in rows],
        "end": [r[2] for r in rows],
        "thread": [1] * len(rows),
    }


def graph_trace(streams=(7, 7, 7), captured=True) -> Trace:
    """A cell that captures an MLP's forward (three launches inside its modules' ranges) and
    replays the graph twice; ``captured=False``: the capture left out (an earlier cell's)."""
    lines = [
        ("gpumagic line 1", 0, 4),
        ("gpumagic line 4", 200, 300),
        ("gpumagic line 5", 300, 400),
    ]
    modules = []
    api = []
    if captured:
        lines += [("gpumagic line 2", 5, 100), ("gpumagic line 3", 10, 90)]
        modules = [
            ("gpumagic module MLP_1 model", 12, 88),
            ("gpumagic module Linear_1 model.up", 15, 30),
            ("gpumagic module GELU_1 model.act", 35, 45),
            ("gpumagic module Linear_2 model.down", 50, 70),
        ]
        api += [
            dict(name="cudaStreamBeginCapture_v10000", start=6, end=7, thread=1, correlation=1),
            dict(name="cudaLaunchKernelExC", start=20, end=21, thread=1, correlation=2),
            dict(name="cudaLaunchKernel", start=40, end=41, thread=1, correlation=3),
            dict(name="cudaLaunchKernelExC", start=60, end=61, thread=1, correlation=4),
            dict(name="cudaStreamEndCapture_v10000", start=95, end=96, thread=1, correlation=5),
        ]
    api += [
        dict(name="cudaGraphLaunch", start=210, end=215, thread=1, correlation=10),
        dict(name="cudaGraphLaunch", start=310, end=315, thread=1, correlation=11),
    ]
    kernels = []
    for r, corr in enumerate((10, 11)):
        for i, name in enumerate(NAMES):
            start = 1000 + 100 * r + 20 * i
            kernels.append(
                dict(
                    name=name,
                    start=start,
                    end=start + 15,
                    device=0,
                    stream=streams[i],
                    correlation=corr,
                )
            )
    t = Trace(kernels=frame("kernels", kernels), api=frame("api", api))
    t.meta.update(
        cell_source=CELL,
        with_modules=True,
        code={"lines": _ranges(lines), "modules": _ranges(modules)},
    )
    return t


def test_replayed_kernels_go_to_the_modules_and_line_that_captured_their_nodes():
    t = graph_trace()
    mods = t.by_module().set_index("module")
    for module, name in (
        ("model.up", "gemm_up"),
        ("model.act", "gelu"),
        ("model.down", "gemm_down"),
    ):
        assert mods.loc[module, "kernels"] == 2, (module, name)  # one per replay
        assert mods.loc[module, "fwd_ns"] == 30
    lines = t.by_line().set_index("line")
    assert lines.loc[3, "kernels"] == 6 and lines.loc[3, "total_ns"] == 90
    # the replay lines launched them: what they caused is the capture's line's
    assert lines.loc[4, "total_ns"] == 0 and lines.loc[4, "launched_ns"] == 45
    assert lines.loc[5, "launched_ns"] == 45
    assert "graphs" not in lines.attrs  # all traced back: nothing to say


def test_a_replay_whose_capture_is_not_in_the_trace_stays_on_its_line_and_says_so():
    t = graph_trace(captured=False)
    lines = t.by_line().set_index("line")
    assert lines.loc[4, "total_ns"] == 45 and lines.loc[5, "total_ns"] == 45
    note = lines.attrs["graphs"]
    assert note.startswith("6 of 6 kernels ran from CUDA graph replays whose capture is not")
    assert "captured before the trace began: 6" in note


def test_a_replay_on_several_streams_is_not_guessed():
    t = graph_trace(streams=(7, 8, 7))
    lines = t.by_line().set_index("line")
    assert lines.loc[3, "kernels"] == 0  # branches side by side: the order says nothing
    assert lines.loc[4, "total_ns"] == 45
    assert "several streams" in lines.attrs["graphs"]


def test_a_real_capture_in_the_cell_puts_each_replayed_kernel_on_its_module_and_line():
    """H200, torch 2.11: %%gpuprofile --trace of a cell that captures a notebook MLP's forward
    into a CUDA graph and replays it twice (tests/data/capture/graph_capture.py)."""
    from gpumagic import load_trace

    from ..helpers import DATA

    t = load_trace(DATA / "compiled" / "graph_in_cell.json.gz")
    replays = t.api[t.api["name"] == "cudaGraphLaunch"]["correlation"]
    replayed = t.kernels[t.kernels["correlation"].isin(replays)]
    assert len(replayed) == 6  # three kernels a replay
    mods = t.by_module(memops=False).set_index("module")  # each replay's memset: down's too
    assert [int(mods.loc[m, "kernels"]) for m in ("up", "act", "down")] == [2, 2, 2]
    lines = t.by_line().set_index("line")
    replay_ns = int((replayed["end"] - replayed["start"]).sum())
    assert int(lines.loc[3, "total_ns"]) >= replay_ns  # y2 = model(x): the nodes' own line
    assert int(lines.loc[4, "total_ns"]) == 0 < int(lines.loc[4, "launched_ns"])
    assert "graphs" not in lines.attrs
    elsewhere = load_trace(DATA / "compiled" / "graph_elsewhere.json.gz").by_line()
    assert "captured before the trace began: 3" in elsewhere.attrs["graphs"]
    assert int(elsewhere.loc[elsewhere["line"] == 1, "kernels"].iloc[0]) >= 3  # g.replay()
