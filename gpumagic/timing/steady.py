"""``steady=True`` (``%gputime --steady``): run the statement until the GPU's clock has settled,
then sample.

Why: under sustained fp16/bf16 matmuls an H100 at its power cap lowers its SM clock from 1980 MHz to
1065-1470 MHz over the first second or so, and two default runs a second apart read 1.69 ms and 1.64
ms (3 % apart). Neither is wrong, but neither is repeatable. The settled state is: the GPU as it
runs the statement for long, and the one a training loop sees. So before sampling, the statement
runs back to back in batches of ``STEADY_BATCH`` of device time; the GPU has settled once, after
``steady_min_time``, the per-call times of the last ``STEADY_WINDOW`` batches lie within
``steady_tolerance`` of each other, their median no longer moves from the window before, and the SM
clock (where NVML reports it) no longer trends. It gives up after ``steady_time`` seconds, and the
result says so.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from . import stats
from .options import TimingOptions
from .samplers import Sampler
from .steps import Steadiness

__all__ = ["settle", "window_settled"]

#: Seconds of device work per batch: long enough to average over the clock's own dithering under a
#: power cap.
STEADY_BATCH = 0.05
#: Batches that must agree (0.3 s of device work at ``STEADY_BATCH``).
STEADY_WINDOW = 6
#: The SM clock trends when the medians of its readings in the last two windows differ more than
#: this.
CLOCK_TREND = 0.02


def window_settled(
    per_call: list[float], clocks: list[int | None], tolerance: float
) -> tuple[bool, float, str]:
    """Whether the batch per-call times (and clock readings) of the last two windows say the GPU has
    settled; the spread of the last window; and the test still unmet ("batches", "spread", "drift",
    "clock"; "" when settled).

    Settled: the last ``STEADY_WINDOW`` per-call times lie within ``tolerance`` of each other ((max
    - min) / median, the spread), and their median has moved less than half of ``tolerance`` from
    the window before it (a slow drift passes the first test window by window). The clock, where
    read in every batch, must not trend either: its readings dither under a power cap, so the two
    windows' medians are compared rather than the extremes.
    """
    if len(per_call) < 2 * STEADY_WINDOW:
        return False, math.inf, "batches"
    last, before = per_call[-STEADY_WINDOW:], per_call[-2 * STEADY_WINDOW : -STEADY_WINDOW]
    med = stats.median(last)
    if med <= 0:
        return True, 0.0, ""
    spread = (max(last) - min(last)) / med
    if spread > tolerance:
        return False, spread, "spread"
    if abs(med - stats.median(before)) / med > tolerance / 2:
        return False, spread, "drift"
    read = [c for c in clocks if c]  # every batch's clock, where each was read (and not 0)
    if len(read) == len(clocks) and len(clocks) >= 2 * STEADY_WINDOW:
        now = stats.median(read[-STEADY_WINDOW:])
        then = stats.median(read[-2 * STEADY_WINDOW : -STEADY_WINDOW])
        if abs(now - then) / max(now, then) > CLOCK_TREND:
            return False, spread, "clock"
    return True, spread, ""


def settle(
    sampler: Sampler,
    inner: Callable[[int], None],
    opts: TimingOptions,
    per_call: float,
    wall_clock: Callable[[], float] = time.perf_counter,
) -> Steadiness:
    """Run batches of back-to-back calls until :func:`window_settled` holds (after
    ``steady_min_time``) or ``steady_time`` seconds have passed; ``per_call`` is the first estimate
    (from the first call)."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    n = max(1, math.ceil(STEADY_BATCH / max(per_call, 1e-9)))
    times: deque[float] = deque(maxlen=2 * STEADY_WINDOW)
    clocks: deque[int | None] = deque(maxlen=2 * STEADY_WINDOW)
    clock0 = sampler.sm_clock()
    t0 = wall_clock()
    while True:
        dt, _ = sampler.batch(inner, n)
        times.append(dt / n)
        clocks.append(sampler.sm_clock())
        elapsed = wall_clock() - t0
        settled, spread, unmet = window_settled(list(times), list(clocks), opts.steady_tolerance)
        if (settled and elapsed >= opts.steady_min_time) or elapsed >= opts.steady_time:
            return Steadiness(
                seconds=elapsed,
                settled=settled,
                per_call=stats.median(list(times)[-STEADY_WINDOW:]),
                spread=spread,
                clock=(clock0, clocks[-1]),
                unmet=unmet,
            )
        if dt > 0:  # keep each batch near STEADY_BATCH as the per-call time moves
            n = max(1, math.ceil(STEADY_BATCH / max(dt / n, 1e-9)))
