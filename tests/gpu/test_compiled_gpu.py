"""Compiled code and CUDA graphs on the GPU: measured as they run, and left as they were.

Inductor generates Triton kernels here. After each magic the compiled code still runs its fused
kernels; a ``%%gpuprofile`` of it lists the kernels a plain torch.profiler capture of the same cell
lists (names and counts, per-kernel time within 1%); a CUDA graph replay's kernels are listed one by
one, and ``reduce-overhead`` shows its kernels, not one opaque graph row.
"""

from __future__ import annotations

import statistics
from collections import Counter

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

from torch.profiler import ProfilerActivity, profile  # noqa: E402


def plain_capture(call, iters: int = 1) -> tuple[Counter, dict[str, list[float]], set[str]]:
    """Kernel names and counts, each kernel's durations (µs) and the CPU event names of a plain
    capture."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            call()
        torch.cuda.synchronize()
    kernels: Counter = Counter()
    durations: dict[str, list[float]] = {}
    cpu = set()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            if e.name.startswith(("Memcpy", "Memset")) or getattr(e, "is_user_annotation", False):
                continue
            kernels[e.name] += 1
            durations.setdefault(e.name, []).append(e.time_range.elapsed_us())
        else:
            cpu.add(e.name)
    return kernels, durations, cpu


def report_kernels(rep) -> tuple[Counter, dict[str, list[float]]]:
    k = rep.trace.kernels
    return Counter(k["name"]), {
        n: list((g["end"] - g["start"]) / 1000.0) for n, g in k.groupby("name")
    }


def gelu_block(t):
    return torch.nn.functional.gelu(t) * 2 + 1


@pytest.fixture(scope="module")
def compiled_fn():
    t = torch.randn(16 * 1024 * 1024, device="cuda")
    f = torch.compile(gelu_block)
    f(t)
    f(t)
    torch.cuda.synchronize()
    return f, t


def assert_fused(call) -> Counter:
    kernels, _, cpu = plain_capture(call)
    assert any(n.startswith("Torch-Compiled Region") for n in cpu), sorted(cpu)[:20]
    assert kernels and all(n.startswith("triton_") for n in kernels), kernels
    return kernels


def test_gputime_counts_the_compiled_call_and_leaves_it_compiled(ip, compiled_fn, capsys):
    f, t = compiled_fn
    before = assert_fused(lambda: f(t))
    ip.user_ns.update(f=f, t=t)
    result = ip.run_line_magic("gputime", "-o f(t)")
    line = capsys.readouterr().out
    print(line)
    work = result.work
    assert work.counted_at == "compiled calls"
    assert work.bytes == 2 * t.numel() * t.element_size()  # read t once, write the output once
    assert "not shown" not in line and ("TB/s" in line or "GB/s" in line), line
    assert assert_fused(lambda: f(t)) == before
    ip.run_line_magic("gputime", "-q --graph f(t)")
    assert assert_fused(lambda: f(t)) == before


def test_gpuprofile_of_compiled_code_equals_a_plain_capture(ip, compiled_fn):
    f, t = compiled_fn
    ip.user_ns.update(f=f, t=t)
    # a plain capture right before and one right after: the GPU's clock drifts under load between
    # captures, so the truth is taken on both sides of the one under test (as
    # benchmarks/timing_accuracy.py takes its truths). 200 runs each: on an H100 the median of 20
    # runs of this 46 µs kernel moved by up to 0.78 µs (1.7%) from capture to capture of the same
    # input, and by 0.13 µs (0.3%) at most with 200 (3 inputs × 3 captures each; the input's
    # address made no difference: benchmarks/kernel_median_noise.py), so 20 failed the 1% bound
    # one time in two
    plain, before, _ = plain_capture(lambda: f(t), iters=200)
    ip.run_cell_magic("gpuprofile", "-w 2 -n 200 -o rep --no-timeline", "f(t)")
    _, after, _ = plain_capture(lambda: f(t), iters=200)
    rep = ip.user_ns["rep"]
    names, ours = report_kernels(rep)
    assert names == plain
    for name in names:
        a = statistics.median(ours[name])
        b = (statistics.median(before[name]) + statistics.median(after[name])) / 2
        assert abs(a / b - 1) < 0.01, (
            name,
            a,
            statistics.median(before[name]),
            statistics.median(after[name]),
        )
    assert any(str(n).startswith("Torch-Compiled Region") for n in rep.trace.ops["name"])
    fused = rep.trace.meta.get("fused", {})
    assert fused and all("aten.gelu" in fused[n] for n in names), fused
    assert "aten.gelu" in rep._repr_html_()


def test_compiled_module_profile_equals_plain_capture(ip):
    m = torch.compile(
        torch.nn.Sequential(
            torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)
        )
        .cuda()
        .bfloat16()
    )
    v = torch.randn(64, 1024, device="cuda", dtype=torch.bfloat16)
    m(v)
    m(v)
    ip.user_ns.update(m=m, v=v)
    ip.run_cell_magic("gpuprofile", "-w 1 -n 10 -o rep --no-timeline", "m(v)")
    names, _ = report_kernels(ip.user_ns["rep"])
    plain, _, cpu = plain_capture(lambda: m(v), iters=10)
    assert names == plain
    assert any(n.startswith("Torch-Compiled Region") for n in cpu)


def test_cuda_graph_replay_lists_the_kernels_the_graph_holds(ip):
    x = torch.randn(1024, 1024, device="cuda")
    w = torch.randn(1024, 1024, device="cuda")

    def step():
        return torch.relu(x @ w) + 1

    eager, _, _ = plain_capture(step)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    g.replay()
    torch.cuda.synchronize()
    replayed, _, _ = plain_capture(g.replay)
    ip.user_ns.update(g=g)
    ip.run_cell_magic("gpuprofile", "-w 1 -o rep --no-timeline", "g.replay()")
    names, _ = report_kernels(ip.user_ns["rep"])
    assert names == replayed
    assert sum(names.values()) == sum(eager.values())
    result = ip.run_line_magic("gputime", "-o -q g.replay()")
    assert result.kernels_per_call == pytest.approx(sum(eager.values()))


def test_reduce_overhead_is_profiled_kernel_by_kernel(ip):
    m = torch.compile(
        torch.nn.Sequential(
            torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)
        ).cuda(),
        mode="reduce-overhead",
    )
    v = torch.randn(32, 512, device="cuda")
    for _ in range(3):
        m(v)
    torch.cuda.synchronize()
    ip.user_ns.update(m=m, v=v)
    ip.run_cell_magic("gpuprofile", "-w 1 -o rep --no-timeline", "m(v)")
    rep = ip.user_ns["rep"]
    names, _ = report_kernels(rep)
    assert len(names) >= 2, names  # the graph's kernels, not one launch row
    assert any(n.startswith("triton_") for n in names), names
    plain, _, _ = plain_capture(lambda: m(v))
    assert names == plain
    # each replayed kernel on a module (the compiled model, one range) and on the line
    items = rep.trace.by_line(memops=False)
    assert int(items.loc[items["source"] == "m(v)", "kernels"].iloc[0]) == sum(names.values())
    mods = rep.trace.by_module(memops=False).set_index("module")
    assert int(mods.loc["m", "kernels"]) == sum(names.values())


GRAPH_MODEL = """
import torch
from torch import nn
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.act, self.down = nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)
    def forward(self, x):
        return self.down(self.act(self.up(x)))
