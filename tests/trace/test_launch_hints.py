"""A kernel's launching call reaches the decoder: a bare name launched through the driver API (how
Triton launches, e.g. flash-linear-attention's ``chunk_gla_fwd_kernel_o``) reads as Triton in the
report's table and timeline; the same name launched by the runtime API says nothing it cannot."""

from __future__ import annotations

import pytest

from gpumagic.analysis.finding import kernel_labels
from gpumagic.render.report import ProfileReport
from gpumagic.render.tables import kernel_table_html
from gpumagic.trace import Trace, frame
from gpumagic.trace.launching_ops import kernel_launch_apis

NAME = "chunk_gla_fwd_kernel_o"  # fla-org/flash-linear-attention, fla/ops/gla/chunk.py


def trace_launched_by(call: str) -> Trace:
    kernels = [
        {"name": NAME, "start": 1000 + 4000 * i, "end": 3000 + 4000 * i, "device": 0}
        | {"stream": 7, "correlation": 10 + i}
        for i in range(3)
    ]
    api = [
        {"name": call, "start": 500 + 4000 * i, "end": 900 + 4000 * i, "thread": 1}
        | {"correlation": 10 + i}
        for i in range(3)
    ]
    meta = {"backend": "torch.profiler", "recorded": ["kernels", "api"]}
    return Trace(kernels=frame("kernels", kernels), api=frame("api", api), meta=meta)


@pytest.mark.parametrize("call", ["cuLaunchKernel", "cuLaunchKernelEx", "hipModuleLaunchKernel"])
def test_a_driver_api_launch_makes_a_bare_name_triton(call):
    trace = trace_launched_by(call)
    assert kernel_launch_apis(trace) == {NAME: call}
    assert kernel_labels(trace)[NAME].startswith("Triton")
    html = kernel_table_html(
        trace.kernel_summary(), labels=kernel_labels(trace), launches=kernel_launch_apis(trace)
    )
    assert ">Triton<" in html
    assert "Triton " + NAME in str(ProfileReport(trace, timeline=False))


def test_a_runtime_launch_leaves_the_name_undecoded():
    trace = trace_launched_by("cudaLaunchKernel")
    assert kernel_launch_apis(trace) == {}
    assert not kernel_labels(trace)[NAME].startswith("Triton")
    assert "Triton" not in str(ProfileReport(trace, timeline=False))
