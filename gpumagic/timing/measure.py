"""The measurement's steps: the engine behind ``%gputime``. No IPython import.

Each step is a function here, tested with a scripted sampler and a fake wall clock; :mod:`.staged`
strings them together (:func:`~.staged.measure` for one statement, :func:`~.staged.prepare` /
:func:`~.staged.conclude` around the samples of a comparison or a sweep point). The reasons come
from the shared research on NVBench, do_bench, torch's Timer and %timeit:

1. :func:`run_first_call`: once, cold. Lazy CUDA init, cuBLAS heuristics and JIT land here (189 ms
   cold vs 3.7 ms warm for a 4096² fp32 matmul on a GB10), so it is kept apart and reported when far
   above the steady state.
2. :func:`settle_clocks` (``steady`` only): run until the GPU's clock has settled (:mod:`.steady`).
   :func:`calibrate`: warm up (:func:`warm_up`), then choose calls per sample so that a sample lasts
   about 1 ms (:func:`calls_per_sample`): the CUDA event quantum (~0.5 µs) is then 0.05 %.
3. :func:`sample`: double-buffered rounds of back-to-back samples until
   :class:`~gpumagic.timing.stats.StopRule` says the median is stable or the time budget ends; an
   interrupt keeps what was measured, and ``measure`` raises it again carrying the partial result
   (:class:`~gpumagic.errors.TimingInterrupted`). The SM clock is read (NVML) as each round ends, so
   the result can say at which clock the median was taken.
4. :func:`~.passes.kernel_pass`: GPU busy time per call from a short CUPTI pass (``kernel_time``),
   left out while the profiler's one-time start has not happened and the samples answer without it
   (:mod:`.passes`).
5. :func:`~.passes.host_pass`: the time to *issue* a call. GPU mostly idle and host time close to
   the per-call time means launch-bound, and the line says so.
6. :func:`assemble`: the closing notes and the :class:`TimingResult`.

Without CUDA (or with the statement's tensors on the CPU, or ``cpu=True``) the same steps run on the
host clock. The core speaks to scripts: a note that advises a setting spells it as a
:class:`TimingOptions` keyword (``time_budget=2``) and lists its :class:`~gpumagic.errors.Hint` in
``TimingResult.hints``, for the magics layer to respell as notebook advice.
"""

from __future__ import annotations

import gc
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..errors import Hint
from .clocks import confirm_clock
from .energy import energy_known, pieces_of
from .options import TimingOptions
from .passes import SKIP_KERNEL_PASS, TINY, host_pass, kernel_pass
from .result import TimingResult
from .samplers import Sampler
from .statement import CompiledStatement
from .steady import settle
from .steps import Calibration, KernelFigures, Notes, Prepared, Sampling, Steadiness
from .work import Work

__all__ = [
    "assemble",
    "calibrate",
    "run_first_call",
    "sample",
    "settle_clocks",
]  # the steps, for .staged and tests
__all__ += ["SKIP_KERNEL_PASS", "host_pass", "kernel_pass"]  # the passes live in .passes

#: The settings the notes advise, each written once (the magics layer respells them as ``%config``
#: lines).
LONGER_RUN = Hint("time_budget", "2")
STEADY = Hint("steady", "True")

# Fixed parts of the method rather than options: changing one is a change to the method, not a
# user's choice.
#: Seconds of device work queued ahead of the first sample at most (the ``_sleep`` backlog).
MAX_BACKLOG = 0.02
#: Samples per round at most: a round is collected, and the stop rule consulted, as a whole.
MAX_ROUND = 64


def run_first_call(
    statement: CompiledStatement,
    sampler: Sampler,
    opts: TimingOptions,
    namespace_values: Sequence[object],
    notes: Notes,
) -> tuple[float, Sampler, TimingOptions]:
    """Run the statement once, cold; return (its seconds, the clock to use, the options that clock
    can honour).

    The first call is where lazy initialisation lands, so it is kept apart from the samples. Its
    value settles the clock when the namespace did not (a statement that returns CPU tensors is a
    CPU statement), and options the clock cannot honour (``graph``, ``flush_l2`` on the host clock)
    are dropped with a note instead of failing.
    """
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    seconds, value = sampler.first_call(statement.once)
    sampler, why = confirm_clock(sampler, value, namespace_values, opts)
    notes.add(*why)
    cause = f" ({sampler.reason})" if sampler.reason else ""
    if opts.graph and not sampler.supports_graph:
        notes.add(f"--graph needs CUDA{cause}: timed on the host clock without a graph.")
    if opts.flush_l2 and not sampler.supports_flush_l2:
        notes.add(f"--flush-l2 needs CUDA{cause}: ignored.")
    opts = replace(
        opts,
        graph=opts.graph and sampler.supports_graph,
        flush_l2=opts.flush_l2 and sampler.supports_flush_l2,
    )
    return seconds, sampler, opts


