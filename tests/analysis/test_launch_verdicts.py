"""A launch-bound verdict needs GPU idle that the launches can explain (``analysis/pace.py``):
tiny kernels on a busy GPU are not launch-bound; tiny kernels beside idle that host
synchronizations or compilation make name that pacer; graph-replayed kernels are said, not left
silently out of the count."""

from __future__ import annotations

from gpumagic.analysis import findings
from gpumagic.trace import Trace, frame


def _trace(*, gap: int, launch: int, n: int = 40, syncs: int = 0, compile_ns: int = 0, graph=0):
    """``n`` kernels of 3 µs, ``gap`` ns apart, each launched by a call of ``launch`` ns; ``syncs``
    cudaStreamSynchronize calls that fill the gaps; an NVTX compilation range of ``compile_ns``;
    ``graph`` more 3 µs kernels run by one cudaGraphLaunch."""
    kernels, api = [], []
    for i in range(n):
        start = 100_000 + i * (3_000 + gap)
        kernels.append(
            {"name": "tiny", "start": start, "end": start + 3_000, "device": 0, "stream": 7}
            | {"correlation": i}
        )
        api.append(
            {"name": "cudaLaunchKernel", "start": start - launch - 500, "end": start - 500}
            | {"thread": 1, "correlation": i}
        )
    end = kernels[-1]["end"]
    for j in range(syncs):
        a = 100_000 + j * (end - 100_000) // syncs
        api.append(
            {"name": "cudaStreamSynchronize", "start": a, "end": a + (end - 100_000) // syncs - 10}
            | {"thread": 1, "correlation": 10_000 + j}
        )
    if graph:
        api.append(
            {"name": "cudaGraphLaunch", "start": end + 100, "end": end + 2_000, "thread": 1}
            | {"correlation": 20_000}
        )
        for g in range(graph):
            s = end + 3_000 + g * 3_000
            kernels.append(
                {"name": "replayed", "start": s, "end": s + 3_000, "device": 0, "stream": 7}
                | {"correlation": 20_000}
            )
    nvtx = []
    if compile_ns:
        nvtx.append(
            {"text": "nvFuser fusion_compile", "start": 100_000, "end": 100_000 + compile_ns}
            | {"thread": 1, "depth": 0, "domain": "", "style": "PushPop"}
        )
    meta = {"device": "NVIDIA H200", "recorded": ["kernels", "api", "nvtx", "memops"]}
    return Trace(
        kernels=frame("kernels", kernels),
        api=frame("api", api),
        nvtx=frame("nvtx", nvtx),
        meta=meta,
    )


def _tiny(trace):
    return next(f for f in findings(trace) if f.kind == "tiny_kernels")


def test_tiny_kernels_on_a_busy_gpu_are_not_launch_bound():
    f = _tiny(_trace(gap=100, launch=2_000))  # 3 µs kernels, 0.1 µs apart: ~97% busy
    assert "Launch-bound" not in f.message and f.severity == "info"
    assert "but the GPU was busy 95%" in f.message and "do not pace it" in f.message


def test_tiny_kernels_whose_launches_fill_the_idle_are_launch_bound():
    f = _tiny(_trace(gap=20_000, launch=15_000))  # each gap mostly its next launch
    assert f.severity == "warn" and "Launch-bound:" in f.message
    assert "issuing them took" in f.message


def test_idle_made_by_host_synchronizations_names_them_not_the_launches():
    f = _tiny(_trace(gap=20_000, launch=2_000, syncs=40))
    assert "Launch-bound" not in f.message
    assert "they do not explain it; the host's synchronizations (40 calls" in f.message


def test_idle_made_by_compilation_names_it():
    f = _tiny(_trace(gap=20_000, launch=2_000, compile_ns=800_000))
    assert "compilation (" in f.message and "'nvFuser fusion_compile'" in f.message


def test_graph_replayed_kernels_are_said_not_silently_left_out():
    f = _tiny(_trace(gap=20_000, launch=15_000, graph=12))
    assert f.message.startswith(
        "40 of the 40 kernels launched one by one (12 more ran in CUDA graph"
    )


def test_a_host_wait_is_clipped_to_the_window_and_waits_at_once_count_once():
    # kernels over [100 µs, 300 µs]; the host waits from 150 µs on two threads at once, one wait
    # running 1 ms past the window: inside it that is 150 µs, not 2 × 1.15 ms
    kernels = [
        {"name": "k", "start": 100_000 + 20_000 * i, "end": 110_000 + 20_000 * i, "device": 0}
        | {"stream": 7, "correlation": i}
        for i in range(11)
    ]
    api = [
        {"name": "cudaLaunchKernel", "start": 90_000 + 20_000 * i, "end": 91_000 + 20_000 * i}
        | {"thread": 1, "correlation": i}
        for i in range(11)
    ]
    api += [
        {"name": "cudaStreamSynchronize", "start": 150_000, "end": 1_300_000, "thread": th}
        | {"correlation": 100 + th}
        for th in (1, 2)
    ]
    meta = {"device": "NVIDIA H200", "recorded": ["kernels", "api", "memops"]}
    trace = Trace(kernels=frame("kernels", kernels), api=frame("api", api), meta=meta)
    f = next(x for x in findings(trace) if x.kind == "host_sync")
    assert f.numbers["share_of_window"] <= 1.0
    end = trace.analysis_window()[1]
    assert f.numbers["ns"] == min(end, 1_300_000) - 150_000