mlp = MLP().cuda()
gx = torch.randn(256, 1024, device="cuda")
_side = torch.cuda.Stream()
_side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(_side):
    mlp(gx)
torch.cuda.current_stream().wait_stream(_side)
"""
GRAPH_CELL = """\
g2 = torch.cuda.CUDAGraph()
with torch.cuda.graph(g2):
    y2 = mlp(gx)
g2.replay()
g2.replay()"""


def test_a_graph_captured_in_the_cell_puts_its_replays_on_the_capturing_modules(ip, own_names):
    ip.run_cell(GRAPH_MODEL)
    ip.run_cell_magic("gpuprofile", "-w 1 -o rep --no-timeline", GRAPH_CELL)
    t = ip.user_ns["rep"].trace
    replays = t.api[t.api["name"] == "cudaGraphLaunch"]["correlation"]
    replayed = t.kernels[t.kernels["correlation"].isin(replays)]
    assert len(replayed) >= 6
    mods = t.by_module(memops=False).set_index("module")
    counts = {m: int(mods.loc[m, "kernels"]) for m in ("up", "act", "down")}
    assert all(n >= 2 for n in counts.values()), counts  # each replay's nodes, on their module
    lines = t.by_line(memops=False).set_index("source")
    assert int(lines.loc["y2 = mlp(gx)", "kernels"]) >= len(replayed)
    assert int(lines.loc["g2.replay()", "total_ns"].sum()) == 0
    assert "graphs" not in lines.attrs


def test_nsys_lists_a_graph_replays_kernels_node_by_node(ip, tmp_path):
    import shutil

    if shutil.which("nsys") is None:
        pytest.skip("nsys not on PATH")
    setup = (
        "import torch; x = torch.randn(1024, 1024, device='cuda'); w = torch.randn(1024, "
        "1024, device='cuda')\n"
        "s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())\n"
        "with torch.cuda.stream(s): torch.relu(x @ w) + 1\n"
        "torch.cuda.current_stream().wait_stream(s); g = torch.cuda.CUDAGraph()\n"
        "with torch.cuda.graph(g): y = torch.relu(x @ w) + 1\n"
    )
    script = tmp_path / "graph_setup.py"
    script.write_text(setup)
    line = f"--nsys -w 1 -o rep --no-timeline --setup \"exec(open('{script}').read())\""
    ip.run_cell_magic("gpuprofile", line, "g.replay()")
    kernels = ip.user_ns["rep"].trace.kernels
    assert len(kernels) == 3, list(
        kernels["name"]
    )  # the GEMM, relu and add the graph holds, each as a kernel
