"""Energy per call for ``--compare --energy``: each statement run back to back in blocks, in turns.

Why not read NVML's energy counter inside the interleaved samples, as ``%gputime`` reads it between
its rounds: a comparison's samples alternate statements, so no stretch between two readings belongs
to one statement, and reading the counter at every sample's start delays that sample's work (an
H200's bf16 8192^3 GEMM read 5.4 ms against 1.5 ms alone). So once the interleaved samples are
taken, each statement gets blocks of its own: as many calls as fill :data:`~.energy.BLOCK_SECONDS`
at its measured median, the counter read at the block's two ends (the device synchronized by the
collect). The turns rotate, as the samples' rounds do, so that a board that warms up meets every
statement alike; they stop once each statement's power is known to ``energy_tolerance``, or after
``energy_time`` seconds per statement. The blocks' durations are not samples: the timing is the
interleaved rounds'.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from .energy import BLOCK_SECONDS, energy_known, pieces_of
from .measure import MAX_BACKLOG
from .options import TimingOptions
from .steps import Prepared, Sampling

__all__ = ["energy_blocks"]


class EnergyLane(Protocol):
    """What the blocks read and fill of a comparison's lane (``compare._Lane``, named here as a
    protocol since that module imports this one): its prepared clock, statement and calibration,
    and its samples so far."""

    prep: Prepared
    sampling: Sampling


def energy_blocks(
    lanes: Sequence[EnergyLane],
    opts: TimingOptions,
    wall_clock: Callable[[], float] = time.perf_counter,
) -> None:
    """Fill each lane's ``sampling.energy`` (and ``energy_counter``) from blocks of its own calls.
    ``lanes``: the comparison's, each with ``prep`` (sampler, statement, calibration) and
    ``sampling`` (its samples taken). A Ctrl-C here marks every lane interrupted; the samples stay.
    """
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    active = []
    for lane in lanes:
        lane.sampling.energy_counter = lane.prep.sampler.energy_counter()
        if lane.sampling.energy_counter and lane.sampling.samples:
            active.append(lane)
    if not active:
        return
    deadline = wall_clock() + opts.energy_time * len(active)
    turn = 0
    try:
        while True:
            for i in range(len(active)):
                _block(active[(turn + i) % len(active)], wall_clock)
            turn += 1
            known = all(energy_known(x.sampling.energy, opts.energy_tolerance) for x in active)
            if known or wall_clock() > deadline:
                break
    except KeyboardInterrupt:
        from .staged import finish_quietly

        for lane in lanes:
            finish_quietly(lane.prep.sampler)
            lane.sampling.interrupted = True
            lane.sampling.stop_reason = "interrupted while reading the energy"
        return
    for lane in active:
        ok = energy_known(lane.sampling.energy, opts.energy_tolerance)
        lane.sampling.stop_reason += (
            f"; energy known to {opts.energy_tolerance:.0%}"
            if ok
            else f"; energy not known to {opts.energy_tolerance:.0%} in {opts.energy_time:g} s"
        )


def calls_per_block(median: float, calls_per_sample: int) -> int:
    """Samples of ``calls_per_sample`` calls that fill one block at ``median`` seconds a call."""
    per_sample = max(median * calls_per_sample, 1e-9)
    return max(1, math.ceil(BLOCK_SECONDS / per_sample))


def _block(lane: EnergyLane, wall_clock: Callable[[], float]) -> None:
    """One block of the lane's statement back to back, the counter read at both ends."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    prep = lane.prep
    sampler, cal = prep.sampler, prep.cal
    k = cal.calls_per_sample
    samples = sorted(lane.sampling.samples)
    m = calls_per_block(samples[len(samples) // 2], k)
    sampler.start(backlog=min(MAX_BACKLOG, 2 * k * cal.host_per_call))
    before = (wall_clock(), sampler.energy_mj())
    sampler.collect(sampler.enqueue(prep.statement.inner, k, m))
    after = (wall_clock(), sampler.energy_mj())
    lane.sampling.energy.extend(pieces_of([before, after]))