def warm_up(
    sampler: Sampler, inner: Callable[[int], None], opts: TimingOptions, first_call: float
) -> tuple[float, float]:
    """Warm up; return (seconds per call, host seconds per call) estimated from the last batch.

    Batches double so that a slow statement is not run far past the warm-up time and a fast one does
    not pay a clock read per call; ``warmup_calls`` (``-w``) fixes the count instead, and 0 reuses
    the first call's time.
    """
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    if opts.warmup_calls == 0:
        return first_call, first_call
    per_call, host_per_call = first_call, first_call
    done, measured, n = 0, 0.0, 1
    wall0 = time.perf_counter()
    while True:
        if opts.warmup_calls is not None:
            n = min(n, opts.warmup_calls - done)
        dt, host = sampler.batch(inner, n)
        done += n
        measured += dt
        per_call, host_per_call = dt / n, host / n
        if opts.warmup_calls is not None:
            if done >= opts.warmup_calls:
                break
        elif (
            done >= opts.min_warmup_calls and measured >= opts.warmup_time
        ) or time.perf_counter() - wall0 > opts.warmup_wall_cap:
            break
        # Double, but do not overshoot the warm-up time by more than the current batch.
        remaining = max(opts.warmup_time - measured, 0.0)
        n = max(1, min(n * 2, math.ceil(remaining / per_call) if per_call > 0 else n * 2))
    return per_call, host_per_call


def calls_per_sample(opts: TimingOptions, per_call: float) -> int:
    """Calls per sample: enough for ``target_sample_time`` (the event quantum is then negligible),
    or as fixed.

    With ``flush_l2`` every call is timed alone, since the flush must sit between calls, outside the
    timed window.
    """
    if opts.flush_l2:
        return 1
    if opts.calls_per_sample is not None:
        return opts.calls_per_sample
    wanted = math.ceil(opts.target_sample_time / max(per_call, TINY) - 1e-6)
    return int(min(opts.max_calls_per_sample, max(1, wanted)))


def calibrate(
    sampler: Sampler,
    inner: Callable[[int], None],
    opts: TimingOptions,
    first_call: float,
    notes: Notes,
) -> Calibration:
    """Warm up, choose the calls per sample, and let the sampler prepare for them (flush buffer,
    graph capture)."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    per_call, host_per_call = warm_up(sampler, inner, opts, first_call)
    k = calls_per_sample(opts, per_call)
    notes.add(*sampler.prepare(inner, k))
    return Calibration(per_call=per_call, host_per_call=host_per_call, calls_per_sample=k)


def settle_clocks(
    sampler: Sampler,
    inner: Callable[[int], None],
    opts: TimingOptions,
    first_call: float,
    notes: Notes,
    wall_clock: Callable[[], float] = time.perf_counter,
) -> Steadiness | None:
    """With ``steady``: run until the GPU's clock has settled
    (:func:`~gpumagic.timing.steady.settle`), else None."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    if not opts.steady:
        return None
    if not sampler.on_device:
        notes.add(
            "--steady waits for a GPU's clock to settle: on the host clock it has nothing to "
            "wait for."
        )
        return None
    found = settle(sampler, inner, opts, first_call, wall_clock)
    if not found.settled:
        why = {
            "spread": f"the last batches spread {found.spread:.1%}, more than "
            f"{opts.steady_tolerance:.1%}",
            "drift": f"it still drifted more than {opts.steady_tolerance / 2:.2%} from one "
            f"0.3 s window to the next",
            "clock": "the SM clock still moved from one 0.3 s window to the next",
            "batches": "too few batches ran",
        }.get(found.unmet, found.unmet)
        notes.add(
            f"--steady: the per-call time had not settled after {found.seconds:.1f} s "
            f"({why}): the GPU's clock or "
            "its other work still moves it."
        )
    return found


