"""Several statements timed against each other: :func:`compare` ->
:class:`~.compare_result.Comparison`. No IPython.

Why interleaved: timed one after the other, the statement that runs second meets a GPU whose clock
has fallen under sustained load (or a machine whose other work has started), and the comparison
measures the clock as much as the statements. Here every statement gets its own first call and
calibration (``%gputime``'s own steps, :mod:`.staged`), then the samples are taken in rounds: one
sample of each statement per round, the order rotated by one each round, until every statement's
stop rule is met at once (or the time budget, ``time_budget`` per statement, ends). A clock that
moves then moves under all of them alike. The kernel pass, host pass and work count follow per
statement, and each statement has a :class:`~gpumagic.timing.result.TimingResult` built by the same
``assemble`` as ``%gputime``.

The price of interleaving on a GPU: each turn starts from a synchronized device (a statement's
sample must not span another's work), with a short ``_sleep`` backlog queued first so that its start
event does not wait on the host; that costs a few tens of µs per sample, against the ~1 ms a sample
lasts.
"""

from __future__ import annotations

import ast
import gc
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ..edges import TorchValue
from ..errors import GpuMagicError, InvalidOptionError, TimingInterrupted
from .compare_energy import energy_blocks
from .compare_result import Comparison
from .measure import MAX_BACKLOG
from .options import TimingOptions
from .samplers import Sampler
from .staged import Prepared, conclude, finish_quietly, prepare
from .statement import CompiledStatement, caller_globals, compile_statement
from .stats import StopDecision
from .steps import Sampling

__all__ = ["ComparisonFailed", "ComparisonInterrupted", "compare", "compare_compiled", "labelled"]

#: A statement as given: source text or a callable.
_S = TypeVar("_S")


class ComparisonInterrupted(TimingInterrupted[Comparison]):
    """Ctrl-C during a comparison: ``result`` is the partial :class:`~.compare_result.Comparison`
    (what was measured).

    A :class:`~gpumagic.errors.TimingInterrupted` (so a ``KeyboardInterrupt``): a front end that
    shows ``err.result`` and raises again handles it as it handles an interrupted ``%gputime``.
    """

    def __init__(self, result: Comparison) -> None:
        self.result = result
        n = sum(len(r.samples) for r in result.results.values())
        KeyboardInterrupt.__init__(
            self,
            f"comparison interrupted after {n} sample{'s' if n != 1 else ''}; "
            "the partial Comparison is this exception's .result",
        )


class ComparisonFailed(GpuMagicError):
    """One statement raised while the samples were taken: ``result`` is the partial
    :class:`~.compare_result.Comparison` (every statement's samples so far, the failed one's row
    saying why), ``label`` the statement, ``error`` its exception (this one's ``__cause__``).

    As :class:`ComparisonInterrupted` keeps what Ctrl-C stopped, so that a statement failing at its
    3,000th call does not lose the other statements' results; raised only once samples exist (an
    error in a first call or warm-up is the statement's own, as it was)."""

    result: Comparison
    label: str
    error: BaseException
    template = (
        "the statement labelled {label!r} raised {error_text} after {samples} of its samples; "
        "the partial Comparison (what was measured) is this exception's .result"
    )

    def __init__(self, result: Comparison, label: str, error: BaseException) -> None:
        samples = len(result.results[label].samples)
        super().__init__(
            result=result, label=label, error=error, error_text=said(error), samples=samples
        )


def said(error: BaseException) -> str:
    """An exception as one line: its type and message ("ValueError: boom")."""
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def labelled(stmts: Mapping[str, _S] | Sequence[_S]) -> dict[str, _S]:
    """The statements by label: a mapping as given; a list labelled by each statement's text (or
    function name)."""
    if isinstance(stmts, Mapping):
        out = {str(k): v for k, v in stmts.items()}
    elif isinstance(stmts, (list, tuple)):
        out = {}
        for s in stmts:
            label = s.strip() if isinstance(s, str) else getattr(s, "__name__", repr(s))
            out[label if label not in out else f"{label} ({len(out) + 1})"] = s
    else:
        raise TypeError(
            f"statements must be a mapping of label to statement (or a list), not "
            f"{type(stmts).__name__}"
        )
    if not out:
        raise InvalidOptionError(
            option="statements",
            value=stmts,
            reason="must hold at least one statement, e.g. {'fp32': 'A @ B'}",
        )
    return out


def _check_baseline(baseline: str | None, labels: Sequence[str]) -> str:
    if baseline is None:
        return labels[0]
    if baseline not in labels:
        names = ", ".join(repr(x) for x in labels)
        raise InvalidOptionError(
            option="baseline", value=baseline, reason=f"must be one of the labels ({names})"
        )
    return baseline


