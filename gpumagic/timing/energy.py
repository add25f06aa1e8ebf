"""Energy per call from NVML's total-energy counter, read as each round of samples is collected.

Why: a GPU's board energy is what a Spark user's "tokens per joule" and a datacenter's power budget
are made of, and the counter (``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver
loaded) costs tens of microseconds to read. While ``%gputime`` samples, the statement runs back to
back with no host gap, so the board's mean power over that window times the per-call time is the
energy of one call (the board's idle share included: it is drawn while the call runs).

The counter advances in steps (the driver refreshes it every few to tens of milliseconds), so the
readings are merged into blocks of at least :data:`BLOCK_SECONDS` before a power is taken from each;
the spread of the block powers gives the interval. A counter that never moved, or too short a
window, gives no figure rather than a wrong one.

Why the first :data:`SETTLE_SECONDS` are left out where enough follows them: a board under a power
cap overshoots while its limiter reacts. On an H200 (bf16 8192^3 GEMMs, 5 fresh processes) windows
of 0.65-1 s read 644-747 W, and windows of 5 s read 692-693 W: the energy a user can repeat is the
steady state's. A window too short to leave :data:`MIN_BLOCKS` blocks after the settle keeps all of
it, and gives no interval below :data:`MIN_BLOCKS` blocks.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BLOCK_SECONDS",
    "SETTLE_SECONDS",
    "EnergySummary",
    "energy_known",
    "pieces_of",
    "summarize_energy",
]

#: Shortest stretch of sampling one block power is taken over (seconds): several of the counter's
#: refreshes, so that a block's reading error is a small part of it.
BLOCK_SECONDS = 0.5
#: Fewest blocks an interval is given for.
MIN_BLOCKS = 4
#: Sampling left out at the start, where :data:`MIN_BLOCKS` blocks follow it (seconds).
SETTLE_SECONDS = 1.0
#: Two-sided 95% Student t quantiles by degrees of freedom (then 1.96).
_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23}


@dataclass(frozen=True)
class EnergySummary:
    """Board energy while the samples ran: ``joules_per_call`` (mean power x the median per-call
    time), ``watts`` (mean power over ``seconds`` of sampling), ``rel_ci`` (the 95% interval of the
    mean power as a fraction of it, None with fewer than :data:`MIN_BLOCKS` blocks), ``blocks``
    and ``settle_s`` (the sampling left out at the start as the board settled)."""

    joules_per_call: float
    watts: float
    seconds: float
    blocks: int
    rel_ci: float | None
    settle_s: float = 0.0

    def segment(self, flops_per_call: float | None = None) -> str:
        """'1.14 J/call ± 1.2% at 668 W' (with '0.96 TFLOP/J' where the work was counted)."""
        from ..units import format_si

        text = f"{format_joules(self.joules_per_call)}/call"
        if self.rel_ci is not None:
            text += f" \u00b1 {self.rel_ci:.1%}"
        text += f" at {self.watts:.0f} W"
        if flops_per_call:
            text += f", {format_si(flops_per_call / self.joules_per_call, 'FLOP/J')}"
        return text


def format_joules(joules: float) -> str:
    """3 significant digits in J, mJ or µJ: 1.14 -> '1.14 J', 0.0023 -> '2.3 mJ'."""
    from ..units import micro_sign

    for scale, unit in ((1.0, "J"), (1e-3, "mJ"), (1e-6, micro_sign() + "J"), (1e-9, "nJ")):
        if abs(joules) >= scale:
            return f"{joules / scale:.3g} {unit}"
    return f"{joules:.3g} J"


def pieces_of(readings: Sequence[tuple[float, int | None]]) -> list[tuple[float, float]]:
    """(seconds, joules) between consecutive readings (wall seconds, counter in mJ) of
    back-to-back sampling; readings without a counter value are skipped."""
    points = [(t, e) for t, e in readings if e is not None]
    return [(t1 - t0, (e1 - e0) / 1000.0) for (t0, e0), (t1, e1) in itertools.pairwise(points)]


def summarize_energy(
    pieces: Sequence[tuple[float, float]], seconds_per_call: float
) -> EnergySummary | None:
    """The energy summary of ``pieces`` ((seconds, joules) of stretches in which the statement ran
    back to back: consecutive rounds, or one statement's blocks of an interleaved comparison);
    None where there are none or the counter did not move. The first :data:`SETTLE_SECONDS` are
    left out where :data:`MIN_BLOCKS` blocks follow them."""
    if not pieces or not seconds_per_call > 0:
        return None
    kept, settle = _settled(list(pieces))
    total_s = sum(p[0] for p in kept)
    total_j = sum(p[1] for p in kept)
    if total_s <= 0 or total_j <= 0:
        return None
    powers = _block_powers(kept)
    watts = total_j / total_s
    rel_ci = None
    if len(powers) >= MIN_BLOCKS:
        mean = sum(powers) / len(powers)
        sd = math.sqrt(sum((p - mean) ** 2 for p in powers) / (len(powers) - 1))
        t95 = _T95.get(len(powers) - 1, 1.96)
        rel_ci = t95 * sd / math.sqrt(len(powers)) / mean if mean > 0 else None
    return EnergySummary(
        joules_per_call=watts * seconds_per_call,
        watts=watts,
        seconds=total_s,
        blocks=len(powers),
        rel_ci=rel_ci,
        settle_s=settle,
    )


def _block_powers(pieces: Sequence[tuple[float, float]]) -> list[float]:
    """The mean power of each run of pieces lasting at least :data:`BLOCK_SECONDS`."""
    powers: list[float] = []
    block_s = block_j = 0.0
    for seconds, joules in pieces:
        block_s, block_j = block_s + seconds, block_j + joules
        if block_s >= BLOCK_SECONDS * (1 - 1e-9) and block_j > 0:
            powers.append(block_j / block_s)
            block_s = block_j = 0.0
    return powers


def _settled(pieces: list[tuple[float, float]]) -> tuple[list[tuple[float, float]], float]:
    """The pieces after the first :data:`SETTLE_SECONDS` and the seconds left out; all of them
    where too few blocks would follow."""
    elapsed = 0.0
    for i, (seconds, _) in enumerate(pieces):
        if elapsed >= SETTLE_SECONDS:
            rest = pieces[i:]
            if len(_block_powers(rest)) >= MIN_BLOCKS:
                return rest, elapsed
            break
        elapsed += seconds
    return pieces, 0.0


def energy_known(pieces: Sequence[tuple[float, float]], tolerance: float) -> bool:
    """Whether the mean power of ``pieces`` is known to ``tolerance`` (its 95% interval)."""
    found = summarize_energy(pieces, 1.0)
    return found is not None and found.rel_ci is not None and found.rel_ci <= tolerance