def round_size(opts: TimingOptions, cal: Calibration) -> int:
    """Samples per round: about ``round_time`` of device work, so the host can enqueue one while the
    GPU runs one."""
    per_round = max(
        1,
        min(MAX_ROUND, math.ceil(opts.round_time / max(cal.calls_per_sample * cal.per_call, TINY))),
    )
    return per_round if opts.samples is None else min(per_round, opts.samples)


def _finish_quietly(sampler: Sampler) -> None:
    """Wait for the device work already issued, after an interrupt: an error there must not hide the
    interrupt."""
    try:
        sampler.finish()
    except Exception:  # noqa: BLE001 - the interrupt is what the user needs to see
        pass


def sample(
    sampler: Sampler,
    inner: Callable[[int], None],
    opts: TimingOptions,
    cal: Calibration,
    wall_clock: Callable[[], float] = time.perf_counter,
) -> Sampling:
    """Take samples until the stop rule or the time budget says enough; keep what was measured on an
    interrupt.

    Samples run on the current stream with shared boundary events (no gap between samples), enqueued
    in rounds and double-buffered: the host enqueues round r+1 before it waits for round r, so the
    GPU never waits on the host unless the host really is slower (launch-bound, which is then what
    the samples say). A short ``_sleep`` backlog is queued first so that the first start event does
    not wait on the host either. No flush, no sync, no Python work between calls: the same
    back-to-back, hot-cache regime as the CUPTI kernel-busy truth.

    The garbage collector is off while sampling (a collection inside a sample is a host stall the
    statement does not cause) and restored after, whatever happens. On ``KeyboardInterrupt`` the
    device work already issued is waited for and the rounds that completed are kept; with nothing
    measured at all the interrupt propagates.
    """
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    out = Sampling()
    # issued and not yet collected, the one being collected first (Any: each clock's own handle)
    rounds: deque[Any] = deque()
    k = cal.calls_per_sample
    clock_start = sampler.sm_clock()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        _sample_rounds(sampler, inner, opts, cal, wall_clock, out, rounds)
        sampler.finish()
        out.sm_clock = (clock_start, sampler.sm_clock())
        out.clock_reasons = sampler.clock_reasons()
    except KeyboardInterrupt:
        out.interrupted = True
        out.stop_reason = "interrupted"
        out.sm_clock = (clock_start, None)
        _finish_quietly(sampler)
        for handle in rounds:
            out.samples.extend(d / k for d in sampler.salvage(handle))
        out.clocks.extend([None] * (len(out.samples) - len(out.clocks)))
        if not out.samples:
            raise
    finally:
        if gc_was_enabled:
            gc.enable()
    return out


def _sample_rounds(
    sampler: Sampler,
    inner: Callable[[int], None],
    opts: TimingOptions,
    cal: Calibration,
    wall_clock: Callable[[], float],
    out: Sampling,
    rounds: deque[Any],  # Any: each clock's own round handle
) -> None:
    """The double-buffered rounds: enqueue the next round, then collect the oldest, then ask whether
    to stop.

    Once stopping, no new round is issued and the one in flight is still collected (its samples are
    good). A round leaves ``rounds`` only once collected, so that an interrupt inside
    :meth:`Sampler.collect` can salvage it.
    """
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    k = cal.calls_per_sample
    per_round = round_size(opts, cal)
    measured = 0.0
    # Queue ahead of the first start event about the time the host needs to issue two rounds.
    sampler.start(backlog=min(MAX_BACKLOG, 2 * per_round * k * cal.host_per_call))
    sample_wall0 = wall_clock()
    rounds.append(sampler.enqueue(inner, k, per_round))
    out.energy_counter = sampler.energy_counter()
    last_energy: tuple[float, int | None] | None = None  # from the first collect on: the
    # stretch before it holds the backlog's sleep, not the statement
    issued = per_round
    stopping = False
    while rounds:
        if not stopping and len(rounds) < 2 and (opts.samples is None or issued < opts.samples):
            m = per_round if opts.samples is None else min(per_round, opts.samples - issued)
            rounds.append(sampler.enqueue(inner, k, m))
            issued += m
        durations = sampler.collect(rounds[0])
        rounds.popleft()
        out.samples.extend(d / k for d in durations)
        out.clocks.extend(
            [sampler.sm_clock()] * len(durations)
        )  # the clock as this round ends: NVML, ~10 µs
        if out.energy_counter:
            reading = (wall_clock(), sampler.energy_mj())
            if last_energy is not None and reading[1] is not None:
                out.energy.extend(pieces_of([last_energy, reading]))
            last_energy = reading if reading[1] is not None else last_energy
        measured += sum(durations)
        if stopping:
            continue
        if opts.samples is not None:
            out.stop_reason = f"{opts.samples} samples requested"
            stopping = issued >= opts.samples
            continue
        decision = opts.stop_rule.decide(out.samples, measured)
        out.stop_reason = decision.reason
        if decision.stop and opts.energy and out.energy_counter:
            known = energy_known(out.energy, opts.energy_tolerance)
            if not known and wall_clock() - sample_wall0 < opts.energy_time:
                continue  # the median is stable; the energy is not known yet
            out.stop_reason += (
                f"; energy known to {opts.energy_tolerance:.0%}"
                if known
                else f"; energy not known to {opts.energy_tolerance:.0%} in {opts.energy_time:g} s"
            )
        if decision.stop:
            stopping = True
        elif (
            wall_clock() - sample_wall0 > (opts.energy_time if opts.energy else opts.time_budget)
            and len(out.samples) >= opts.min_samples_on_budget
        ):
            out.stop_reason = f"time budget of {opts.time_budget:g} s ended ({decision.reason})"
            out.unsettled = decision
            stopping = True


