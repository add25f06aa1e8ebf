"""The launch-bound advice of ``%gputime`` is not given to code that already does what it advises:
a statement that runs a ``torch.compile(mode="reduce-overhead")`` model (compiled, its kernels
replayed as CUDA graphs) read "--graph replays the calls without launch overhead; ...
torch.compile cut the launches"."""

from __future__ import annotations

from gpumagic.timing import TimingResult
from gpumagic.timing.work import Work


def launch_bound(backend: str = "cuda-event", work: Work | None = None) -> TimingResult:
    """A statement whose host needs 80 µs to issue what the GPU runs in 20 µs, per 100 µs call."""
    return TimingResult(
        samples=[100e-6] * 20,
        calls_per_sample=10,
        device="Fake GPU",
        backend=backend,
        kernel_time=20e-6,
        kernels_per_call=3,
        host_per_call=80e-6,
        work=work,
    )


def advice(result: TimingResult) -> str:
    assert result.launch_bound
    (said,) = [w for w in result.warnings() if "the host needs" in w]
    return said


def test_compiled_code_is_not_told_to_compile_or_to_use_graph():
    said = advice(launch_bound(work=Work(flops=0, bytes=0, counted_at="compiled calls")))
    assert "--graph" not in said and "torch.compile cut" not in said
    assert "runs torch.compile'd code already" in said and "larger batches" in said


def test_eager_code_is_told_both_and_a_graph_run_not_graph():
    eager = advice(launch_bound())
    assert "--graph replays the calls" in eager and "torch.compile cut the launches" in eager
    graphed = advice(launch_bound(backend="cuda-graph"))
    assert "--graph" not in graphed and "torch.compile cut the launches" in graphed


def test_compiled_code_is_known_without_counting_its_work():
    # with work=False (no count), the statement's names still say it calls compiled code
    result = launch_bound()
    result.meta["compiled_names"] = ["model"]
    said = advice(result)
    assert "--graph" not in said and "runs torch.compile'd code already" in said


def test_a_statement_that_reads_a_compiled_function_or_module_knows_it():
    import torch

    from gpumagic.timing.statement import compile_statement

    def f(x):
        return x * 2

    compiled_f = torch.compile(f)
    compiled_m = torch.compile(torch.nn.Linear(2, 2))
    ns = {"f": f, "cf": compiled_f, "cm": compiled_m, "x": torch.ones(2)}
    assert compile_statement("cf(x) + cm(x)", globals=ns).compiled_names == ("cf", "cm")
    assert compile_statement("f(x)", globals=ns).compiled_names == ()
    assert compile_statement(compiled_f).compiled_names == ("<the callable>",)
    assert compile_statement(f).compiled_names == ()
