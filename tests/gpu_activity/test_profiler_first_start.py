"""gpumagic's own torch.profiler start does not import Inductor; everything else in torch sees what
it saw before.

torch.profiler's ``prepare_trace`` asks ``hasattr(torch, "_inductor")``, which imports Inductor,
dynamo and sympy: seconds of every first capture in a process
(``benchmarks/kineto_first_start.py``). Each test runs in a fresh process, the only place a first
start can be seen.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")


def run(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return out.stdout.split()


def test_a_capture_starts_the_profiler_without_importing_inductor_and_puts_torch_back():
    words = run(
        """
        import sys, torch
        from gpumagic.capture.torch.backend import capture
        c = capture("torch.ones(3) + 1", "cell:x", warmup=1, namespace={"torch": torch})
        ops = set(c.trace.ops["name"])
        lazy = torch._lazy_modules
        print("torch._inductor" in sys.modules, "_inductor" in lazy, "aten::add" in ops)
        print(hasattr(torch, "_inductor"), "torch._inductor" in sys.modules)
        """
    )
    # the capture recorded the cell, Inductor stayed unloaded, torch's lazy table is whole again
    assert words[:3] == ["False", "True", "True"]
    # and torch's own lazy import of Inductor works as before
    assert words[3:] == ["True", "True"]


def test_the_users_own_profiler_is_left_as_torch_made_it():
    words = run(
        """
        import sys, torch
        from torch.profiler import profile, ProfilerActivity
        from gpumagic.capture.torch.backend import capture
        capture("torch.ones(3) + 1", "cell:x", warmup=0, namespace={"torch": torch})
        with profile(activities=[ProfilerActivity.CPU]):
            torch.ones(3) + 1
        print("torch._inductor" in sys.modules)
        """
    )
    assert words == [
        "True"
    ]  # torch.profiler's own start still reads Inductor's settings, as torch wrote it


def test_the_deferral_changes_nothing_where_inductor_is_loaded():
    words = run(
        """
        import sys, torch, torch._inductor
        from gpumagic.gpu_activity.profiler_start import inductor_import_deferred
        with inductor_import_deferred():
            print(hasattr(torch, "_inductor"), "_inductor" in torch._lazy_modules)
        """
    )
    assert words == ["True", "True"]