def assemble(
    prep: Prepared,
    *,
    sampling: Sampling,
    kernels: KernelFigures,
    host_per_call: float | None,
    wall_time: float,
    work: Work | None = None,
) -> TimingResult:
    """The closing notes (a median still moving at the budget's end, a moving SM clock) and the
    result."""
    statement, sampler, opts, first_call = prep.statement, prep.sampler, prep.opts, prep.first_call
    cal, notes, steadiness = prep.cal, prep.notes, prep.steadiness
    unsettled = sampling.unsettled
    if unsettled is not None and unsettled.unmet in ("rel_ci", "rel_drift"):
        # A GPU's clocks (and caches) settle under sustained load; the host clock has no such
        # warm-up to wait for, and what moves a CPU statement's median is the machine's other work
        # or the statement's own variation.
        why = (
            "clocks may still be changing under sustained load"
            if sampler.on_device
            else "other work on this machine, or the statement's own variation, moves it"
        )
        notes.advise(
            f"The median had not settled when the {opts.time_budget:g} s budget ended "
            f"({unsettled.reason}): {why}. "
            f"A longer run: {LONGER_RUN.script()}",
            LONGER_RUN,
        )
    meta = {"compile_time": statement.compile_time, **sampler.meta()}
    if statement.compiled_names:  # what the launch advice needs to know, work counted or not
        meta["compiled_names"] = list(statement.compiled_names)
    clock_start, clock_end = sampling.sm_clock
    if not sampling.interrupted and clock_start and clock_end:
        meta["sm_clock_mhz"] = (clock_start, clock_end)
    if sampling.clock_reasons is not None:
        meta["clock_event_reasons"] = sampling.clock_reasons
    result = TimingResult(
        samples=sampling.samples,
        calls_per_sample=cal.calls_per_sample,
        device=sampler.device,
        backend=sampler.backend,
        first_call=first_call,
        kernel_time=kernels.kernel_time,
        kernels_per_call=kernels.kernels_per_call,
        host_per_call=host_per_call,
        flush_l2=opts.flush_l2,
        stop_reason=sampling.stop_reason,
        interrupted=sampling.interrupted,
        notes=notes.lines,
        wall_time=wall_time,
        precision=opts.precision,
        first_call_ratio=opts.first_call_ratio,
        first_call_min=opts.first_call_min,
        meta=meta,
        hints=notes.hints,
        sample_clocks=sampling.clocks,
        clock_reasons=sampling.clock_reasons,
        energy_pieces=sampling.energy,
        energy_counter=sampling.energy_counter,
        steadiness=steadiness,
        kernel_clock=kernels.clock,
        work=work,
    )
    clocks = result.clock_summary
    if clocks is not None and clocks.has_moved and not opts.steady and not sampling.interrupted:
        notes.advise(
            f"{result.clock_sentence()} For a figure at the settled clock: {STEADY.script()}",
            STEADY,
        )
        result.notes, result.hints = notes.lines, notes.hints
    return result
