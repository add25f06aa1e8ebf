"""Work counting, achieved rates and measured peaks on a real GPU (python3 -m pytest tests/gpu;
skips without CUDA)."""

from __future__ import annotations

import statistics

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

from gpumagic.device_peaks import achieved, lookup, measure_peak  # noqa: E402
from gpumagic.timing.work import count_work  # noqa: E402

MiB = 1 << 20


def event_median(fn, calls: int = 5, samples: int = 15) -> float:
    """Seconds per call: the median of ``samples`` CUDA-event windows of ``calls`` back-to-back
    calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / calls)
    return statistics.median(times)


def test_bf16_matmul_flops_bytes_memory_and_rate():
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    a @ b  # cuBLAS workspace and heuristics before the memory is measured
    w = count_work(lambda: a @ b)
    assert w.flops == 2 * n**3
    assert w.bytes == 3 * n * n * 2
    assert (w.precision_class, w.dtype, w.device_type) == ("bf16", "bfloat16", "cuda")
    assert n * n * 2 <= w.peak_memory <= n * n * 2 + 64 * MiB
    median = event_median(lambda: a @ b)
    rate = achieved(w, median, torch.cuda.get_device_name())
    assert rate.flop_rate == pytest.approx(2 * n**3 / median, rel=0.01)
    if lookup(torch.cuda.get_device_name()) is not None:
        assert 0.2 < rate.flop_share < 1.05
        assert "bf16 tensor-core peak" in rate.segment()
        assert rate.limiter() == "compute-bound"


def test_add_bytes_and_bandwidth():
    n = 1 << 26
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    w = count_work(lambda: x + y)
    assert w.flops == 0 and w.bytes == 3 * n * 4
    median = event_median(lambda: x + y, calls=10)
    rate = achieved(w, median, torch.cuda.get_device_name())
    assert rate.byte_rate == pytest.approx(3 * n * 4 / median, rel=0.01)
    if lookup(torch.cuda.get_device_name()) is not None:
        assert 0.4 < rate.byte_share < 1.05
        assert rate.limiter() == "memory-bound" and "bandwidth" in rate.segment()


def test_fp32_precision_class_follows_the_tf32_switch(monkeypatch):
    monkeypatch.delenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", raising=False)
    a = torch.randn(512, 512, device="cuda")
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert count_work(lambda: a @ a).precision_class == "fp32"
        torch.set_float32_matmul_precision("high")
        assert count_work(lambda: a @ a).precision_class == "tf32"
    finally:
        torch.set_float32_matmul_precision(old)


def test_sdpa_counted_on_cuda():
    b, h, s, d = 4, 8, 1024, 64
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    w = count_work(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))
    assert w.flops == 4 * b * h * s * s * d
    assert w.precision_class == "bf16" and w.peak_memory is not None


@pytest.mark.parametrize("backend", ["flash", "efficient", "cudnn"])
def test_causal_and_gqa_attention_count_the_pairs_the_kernel_computes(backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, h, s, d = 2, 8, 1024, 64
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    kv = torch.randn(b, 2, s, d, device="cuda", dtype=torch.bfloat16)
    which = {
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
    }[backend]
    sdpa = torch.nn.functional.scaled_dot_product_attention
    try:
        with sdpa_kernel(which):
            w = count_work(lambda: sdpa(q, q, q, is_causal=True))
            g = count_work(lambda: sdpa(q, kv, kv, is_causal=True, enable_gqa=True))
    except RuntimeError as exc:  # a backend this build or GPU does not offer
        pytest.skip(f"{backend}: {exc}")
    causal = 4 * b * h * d * s * (s + 1) // 2
    assert w.flops == causal, w.note
    if g.flops is not None:  # the GQA path through this backend, where it has one
        assert g.flops == causal, g.note


def test_rms_norm_counted_as_the_one_kernel_that_ran_and_no_share_above_peak():
    import gpumagic

    x = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    r = gpumagic.gputime(
        "F.rms_norm(x, (4096,), w)", globals={"F": torch.nn.functional, "x": x, "w": w}
    )
    if r.kernels_per_call is not None and r.kernels_per_call <= 2:  # the fused kernel ran
        assert r.work.bytes == 2 * x.nbytes + w.nbytes and r.work.counted_at == "calls"
    found = r.achieved
    assert found is None or found.byte_share is None or found.byte_share <= 1.0


def test_counting_work_leaves_the_users_peak_memory_counter_alone():
    big = torch.empty(1 << 30, device="cuda", dtype=torch.uint8)
    del big
    before = torch.cuda.max_memory_allocated()
    a = torch.randn(1024, 1024, device="cuda")
    w = count_work(lambda: a @ a)
    assert torch.cuda.max_memory_allocated() == before  # was reset by the count before
    assert w.peak_memory is not None and 1024 * 1024 * 4 <= w.peak_memory < 64 * MiB


def test_measure_peak_is_plausible_and_cached(tmp_path, monkeypatch):
    from gpumagic.device_peaks import measure as measure_mod

    monkeypatch.setenv("GPUMAGIC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(measure_mod, "_MEMORY", {})
    found = measure_peak(size=4096)
    assert not found.cached and found.path == str(tmp_path / "peaks.json")
    assert found.flops["bf16"] > found.flops["tf32"] > found.flops["fp32"] > 1e12
    sheet = lookup(found.device)
    if sheet is not None:
        assert found.bandwidth < 1.05 * sheet.bandwidth
        assert found.flops["bf16"] < 1.05 * sheet.flops["bf16"]
    monkeypatch.setattr(measure_mod, "_MEMORY", {})
    again = measure_peak()
    assert again.cached and again.flops == found.flops