def compare(
    stmts: Mapping[str, str | Callable[[], object]] | Sequence[str | Callable[[], object]],
    setup: str | Callable[[], object] | None = None,
    globals: Mapping[str, object] | None = None,
    *,
    baseline: str | None = None,
    options: TimingOptions | None = None,
    ast_transform: Callable[[ast.Module], ast.Module] | None = None,
    **overrides: Any,  # Any: TimingOptions fields of several types (validate() checks them)
) -> Comparison:
    """Time several statements interleaved and compare them: ``compare({"fp32": "A @ B", "bf16": "Ah
    @ Bh"})``.

    ``stmts`` maps a label to a statement (source text or a zero-argument callable); ``setup`` runs
    once for each statement before it is timed, in ``globals`` (default: the caller's module
    globals), whose names the statements' own assignments leave untouched. ``baseline`` is the label
    the speed-ups are taken against (default: the first). Keyword ``overrides`` are
    :class:`TimingOptions` fields; ``time_budget`` is per statement.

    Ctrl-C once samples exist raises :class:`ComparisonInterrupted` whose ``result`` is the partial
    comparison; a statement that raises during the samples, :class:`ComparisonFailed` (from the
    statement's error) whose ``result`` is the partial comparison, its failed row saying why.
    """
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    opts = replace(options or TimingOptions(), **overrides)
    opts.validate()
    sources = labelled(stmts)
    _check_baseline(baseline, list(sources))
    namespace = caller_globals(globals)
    compiled = {}
    for label, stmt in sources.items():
        try:
            compiled[label] = compile_statement(stmt, setup, namespace, ast_transform=ast_transform)
        except Exception as exc:
            _note(exc, f"in the statement labelled {label!r}")
            raise
    return compare_compiled(compiled, namespace, opts, baseline=baseline)


def _note(exc: BaseException, text: str) -> None:
    if hasattr(exc, "add_note"):  # Python 3.11+
        exc.add_note(text)


@dataclass
class _Lane:
    """One statement's share of the rounds: its prepared clock and calibration, and the samples so
    far."""

    label: str
    prep: Prepared
    sampling: Sampling = field(default_factory=Sampling)
    measured: float = 0.0
    done: bool = False
    decision: StopDecision | None = None
    clock_start: int | None = None
    #: the sampler's handle of the round under way (CUDA events on the device's clock)
    in_flight: TorchValue = None
    #: what the statement raised during its samples (the rounds stopped there)
    error: Exception | None = None


def compare_compiled(
    statements: Mapping[str, CompiledStatement],
    namespace: Mapping[str, object] | None = None,
    options: TimingOptions | None = None,
    *,
    baseline: str | None = None,
    samplers: Mapping[str, Sampler] | None = None,
    wall_clock: Callable[[], float] = time.perf_counter,
) -> Comparison:
    """Time compiled statements interleaved. ``samplers`` overrides the clock per label (tests pass
    scripted ones)."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    opts = options or TimingOptions()
    opts.validate()
    labels = list(statements)
    if not labels:
        raise InvalidOptionError(
            option="statements", value={}, reason="must hold at least one statement"
        )
    base = _check_baseline(baseline, labels)
    namespace = namespace or {}
    lanes: list[_Lane] = []
    for label in labels:
        try:
            prep = prepare(
                statements[label],
                namespace,
                opts,
                sampler=(samplers or {}).get(label),
                wall_clock=wall_clock,
            )
        except KeyboardInterrupt:
            # nothing sampled yet: the plain interrupt, as measure() gives before its first sample
            raise
        except Exception as exc:
            _note(exc, f"in the statement labelled {label!r}")
            raise
        lanes.append(_Lane(label, prep))
    rounds, orders = interleave(lanes, opts, wall_clock)
    failed = next((lane for lane in lanes if lane.error is not None), None)
    interrupted = any(lane.sampling.interrupted for lane in lanes)
    if opts.energy and not interrupted and failed is None:
        energy_blocks(lanes, opts, wall_clock)
    results = {}
    for lane in lanes:
        if lane is failed:  # no more calls of it: its samples so far, no kernel or host pass
            lane.sampling.interrupted = True
        results[lane.label] = conclude(lane.prep, lane.sampling, wall_clock)
        results[lane.label].interrupted = lane.sampling.interrupted and lane is not failed
    comparison = Comparison(
        results=results, baseline=base, interrupted=interrupted, rounds=rounds, orders=orders
    )
    if failed is not None and failed.error is not None:
        err = failed.error
        if not any(r.samples for r in results.values()):
            raise err  # nothing measured: the statement's own error, as in a first call
        comparison.failed[failed.label] = said(err)
        raise ComparisonFailed(comparison, failed.label, err) from err
    if interrupted:
        raise ComparisonInterrupted(comparison)
    return comparison


def interleave(
    lanes: list[_Lane], opts: TimingOptions, wall_clock: Callable[[], float] = time.perf_counter
) -> tuple[int, list[list[str]]]:
    """Round-robin rounds of one sample per statement, the order rotated each round; (rounds, order
    of the first rounds). On Ctrl-C the samples taken are kept and every lane is marked interrupted;
    with none at all it propagates. The garbage collector is off while sampling, as in
    :func:`~gpumagic.timing.measure.sample`."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    gc_was_enabled = gc.isenabled()
    gc.disable()
    progress: list[int] = [0]
    orders: list[list[str]] = []
    try:
        for lane in lanes:
            lane.clock_start = lane.prep.sampler.sm_clock()
        try:
            _rounds(lanes, opts, wall_clock, orders, progress)
            for lane in lanes:
                sampler = lane.prep.sampler
                if lane.error is None:  # a failed lane's work was waited for quietly
                    sampler.finish()
                lane.sampling.sm_clock = (lane.clock_start, sampler.sm_clock())
                lane.sampling.clock_reasons = sampler.clock_reasons()
        except KeyboardInterrupt:
            _salvage(lanes)
            if not any(lane.sampling.samples for lane in lanes):
                raise
    finally:
        if gc_was_enabled:
            gc.enable()
    return progress[0], orders


