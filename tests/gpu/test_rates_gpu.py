"""%gputime's FLOP/s and bandwidth on the GPU: the counted work of a bf16 matmul and an add, at the
median."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs CUDA", allow_module_level=True)

import gpumagic  # noqa: E402


def test_bf16_matmul_reports_2n3_over_the_median_and_a_share_of_the_tensor_core_peak():
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    r = gpumagic.gputime("a @ a", globals={"a": a}, time_budget=1.0)
    figures = r.summary()
    assert figures["flops"] == 2 * n**3
    assert figures["flop_rate"] == pytest.approx(2 * n**3 / r.median, rel=0.01)
    assert figures["precision_class"] == "bf16"
    if "H100" in r.device or "H200" in r.device:
        assert "of bf16 tensor-core peak" in r.line()
        assert 0.2 < figures["flop_share"] < 1.0


def test_elementwise_add_reports_three_tensors_of_bytes_over_the_median():
    n = 1 << 26
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    r = gpumagic.gputime("x + y", globals={"x": x, "y": y}, time_budget=1.0)
    figures = r.summary()
    assert figures["bytes"] == 3 * n * 4
    assert figures["byte_rate"] == pytest.approx(3 * n * 4 / r.median, rel=0.01)
    assert "B/s" in r.line()
    assert figures["peak_memory"] >= n * 4  # the output it allocates
