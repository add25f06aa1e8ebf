"""A fault a user found in torch.profiler's one-time start (the fallback's when CUPTI cannot be used
directly): it runs once per process and keeps its seconds, and a start that failed leaves the
process unstarted."""

from __future__ import annotations

import pytest


@pytest.fixture
def fresh_warmup(monkeypatch):
    from gpumagic.gpu_activity import profiler_start as warmup

    monkeypatch.setattr(warmup, "_STATE", {"warm": False, "startup": None})
    return warmup


def test_the_start_runs_once_per_process_and_keeps_its_seconds(fresh_warmup):
    warmup = fresh_warmup
    ran = []
    assert warmup.profiler_state() == "cold"
    seconds = warmup.warm_profiler("cuda:0", capture=ran.append)
    assert ran == ["cuda:0"] and seconds is not None and seconds >= 0
    assert warmup.profiler_state() == "ready"
    assert warmup.warm_profiler("cuda:0", capture=ran.append) is None  # paid once per process
    assert ran == ["cuda:0"]


def test_a_failed_start_propagates_and_leaves_the_process_unstarted(fresh_warmup):
    warmup = fresh_warmup

    def capture(device):
        raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")

    with pytest.raises(RuntimeError, match="MULTIPLE_SUBSCRIBERS"):
        warmup.warm_profiler("cuda:0", capture=capture)
    assert warmup.profiler_state() == "cold"