#: Rounds whose order :func:`interleave` keeps (for the result, and to show that the order rotates).
KEPT_ORDERS = 8


def _rounds(
    lanes: list[_Lane],
    opts: TimingOptions,
    wall_clock: Callable[[], float],
    orders: list[list[str]],
    progress: list[int],
) -> None:
    """Rounds until every lane's stop rule is met at once, or the budget ends; ``progress[0]``
    counts them."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    budget = opts.time_budget * len(lanes)
    wall0 = wall_clock()
    n = len(lanes)
    while True:
        r = progress[0]
        turn = [lanes[(r + i) % n] for i in range(n)]
        turn = [
            lane
            for lane in turn
            if opts.samples is None or len(lane.sampling.samples) < opts.samples
        ]
        if len(orders) < KEPT_ORDERS:
            orders.append([lane.label for lane in turn])
        for lane in turn:
            try:
                _one_sample(lane, opts)
            except Exception as exc:  # noqa: BLE001 - the user's; raised again with the others kept
                _failed(lanes, lane, exc)
                return
        progress[0] = r + 1
        if all(lane.done for lane in lanes):
            return
        over = wall_clock() - wall0 > budget
        if over and all(len(lane.sampling.samples) >= opts.min_samples_on_budget for lane in lanes):
            for lane in lanes:
                if not lane.done and lane.decision is not None:
                    lane.sampling.stop_reason = (
                        f"time budget of {budget:g} s ({n} \u00d7 {opts.time_budget:g} s) ended "
                        f"({lane.decision.reason})"
                    )
                    lane.sampling.unsettled = lane.decision
            return


def _failed(lanes: list[_Lane], lane: _Lane, exc: Exception) -> None:
    """The statement of ``lane`` raised: its work issued is waited for, and every other lane's
    stop reason says why its samples ended early."""
    lane.error, lane.in_flight = exc, None
    finish_quietly(lane.prep.sampler)
    lane.sampling.stop_reason = f"raised {type(exc).__name__} during its samples"
    for other in lanes:
        if other is not lane:
            other.sampling.stop_reason = f"stopped early: {lane.label!r} raised"


def _one_sample(lane: _Lane, opts: TimingOptions) -> None:
    """One sample of the lane's statement from a fresh boundary, then its stop rule's verdict."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    prep, out = lane.prep, lane.sampling
    sampler, cal = prep.sampler, prep.cal
    k = cal.calls_per_sample
    # no energy reading here (it would delay the sample's work): --energy reads it over blocks of
    # each statement's own calls once the samples are taken (compare_energy.py)
    sampler.start(backlog=min(MAX_BACKLOG, 2 * k * cal.host_per_call))
    lane.in_flight = sampler.enqueue(prep.statement.inner, k, 1)
    durations = sampler.collect(lane.in_flight)
    lane.in_flight = None
    out.samples.extend(d / k for d in durations)
    out.clocks.extend([sampler.sm_clock()] * len(durations))
    lane.measured += sum(durations)
    if opts.samples is not None:
        out.stop_reason = f"{opts.samples} samples requested"
        lane.done = len(out.samples) >= opts.samples
        return
    lane.decision = prep.opts.stop_rule.decide(out.samples, lane.measured)
    out.stop_reason = lane.decision.reason
    lane.done = lane.decision.stop


def _salvage(lanes: list[_Lane]) -> None:
    """After Ctrl-C: wait for the work issued, keep the sample in flight where it completed, mark
    every lane."""
    for lane in lanes:
        finish_quietly(lane.prep.sampler)
        out = lane.sampling
        if lane.in_flight is not None:
            k = lane.prep.cal.calls_per_sample
            out.samples.extend(d / k for d in lane.prep.sampler.salvage(lane.in_flight))
            lane.in_flight = None
        out.clocks.extend([None] * (len(out.samples) - len(out.clocks)))
        out.interrupted = True
        out.stop_reason = "interrupted"
        out.sm_clock = (lane.clock_start, None)
