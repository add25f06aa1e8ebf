"""Counting the work of one call on the CPU: FLOPs, bytes, precision class, failures as reasons, no
side effects."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from gpumagic.timing.work import Work, count_work, precision_class, tf32_enabled  # noqa: E402


@pytest.mark.parametrize("m, k, n", [(64, 32, 16), (128, 256, 8), (1, 1000, 3)])
def test_matmul_flops_are_exactly_2mnk(m, k, n):
    a, b = torch.randn(m, k), torch.randn(k, n)
    w = count_work(lambda: a @ b)
    assert w.flops == 2 * m * k * n
    assert w.bytes_read == (m * k + k * n) * 4
    assert w.bytes_written == m * n * 4
    assert w.bytes == w.bytes_read + w.bytes_written
    assert w.precision_class == "fp32" and w.dtype == "float32"
    assert w.device_type == "cpu" and w.peak_memory is None
    assert w.intensity == pytest.approx(w.flops / w.bytes)


@pytest.mark.parametrize(
    "dtype, nbytes", [(torch.float32, 4), (torch.bfloat16, 2), (torch.float64, 8)]
)
def test_elementwise_add_moves_three_tensors_and_counts_no_flops(dtype, nbytes):
    n = 12345
    x, y = torch.randn(n, dtype=dtype), torch.randn(n, dtype=dtype)
    w = count_work(lambda: x + y)
    assert w.flops == 0
    assert w.bytes == 3 * n * nbytes
    assert w.ops == 1
    assert w.dtype == str(dtype).removeprefix("torch.")


def test_the_same_tensor_twice_is_read_once_and_in_place_reads_and_writes():
    x = torch.randn(1000)
    assert count_work(lambda: x * x).bytes == 2 * 4000
    w = count_work(lambda: x.add_(1.0))
    assert (w.bytes_read, w.bytes_written) == (4000, 4000)


def test_views_move_nothing_and_a_broadcast_reads_its_storage_once():
    x = torch.randn(64, 64)
    w = count_work(lambda: x.t()[:10].unsqueeze(0).expand(3, 10, 64).detach())
    assert w.ops == 0 and w.bytes == 0
    assert (
        count_work(lambda: x.t().reshape(-1)).bytes == 2 * 64 * 64 * 4
    )  # a reshape that must copy does move data
    row = torch.randn(64)
    w = count_work(lambda: x + row.expand(64, 64))
    assert w.bytes == (64 * 64 + 64 + 64 * 64) * 4


def test_sdpa_flops_counted_forward_and_backward():
    b, h, s, d = 2, 4, 64, 32
    q = torch.randn(b, h, s, d, requires_grad=True)
    fwd = count_work(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))
    assert fwd.flops == 4 * b * h * s * s * d  # QK^T and (softmax)V, 2*b*h*s*s*d each
    both = count_work(
        lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q).sum().backward()
    )
    assert both.flops == pytest.approx(3.5 * fwd.flops)  # the backward is 2.5x the forward


def test_linear_backward_counts_the_weight_gradient():
    lin = torch.nn.Linear(32, 16, bias=False)
    x = torch.randn(8, 32)
    w = count_work(lambda: lin(x).sum().backward())
    assert w.flops == 2 * (2 * 8 * 32 * 16)  # forward + grad weight (x needs no gradient)


def test_mixed_precisions_are_split_and_the_dominant_one_chosen():
    a32, b32 = torch.randn(16, 16), torch.randn(16, 16)
    a16, b16 = torch.randn(64, 64, dtype=torch.bfloat16), torch.randn(64, 64, dtype=torch.bfloat16)
    w = count_work(lambda: (a32 @ b32, a16 @ b16))
    assert dict(w.flops_by_precision) == {"fp32": 2 * 16**3, "bf16": 2 * 64**3}
    assert w.precision_class == "bf16" and w.dtype == "bfloat16"
    assert "several precisions" in w.note


def test_a_failing_statement_gives_none_and_the_reason():
    def boom():
        raise ValueError("shapes do not match")

    w = count_work(boom)
    assert isinstance(w, Work)
    assert w.flops is None and w.bytes is None and not w.counted
    assert "ValueError: shapes do not match" in w.note


def test_keyboard_interrupt_is_not_swallowed():
    def stop():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        count_work(stop)


def test_no_tensor_work_is_zero_with_a_note():
    w = count_work(lambda: sum(range(100)))
    assert (w.flops, w.bytes, w.ops) == (0, 0, 0)
    assert "no tensor operations" in w.note


def test_counting_leaves_results_and_state_alone():
    a = torch.randn(32, 32)
    before = a.clone()
    expected = a @ a
    box = {}

    def call():
        box["out"] = a @ a
        return box["out"]

    count_work(call)
    assert torch.equal(a, before)
    assert torch.equal(box["out"], expected)  # the ops ran for real, unchanged by the modes
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    assert _get_current_dispatch_mode() is None  # no mode left behind


def test_precision_class_mapping():
    assert precision_class("float32", "cuda", "matmul", tf32=False) == "fp32"
    assert precision_class("float32", "cuda", "matmul", tf32=True) == "tf32"
    assert precision_class("float32", "cuda", "conv", tf32=True) == "tf32"
    assert precision_class("float32", "cuda", "attention", tf32=True) == "fp32"
    assert (
        precision_class("float32", "cpu", "matmul", tf32=True) == "fp32"
    )  # no tensor cores on the host
    assert precision_class("torch.bfloat16") == "bf16"
    assert precision_class("float16") == "fp16"
    assert precision_class("float8_e4m3fn") == "fp8"
    assert precision_class("complex64") is None


def test_tf32_switches_are_read(monkeypatch):
    monkeypatch.delenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", raising=False)
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert tf32_enabled("matmul") is False
        torch.set_float32_matmul_precision("high")
        assert tf32_enabled("matmul") is True
        torch.set_float32_matmul_precision("highest")
        monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
        assert tf32_enabled("matmul") is True
    finally:
        torch.set_float32_matmul_precision(old)


def test_summary_is_plain_data():
    x = torch.randn(10)
    s = count_work(lambda: x + 1).summary()
    assert s["bytes"] == 80 and s["flops"] == 0 and s["peak_memory"] is None
    assert all(not isinstance(v, torch.Tensor) for v in s.values())
    assert not math.isnan(float(s["bytes"]))


def test_a_work_pickles_with_its_read_only_split():
    import pickle
    from types import MappingProxyType

    from gpumagic.timing.work import Work

    w = Work(flops=10, bytes=4, flops_by_precision=MappingProxyType({"bf16": 6, "fp32": 4}))
    back = pickle.loads(pickle.dumps(w))
    assert back == w and isinstance(back.flops_by_precision, MappingProxyType)
    with pytest.raises(TypeError):
        back.flops_by_precision["fp8"] = 1  # still read-only
