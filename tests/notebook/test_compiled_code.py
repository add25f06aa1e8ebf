"""Measuring compiled code leaves it compiled: no magic makes a ``torch.compile``d model run eager
afterwards.

Inductor's C++ backend compiles here on the CPU (a C++ compiler is needed; skipped without one). A
compiled region shows in a torch.profiler capture as "Torch-Compiled Region"; a model that dynamo
gave up on runs its eager ops instead (``aten::gelu``), which Inductor's fused C++ kernel does not.
Each test measures with one magic, then captures the next plain call of the compiled code and checks
both, and dynamo's compile counters.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile  # noqa: E402

pytestmark = pytest.mark.skipif(
    shutil.which("g++") is None and shutil.which("c++") is None,
    reason="Inductor's CPU backend needs a C++ compiler",
)

EAGER_OPS = {"aten::gelu", "aten::mul", "aten::add"}


def captured_ops(call) -> set[str]:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        call()
    return {event.name for event in prof.events()}


def assert_still_compiled(call) -> None:
    names = captured_ops(call)
    assert any(name.startswith("Torch-Compiled Region") for name in names), sorted(names)[:20]
    assert not names & EAGER_OPS, f"eager ops of the decomposition ran: {sorted(names & EAGER_OPS)}"


def compile_counts() -> dict[str, int]:
    from torch._dynamo.utils import counters

    return {**{f"frames.{k}": v for k, v in counters["frames"].items()}, **dict(counters["stats"])}


def block(t):
    return torch.nn.functional.gelu(t) * 2 + 1


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 32)

    def forward(self, t):
        return self.down(torch.nn.functional.gelu(self.up(t)) * 2 + 1)


@torch.compiler.disable
def _eager_helper(t):
    return t.sum()


def with_disabled_region(t):
    return (torch.nn.functional.gelu(t) * 2 + 1) + _eager_helper(t)


VARIANTS = {
    "function": lambda: torch.compile(block),
    "module": lambda: torch.compile(Block()),
    "fullgraph": lambda: torch.compile(block, fullgraph=True),
    "dynamic": lambda: torch.compile(block, dynamic=True),
    "reduce-overhead": lambda: torch.compile(Block(), mode="reduce-overhead"),
    "disabled-region-inside": lambda: torch.compile(with_disabled_region),
}


@pytest.fixture(scope="module")
def compiled():
    """Each variant compiled once and run twice (reduce-overhead records on its second call)."""
    x = torch.randn(16, 32)
    made = {}
    for name, make in VARIANTS.items():
        fn = make()
        fn(x)
        fn(x)
        made[name] = fn
    return made, x


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_gputime_leaves_each_kind_of_compiled_code_compiled(ip, compiled, variant):
    fns, x = compiled
    fn = fns[variant]
    if variant != "disabled-region-inside":
        assert_still_compiled(lambda: fn(x))
    before = compile_counts()
    ip.user_ns.update(f=fn, x=x)
    ip.run_line_magic("gputime", "-q -r 5 f(x)")
    assert compile_counts() == before
    if variant == "disabled-region-inside":
        names = captured_ops(lambda: fn(x))
        assert any(n.startswith("Torch-Compiled Region") for n in names)
        assert "aten::gelu" not in names
    else:
        assert_still_compiled(lambda: fn(x))


def test_compare_sweep_and_gpuprofile_leave_a_compiled_module_compiled(ip, compiled):
    fns, x = compiled
    fn = fns["module"]
    ip.user_ns.update(m=fn, x=x)
    before = compile_counts()
    ip.run_cell_magic("gputime", "--compare -q -r 5", "m(x)  # compiled\nx + 1  # add")
    assert_still_compiled(lambda: fn(x))
    ip.run_cell_magic("gputime", "--sweep k=1,2 -q -r 5", "m(x) * k")
    assert_still_compiled(lambda: fn(x))
    ip.run_cell_magic("gpuprofile", "-w 1 -o rep --no-timeline", "m(x)")
    assert_still_compiled(lambda: fn(x))
    assert compile_counts() == before


def test_the_work_of_a_compiled_call_is_counted_at_its_level(ip, compiled):
    fns, x = compiled
    m = fns["module"]
    ip.user_ns.update(m=m, x=x)
    result = ip.run_line_magic("gputime", "-o -q -r 5 m(x) + 1")
    work = result.work
    inner = m._orig_mod
    params = sum(p.numel() * p.element_size() for p in inner.parameters())
    act = x.numel() * x.element_size()
    # the compiled call reads x and its parameters and writes its output; "+ 1" (eager) reads it and
    # writes one more
    assert work.bytes_read == act + params + act
    assert work.bytes_written == act + act
    assert work.counted_at == "compiled calls"
    assert work.flops == 2 * 16 * 32 * 64 * 2  # the two Linear layers' matmuls
    assert "compiled call (Block)" in work.note
    assert_still_compiled(lambda: m(x))


def test_counting_never_imports_dynamo_where_nothing_was_compiled():
    code = textwrap.dedent(
        """
        import sys, torch
        from gpumagic.timing.work import count_work
        x = torch.randn(64, 64)
        w = count_work(lambda: x @ x)
        print(w.flops, w.counted_at, "torch._dynamo" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == [str(2 * 64**3), "ops", "False"]


def test_no_dynamo_error_at_exit_after_gputime_of_compiled_code():
    code = textwrap.dedent(
        """
        import torch
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance()
        ip.run_line_magic("load_ext", "gpumagic")
        f = torch.compile(lambda t: torch.nn.functional.gelu(t) * 2 + 1)
        x = torch.randn(8, 8)
        f(x)
        ip.user_ns.update(f=f, x=x)
        ip.run_line_magic("gputime", "-q -r 3 f(x)")
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU]) as p:
            f(x)
        names = {e.name for e in p.events()}
        print("compiled" if any(n.startswith("Torch-Compiled Region") for n in names) else "eager")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "compiled"
    assert "KeyError" not in out.stderr and "__builtins_dict__" not in out.stderr, out.stderr[
        -2000:
    ]


def test_a_pytorch_without_set_stance_leaves_the_work_uncounted_and_says_why(monkeypatch):
    from gpumagic.timing.work import count_work

    calls = []
    monkeypatch.delattr(torch.compiler, "set_stance")
    work = count_work(lambda: calls.append(1))
    assert work.flops is None and "torch.compiler.set_stance" in work.note
    assert calls == [
        1
    ]  # the statement ran once, plainly, for its peak memory: never under a dispatch mode
