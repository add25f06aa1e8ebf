"""The two command lines: ``python -m gpumagic`` (a first run) and ``python -m gpumagic.kernels``
(explain names)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpumagic.__main__ import main


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-W", "error", *args], capture_output=True, text=True, timeout=120
    )


def test_help_describes_the_first_run_and_its_size():
    proc = run("-m", "gpumagic", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m gpumagic [-h] [N]")
    assert "matmul" in proc.stdout and "default 1024" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize("size", ["abc", "0", "-5", "1.5"])
def test_a_bad_size_is_a_clear_usage_error(size):
    proc = run("-m", "gpumagic", size)
    assert proc.returncode == 2
    assert (
        f"argument N: invalid size {size!r}: the matrix size must be a whole number of at least 1"
        in proc.stderr
    )
    assert "Traceback" not in proc.stderr


def test_a_small_first_run_times_a_matmul_and_a_tiny_op(capsys):
    assert main(["8"]) == 0
    out = capsys.readouterr().out
    assert "%gputime A @ A  (8x8 fp32 on " in out and "%gputime x + 1  (a tiny op)" in out
    assert out.count(" per call on ") == 2


def test_the_kernel_name_command_prints_no_warning():
    # runpy warns when the package imports the module it is asked to run as __main__ (the old
    # single-module layout)
    proc = run("-m", "gpumagic.kernels", "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "CUTLASS tensor-core TF32 GEMM" in proc.stdout
