"""Work counted as it ran: attention over the pairs its kernel computes (causal, masks, windows,
GQA), a composite op counted at the level of the call where one kernel ran, and no rate above its
peak. Each figure is checked against the closed form on shapes chosen here."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from gpumagic.device_peaks import achieved  # noqa: E402
from gpumagic.device_peaks.table import lookup  # noqa: E402
from gpumagic.timing.attention_work import attention_count, causal_pairs, window_pairs  # noqa: E402
from gpumagic.timing.work import Work, count_work, reconcile  # noqa: E402

B, H, L, E = 2, 4, 96, 32


def brute_causal(lq: int, lk: int) -> int:
    return int(torch.ones(lq, lk).tril().sum())  # SDPA's is_causal mask, as its docs build it


@pytest.mark.parametrize("lq, lk", [(1, 1), (7, 7), (5, 9), (9, 5), (128, 128)])
def test_causal_pairs_match_sdpas_own_mask(lq, lk):
    assert causal_pairs(lq, lk) == brute_causal(lq, lk)


@pytest.mark.parametrize("left, right", [(3, 0), (0, 0), (None, 0), (4, 2), (None, None)])
def test_window_pairs_match_a_brute_force_count(left, right):
    lq, lk = 11, 13
    i, j = torch.arange(lq)[:, None], torch.arange(lk)[None, :]
    keep = torch.ones(lq, lk, dtype=torch.bool)
    if left is not None:
        keep &= j >= i - left
    if right is not None:
        keep &= j <= i + right
    assert window_pairs(lq, lk, left, right) == int(keep.sum())


def qkv(heads_kv: int = H, dtype=torch.float32):
    q = torch.randn(B, H, L, E, dtype=dtype)
    k, v = (torch.randn(B, heads_kv, L, E, dtype=dtype) for _ in range(2))
    return q, k, v


def test_causal_attention_counts_half_the_pairs_diagonal_included():
    q, k, v = qkv()
    dense = count_work(lambda: F.scaled_dot_product_attention(q, k, v))
    causal = count_work(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert dense.flops == 4 * B * H * L * L * E
    assert causal.flops == 4 * B * H * E * L * (L + 1) // 2  # was the dense count: 2x the truth
    assert "causal" in causal.note and "50.5% of all pairs" in causal.note


def test_grouped_query_attention_counts_every_query_head():
    q, k, v = qkv(heads_kv=1)
    w = count_work(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))
    assert w.flops == 4 * B * H * E * causal_pairs(L, L)
    assert "grouped-query" in w.note


@pytest.mark.parametrize("kind", ["bool", "additive -inf", "additive finfo.min", "additive -65504"])
def test_a_sliding_window_mask_counts_the_pairs_it_keeps(kind):
    q, k, v = qkv()
    w_size = 16
    i = torch.arange(L)
    keep = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < w_size)
    low = {"additive -inf": float("-inf"), "additive -65504": -65504.0}.get(
        kind, torch.finfo(torch.float32).min
    )
    mask = keep if kind == "bool" else torch.zeros(L, L).masked_fill(~keep, low)
    w = count_work(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert w.flops == 4 * B * H * E * window_pairs(L, L, w_size - 1, 0)


def test_a_mask_that_keeps_everything_is_dense():
    q, k, v = qkv()
    w = count_work(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.zeros(L, L)))
    assert w.flops == 4 * B * H * L * L * E


def test_causal_backward_follows_the_forward_pairs():
    q = torch.randn(B, H, L, E, requires_grad=True)
    fwd = count_work(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True))
    both = count_work(
        lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    )
    assert both.flops == pytest.approx(
        3.5 * fwd.flops
    )  # backward: recompute, dS, dV, dQ, dK = 2.5x


class _Arg:
    def __init__(self, name, default=None, kwarg_only=False):
        self.name, self.default_value, self.kwarg_only = name, default, kwarg_only

    def has_default_value(self):
        return self.default_value is not None


def test_flash_forward_with_a_window_and_packed_sequences():
    # (total, heads, dim) packed: two sequences of 40 and 24 tokens, a causal window of 8 keys
    q, k, v = (torch.randn(64, H, E) for _ in range(3))
    cum = torch.tensor([0, 40, 64])
    bound = dict(
        query=q, key=k, value=v, cum_seq_q=cum, cum_seq_k=cum, is_causal=True, window_size_left=7
    )
    c = attention_count("_flash_attention_forward", bound)
    pairs = window_pairs(40, 40, 7, 0) + window_pairs(24, 24, 7, 0)
    assert c is not None and c.how == "window" and c.flops == 4 * H * E * pairs


def test_a_mask_on_the_meta_device_is_counted_dense_and_said_so():
    q, k, v = (torch.randn(B, H, L, E) for _ in range(3))
    bound = dict(
        query=q, key=k, value=v, attn_bias=torch.empty(L, L, device="meta"), is_causal=False
    )
    c = attention_count("_scaled_dot_product_efficient_attention", bound)
    assert c.assumed_dense and c.flops == 4 * B * H * L * L * E
    assert attention_count("mm", bound) is None


def test_rms_norm_bytes_are_the_calls_own_where_one_kernel_ran():
    x, w = torch.randn(512, 256, dtype=torch.bfloat16), torch.randn(256, dtype=torch.bfloat16)
    truth = 2 * x.nbytes + w.nbytes
    as_ops = count_work(lambda: F.rms_norm(x, (256,), w))
    assert as_ops.ops >= 4 and as_ops.bytes > 3 * truth  # the decomposition the counter sees
    one_kernel = count_work(lambda: F.rms_norm(x, (256,), w), kernels_per_call=1)
    assert one_kernel.bytes == truth and one_kernel.counted_at == "calls"
    assert "rms_norm" in one_kernel.note and "1 kernel per call" in one_kernel.note
    as_many = count_work(lambda: F.rms_norm(x, (256,), w), kernels_per_call=as_ops.ops)
    assert (
        as_many.bytes == as_ops.bytes and as_many.counted_at == "ops"
    )  # the decomposition did run


def test_reconcile_leaves_work_whose_ops_match_the_kernels():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    w = count_work(lambda: (a @ b).relu().sum(), kernels_per_call=3)
    assert w.counted_at == "ops" and w.calls == 3 and w.ops == 3
    assert reconcile(w, None) is w


def test_the_call_counter_skips_views_and_counts_in_place_twice():
    x = torch.randn(1000)
    w = count_work(lambda: (x[:500].add_(1), x.view(10, 100)))
    assert w.calls == 1 and w.call_bytes == 2 * 500 * 4


def test_no_share_above_a_peak_is_printed():
    sheet = lookup("NVIDIA H100 80GB HBM3")
    assert sheet is not None
    seconds = 56.4e-6
    over = achieved(
        Work(flops=0, bytes=int(5 * sheet.bandwidth * seconds), precision_class="bf16"),
        seconds,
        "NVIDIA H100 80GB HBM3",
    )
    assert over.byte_share is None and over.raw_byte_share == pytest.approx(5.0)
    assert over.byte_segment() is None and over.segment() is None and over.limiter() is None
    (why,) = over.over_peak()
    assert "500% of HBM" in why and "not the traffic" in why
    flops = int(2 * sheet.peak("bf16") * seconds)
    over = achieved(
        Work(flops=flops, bytes=10**6, precision_class="bf16"), seconds, "NVIDIA H100 80GB HBM3"
    )
    assert over.flop_segment() is None and "FLOP/s not shown" in over.over_peak()[0]
    fine = achieved(
        Work(flops=flops // 4, bytes=10**6, precision_class="bf16"),
        seconds,
        "NVIDIA H100 80GB HBM3",
    )
    assert fine.over_peak() == [] and "50% of bf16 tensor-core peak" in fine.segment()


def test_the_line_of_a_call_counted_above_its_peak_has_no_share_and_says_why():
    from gpumagic.timing.result import TimingResult

    x = 8192 * 4096 * 2
    work = Work(
        flops=0, bytes=10 * x, precision_class="bf16", note=""
    )  # rms_norm's decomposition, 10x the traffic
    r = TimingResult(
        samples=[56.4e-6] * 5,
        calls_per_sample=1,
        device="NVIDIA H100 80GB HBM3",
        backend="cuda-events",
        work=work,
    )
    assert "of HBM bandwidth" not in r.line() and "TB/s" not in r.line()
    assert any(w.startswith("GB/s not shown") and "--ncu" in w for w in r.warnings())
    fixed = reconcile(
        Work(
            flops=0,
            bytes=10 * x,
            ops=8,
            calls=1,
            call_bytes=2 * x,
            call_names=("rms_norm",),
            precision_class="bf16",
        ),
        1,
    )
    r = TimingResult(
        samples=[56.4e-6] * 5,
        calls_per_sample=1,
        device="NVIDIA H100 80GB HBM3",
        backend="cuda-events",
        work=fixed,
    )
    assert "TB/s = " in r.line() and "% of HBM bandwidth" in r.line()
    assert any("level of the call (rms_norm" in w for w in r.warnings())


def test_an_int8_gemm_counts_its_integer_ops_against_the_int8_peak():
    m, k, n = 64, 32, 48
    a, b = (
        torch.randint(-8, 8, (m, k), dtype=torch.int8),
        torch.randint(-8, 8, (k, n), dtype=torch.int8),
    )
    w = count_work(lambda: torch._int_mm(a, b))
    assert w.flops == 2 * m * k * n and w.precision_class == "int8"
    seconds = w.flops / 1e15  # 1 POP/s
    found = achieved(w, seconds, "NVIDIA H100 80GB HBM3")
    assert found.flop_segment() == "1 POP/s int8 = 51% of int8 tensor-core peak"  # 1979 TOP/s dense
