"""The timing tests' shared fakes: a wall clock that moves only when told, a sampler that returns
scripted per-call times and advances that clock as the time passes, and ``run``: the measurement
driven by both (no GPU, no real time). The timing, compare and fault tests import them from here."""

from __future__ import annotations

import gc

from gpumagic.timing import Sampler, TimingOptions, measure
from gpumagic.timing.statement import compile_statement


class FakeClock:
    """The wall clock the measurement reads: ``now`` seconds, moved only by the fake samplers."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ScriptedSampler(Sampler):
    """Returns per-call times from ``per_call(i)`` for the i-th sample; advances the fake clock as
    time passes."""

    def __init__(
        self, clock: FakeClock, per_call, first: float = 0.2, kernel=None, host=None
    ) -> None:
        self.clock = clock
        self.per_call = per_call
        self.first = first
        self.kernel = kernel
        self.host = host
        self.device = "Fake GPU"
        self.backend = "cuda-events"
        self.i = 0
        self.enqueued = 0
        self.finished = False
        self.batches: list[int] = []
        self.gc_during_sampling: list[bool] = []

    def first_call(self, once):
        self.clock.now += self.first
        return self.first, once()

    def batch(self, inner, n):
        inner(n)
        self.batches.append(n)
        dt = self.per_call(0) * n
        self.clock.now += dt
        return dt, (self.host or self.per_call(0)) * n

    def enqueue(self, inner, k, m):
        inner(k * m)
        self.gc_during_sampling.append(gc.isenabled())
        out = []
        for _ in range(m):
            out.append(self.per_call(self.i) * k)
            self.i += 1
        self.enqueued += m
        return out

    def collect(self, handle):
        self.clock.now += sum(handle)
        return handle

    def salvage(self, handle):
        return handle

    def kernel_pass(self, inner, calls, preload=0):
        return None if self.kernel is None else (self.kernel, 1.0)

    def host_pass(self, inner, calls):
        return self.host if self.host is not None else self.per_call(0)

    def finish(self):
        self.finished = True


def run(per_call, options=None, stmt="pass", ns=None, **kw):
    """``stmt`` measured by a :class:`ScriptedSampler` of ``per_call`` (``kw`` go to the sampler) on
    a fresh fake clock; returns the result, the sampler and the clock."""
    clock = FakeClock()
    ns = {} if ns is None else ns
    sampler = ScriptedSampler(clock, per_call, **kw)
    result = measure(
        compile_statement(stmt, globals=ns),
        ns,
        options or TimingOptions(),
        sampler=sampler,
        wall_clock=clock,
    )
    return result, sampler, clock
