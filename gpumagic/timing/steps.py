"""What the steps of a measurement hand each other (:mod:`.measure`): the notes gathered on the way,
what warm-up learnt, the samples and how sampling ended, and the kernel pass's figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import Hint
from .stats import StopDecision

if TYPE_CHECKING:
    from .options import TimingOptions
    from .samplers import Sampler
    from .statement import CompiledStatement

__all__ = ["Calibration", "KernelFigures", "Notes", "Prepared", "Sampling", "Steadiness"]


@dataclass
class Notes:
    """The sentences a result carries, in the order they arose, and the settings (hints) they
    advise."""

    lines: list[str] = field(default_factory=list)
    hints: list[Hint] = field(default_factory=list)

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def advise(self, line: str, hint: Hint) -> None:
        """Add a note that advises a setting; ``line`` spells it as ``hint.script()`` so a front end
        can respell it."""
        assert hint.script() in line, (hint, line)
        self.lines.append(line)
        if hint not in self.hints:
            self.hints.append(hint)


@dataclass(frozen=True)
class Calibration:
    """What warm-up learnt: seconds per call (device clock) and to issue a call (host), and the
    calls per sample."""

    per_call: float
    host_per_call: float
    calls_per_sample: int


@dataclass
class Sampling:
    """The samples (per-call seconds, one per sample) and how sampling ended."""

    samples: list[float] = field(default_factory=list)
    stop_reason: str = ""
    interrupted: bool = False
    #: the stop rule's verdict when the time budget ended before the rule was met
    unsettled: StopDecision | None = None
    #: SM clock (MHz) before and after sampling, where the device reports it
    sm_clock: tuple[int | None, int | None] = (None, None)
    #: SM clock (MHz) read when each sample's round was collected, one per sample (None where
    #: unread)
    clocks: list[int | None] = field(default_factory=list)
    #: NVML clock-event reason bits read at the end of sampling (power cap, thermal), where reported
    clock_reasons: int | None = None
    #: (seconds, joules) of each stretch the statement ran in back to back, from NVML's energy
    #: counter read as rounds were collected (``energy.py``)
    energy: list[tuple[float, float]] = field(default_factory=list)
    #: whether the device has an energy counter (None: NVML does not see it)
    energy_counter: bool | None = None


@dataclass(frozen=True)
class KernelFigures:
    """GPU busy seconds per call and GPU activities per call, from the profiler; None where it saw
    nothing.

    ``clock``: the SM clock (MHz) the pass ran at, where the device reports it.
    """

    kernel_time: float | None = None
    kernels_per_call: float | None = None
    #: SM clock (MHz) while the pass ran, where the device reports it
    clock: int | None = None


@dataclass(frozen=True)
class Steadiness:
    """What ``steady`` warm-up did: seconds spent, whether the per-call time settled, the per-call
    time of the last batches and their spread (fraction), the SM clock at its start and end (MHz,
    where reported), and the test that was still unmet when it gave up (``unmet``: "spread",
    "drift", "clock" or "batches"; "" when settled)."""

    seconds: float
    settled: bool
    per_call: float
    spread: float
    clock: tuple[int | None, int | None] = (None, None)
    unmet: str = ""


@dataclass
class Prepared:
    """A statement ready to sample: its clock, the options that clock honours, the first call, the
    calibration, and the notes and wall-clock start of its measurement."""

    statement: CompiledStatement
    sampler: Sampler
    opts: TimingOptions
    first_call: float
    cal: Calibration
    notes: Notes
    steadiness: Steadiness | None
    wall0: float
