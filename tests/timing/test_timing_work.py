"""FLOP/s, bandwidth and % of peak on the %gputime line: the work counted once per call, the rate at
the median."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import gpumagic
from gpumagic.gpu_activity import profiler_start as warmup
from gpumagic.timing import TimingResult
from gpumagic.timing.work import Work

H100 = "NVIDIA H100 80GB HBM3"


def result(
    median: float, work: Work | None, device: str = H100, backend: str = "cuda-events"
) -> TimingResult:
    return TimingResult(
        samples=[median] * 5, calls_per_sample=1, device=device, backend=backend, work=work
    )


def test_the_line_gives_the_rate_at_the_median_and_its_share_of_the_datasheet_peak():
    n = 4096
    r = result(2.65e-3, Work(flops=2 * n**3, bytes=3 * n * n * 4, precision_class="fp32"))
    found = r.achieved
    assert found.flop_rate == pytest.approx(2 * n**3 / 2.65e-3)
    share = found.flop_rate / found.flop_peak
    assert f"{found.flop_rate / 1e12:.1f} TFLOP/s fp32 = {share:.0%} of FFMA peak" in r.line()
    assert r.summary()["flop_rate"] == pytest.approx(found.flop_rate)
    assert r.summary()["device"] == H100  # the rate's own fields do not overwrite the result's


def test_a_memory_bound_call_shows_its_bandwidth_share_instead():
    n = 1 << 26
    r = result(270e-6, Work(flops=0, bytes=3 * n * 4, precision_class=None))
    found = r.achieved
    assert found.byte_rate == pytest.approx(3 * n * 4 / 270e-6)
    assert "TB/s" in r.line() and "HBM" in r.line() and "TFLOP/s" not in r.line()
    assert r.summary()["limiter"] == found.limiter()


def test_uncounted_work_says_why_and_adds_no_rate():
    r = result(1e-3, Work(flops=None, bytes=None, note="a custom op has no fake kernel"))
    assert r.achieved is None and "FLOP/s" not in r.line()
    assert any("a custom op has no fake kernel" in w for w in r.warnings())
    assert r.summary()["flop_rate"] is None


def test_gputime_counts_a_matmul_once_per_call_on_the_cpu():
    n = 256
    a = torch.randn(n, n)
    r = gpumagic.gputime("a @ a", globals={"a": a}, time_budget=0.2)
    assert r.work.flops == 2 * n**3
    assert r.summary()["flop_rate"] == pytest.approx(2 * n**3 / r.median)
    assert "GFLOP/s fp32" in r.line() or "TFLOP/s fp32" in r.line()
    assert "peak" not in r.line()  # no datasheet for a CPU: a rate without a share


def test_work_counting_can_be_turned_off():
    a = torch.randn(64, 64)
    r = gpumagic.gputime("a + a", globals={"a": a}, time_budget=0.1, work=False)
    assert r.work is None and "B/s" not in r.line()


def test_a_profiler_capture_marks_the_one_time_start_paid(monkeypatch):
    monkeypatch.setitem(warmup._STATE, "warm", False)
    assert warmup.profiler_state() == "cold"
    warmup.mark_started()
    assert warmup.profiler_state() == "ready"


def test_counting_in_a_fresh_process_does_not_import_dynamo():
    # torch wraps dispatch modes in "dynamo disabled", whose first use imports torch._dynamo (1-5
    # s): the first %gputime of a process would pay it for a figure that needs none of it.
    code = (
        "import sys, torch\n"
        "from gpumagic.timing.work import count_work\n"
        "a = torch.randn(32, 32)\n"
        "w = count_work(lambda: a @ a)\n"
        "print(w.flops, 'torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == [str(2 * 32**3), "False"]
