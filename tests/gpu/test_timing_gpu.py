"""%gputime on a real GPU. Run on the GPU host: python3 -m pytest tests/gpu (skipped where CUDA is
absent)."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

import gpumagic  # noqa: E402
from gpumagic.gpu_activity import from_kineto  # noqa: E402
from gpumagic.gpu_activity.profiler_start import warm_profiler  # noqa: E402
from gpumagic.trace.intervals import union_length  # noqa: E402


@pytest.fixture(scope="module")
def ns():
    return {
        "A": torch.randn(4096, 4096, device="cuda"),
        "x": torch.randn(65536, device="cuda"),
        "torch": torch,
    }


def cupti_per_call(stmt: str, ns: dict, calls: int) -> float:
    code = compile(f"def _n(_k):\n    for _ in range(_k):\n        {stmt}\n", "<t>", "exec")
    local = dict(ns)
    exec(code, local)  # noqa: S102 - the statement compiled as %gputime compiles it
    local["_n"](3)
    warm_profiler(
        torch.device("cuda", torch.cuda.current_device())
    )  # the reference is torch.profiler's
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        local["_n"](calls)
        torch.cuda.synchronize()
    return union_length(from_kineto(prof).intervals()) * 1e-9 / calls


def test_matmul_median_matches_cupti_and_is_gpu_bound(ns):
    r = gpumagic.gputime("A @ A", globals=ns)
    truth = cupti_per_call("A @ A", ns, 50)
    assert r.backend == "cuda-events"
    assert r.device == torch.cuda.get_device_name()
    assert abs(r.median / truth - 1) < 0.03, (r.line(), truth)
    assert r.kernel_time is not None and abs(r.kernel_time / truth - 1) < 0.03
    assert r.gpu_busy > 0.95 and not r.launch_bound
    assert "GPU busy" in r.line() and f"on {r.device}" in r.line()


def test_tiny_op_is_reported_launch_bound(ns):
    # x + 1 on 65536 floats: one ~1 µs kernel per call, issued every ~16 µs (H100). The host pass
    # reads low against the sampled median (10 µs vs 16 µs seen), so the verdict asks for half the
    # per-call time, not 80 %.
    r = gpumagic.gputime("x + 1", globals=ns)
    evidence = (r.line(), r.gpu_busy, r.host_per_call, r.median)
    assert r.gpu_busy < 0.5, evidence
    assert r.host_per_call >= 0.5 * r.median, evidence
    assert r.launch_bound, evidence
    assert "launch-bound: kernels" in r.line()
    assert not any("between this statement's kernels" in w for w in r.warnings()), r.warnings()
    assert r.kernel_time < r.median
    assert r.kernels_per_call == pytest.approx(1.0)


def test_graph_mode_removes_launch_overhead(ns):
    eager = gpumagic.gputime("x + 1", globals=ns)
    graph = gpumagic.gputime("x + 1", globals=ns, graph=True)
    assert graph.backend == "cuda-graph"
    assert "CUDA graph replay" in graph.line()
    assert graph.median < eager.median


def test_graph_capture_failure_falls_back_with_a_note(ns):
    r = gpumagic.gputime("(x + 1).sum().item()", globals=ns, graph=True)
    assert r.backend == "cuda-events"
    assert any(
        "synchronizes with the host" in n and "timed without a graph" in n for n in r.notes
    ), r.notes
    # the device is still usable afterwards
    assert float((ns["x"] * 0).sum()) == 0.0


def test_flush_l2_reads_cold_cache_slower_than_hot():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    n = l2 // 4 // 4  # a working set well inside L2 (x and the output: half of it)
    g = {"x": torch.randn(n, device="cuda")}
    hot = gpumagic.gputime("x * 2", globals=g)
    cold = gpumagic.gputime("x * 2", globals=g, flush_l2=True)
    assert cold.calls_per_sample == 1 and cold.flush_l2
    assert "L2 flushed before each call" in cold.line()
    # cold: every call reads x from HBM; hot: x stays in L2. Both the per-call time and the
    # (cold-flushed) kernel time say so, and a cold-cache kernel is not mistaken for a launch-bound
    # one.
    assert cold.median > hot.kernel_time, (cold.line(), hot.line())
    assert cold.kernel_time > 1.2 * hot.kernel_time, (cold.kernel_time, hot.kernel_time)
    assert not cold.launch_bound and "kernels" in cold.line()


def test_cpu_tensors_on_a_gpu_host_are_timed_on_the_host():
    r = gpumagic.gputime("a @ a", globals={"a": torch.randn(64, 64)})
    assert r.backend == "host" and r.device == "CPU"
    assert any("on the CPU" in n for n in r.notes)


def test_statement_error_propagates_and_leaves_cuda_usable(ns):
    with pytest.raises(RuntimeError):
        gpumagic.gputime("A @ torch.ones(3, 3, device='cuda')", globals=ns)
    assert torch.cuda.is_available()
    assert float(torch.ones(2, device="cuda").sum()) == 2.0


def test_default_run_of_a_matmul_finishes_in_under_a_second(ns):
    t0 = time.perf_counter()
    r = gpumagic.gputime("A @ A", globals=ns)
    assert time.perf_counter() - t0 < 1.0, r.stop_reason


def test_magic_prints_the_line_on_the_gpu(ns):
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpumagic")
    shell.user_ns.update(ns)
    with capture_output() as cap:
        r = shell.run_line_magic("gputime", "-o A @ A")
    assert f"per call on {torch.cuda.get_device_name()}" in cap.stdout
    assert r.backend == "cuda-events"


def test_the_sm_clock_is_read_beside_the_samples(ns):
    from gpumagic.timing import CudaSampler

    if CudaSampler(torch.device("cuda", 0)).sm_clock() is None:
        pytest.skip("NVML does not report this device's SM clock")
    r = gpumagic.gputime("A @ A", globals=ns)
    assert len(r.sample_clocks) == len(r.samples) and all(r.sample_clocks)
    summary = r.clock_summary
    assert 100 < summary.low <= summary.prevailing <= summary.high < 5000
    assert ("SM clock moved" in r.line()) == summary.has_moved


def test_kernels_are_shown_beside_the_per_call_time_exactly_when_they_differ(ns):
    # a host round trip per call (.item()) leaves the GPU idle between calls; a matmul does not
    segments = (
        "launch-bound: kernels",
        "gaps between kernels",
        "GPU busy",
        "per call at SM",
        "in a separate pass",
    )
    for stmt in ("A @ A", "(A[:512] @ A[:, :512]).sum().item()"):
        r = gpumagic.gputime(stmt, globals=ns)
        assert r.kernel_time is not None, r.notes
        line = r.line()
        assert sum(seg in line for seg in segments) == 1, line  # one kernel segment, always
        if (
            "gaps between kernels" in line
        ):  # claimed only where the kernels take less than the per-call time
            assert r.kernel_time < 0.97 * (r.prevailing_median or r.median), line
        clock_held = r.clock_summary is None or not r.clock_summary.has_moved
        if clock_held and abs(r.kernel_time / r.median - 1) <= 0.03:
            assert "GPU busy" in line or r.launch_bound, line


def test_steady_waits_for_the_clock_and_says_how_it_ended():
    g = {"m": torch.randn(8192, 8192, device="cuda", dtype=torch.float16)}
    r = gpumagic.gputime("m @ m", globals=g, steady=True)
    found = r.steadiness
    assert found is not None and 1.0 <= found.seconds <= 10.5, found
    if found.settled:
        assert "steady" in r.line() and "not steady" not in r.line()
    else:  # 1 run in 5 on the H100 gave up at 10 s: said, with the test that was unmet
        assert found.unmet and any(
            n.startswith("--steady: the per-call time had not settled") for n in r.notes
        )


FIRST_USE = """
import time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "gpumagic")
shell.run_cell("import torch; A = torch.randn(4096, 4096, device='cuda'); torch.cuda.synchronize()")
t0 = time.perf_counter()
first = shell.run_line_magic("gputime", "-q -o A @ A")
wall = time.perf_counter() - t0
print("FIRST", wall, first.first_call, first.kernel_time, first.meta.get("kernel_pass_backend"))
print("NOTES", first.notes)
"""


def test_first_use_in_a_fresh_process_has_its_kernel_time_through_cupti_in_about_a_second():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", FIRST_USE], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("FIRST"))
    _, wall, first_call, kernel_time, backend = line.split()
    print(line)
    assert backend == "cupti" and kernel_time != "None"
    assert "first start" not in out.stdout  # no profiler start paid
    assert (
        float(wall) - float(first_call) < 3.0
    )  # a runaway guard: benchmarks/first_use.py holds the 1 s target
