"""A measurement strung from :mod:`.measure`'s steps: :func:`measure` and :func:`gputime` for one
statement, and the two halves around the sampling that :func:`gpumagic.timing.compare.compare` and
:func:`gpumagic.timing.sweep.sweep` use.

:func:`prepare` is everything before the first sample (clock choice, first call, ``steady``, warm-up
and calibration) and :func:`conclude` everything after the last (kernel pass, host pass, work
counting, the result). The samples in between are the caller's:
:func:`~gpumagic.timing.measure.sample` for one statement (:func:`measure`), round-robin rounds over
several for a comparison. One sequence of steps, written once: a comparison or a sweep point runs
the same steps as ``%gputime``, in the same order, with the same notes.
"""

from __future__ import annotations

import ast
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..errors import TimingInterrupted
from .clocks import choose_sampler
from .measure import (
    _finish_quietly as finish_quietly,
)  # one definition: the interrupt path %gputime takes
from .measure import (
    assemble,
    calibrate,
    host_pass,
    kernel_pass,
    run_first_call,
    sample,
    settle_clocks,
)
from .options import TimingOptions
from .result import TimingResult
from .samplers import Sampler
from .statement import CompiledStatement, caller_globals, compile_statement
from .steps import KernelFigures, Notes, Prepared, Sampling
from .work import count_work

__all__ = ["Prepared", "conclude", "finish_quietly", "gputime", "measure", "prepare"]


def prepare(
    statement: CompiledStatement,
    namespace: Mapping[str, object],
    opts: TimingOptions,
    *,
    sampler: Sampler | None = None,
    wall_clock: Callable[[], float] = time.perf_counter,
) -> Prepared:
    """Choose the clock (unless ``sampler`` is given), run the first call, settle clocks
    (``steady``), warm up and calibrate: the steps of :func:`measure` before its samples."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    wall0 = wall_clock()
    values = [namespace[n] for n in statement.read_names if n in namespace]
    notes = Notes()
    if sampler is None:
        sampler, why = choose_sampler(opts, values)
        notes.add(*why)
    first_call, sampler, opts = run_first_call(statement, sampler, opts, values, notes)
    steadiness = settle_clocks(sampler, statement.inner, opts, first_call, notes, wall_clock)
    cal = calibrate(sampler, statement.inner, opts, first_call, notes)
    return Prepared(statement, sampler, opts, first_call, cal, notes, steadiness, wall0)


def conclude(
    prep: Prepared, sampling: Sampling, wall_clock: Callable[[], float] = time.perf_counter
) -> TimingResult:
    """The kernel pass, the host pass and the work count after the samples, then the result, as
    ``measure`` does.

    An interrupt during these passes keeps the samples: ``sampling.interrupted`` is set and the
    result says so; the caller raises the interrupt again once every result is built.
    """
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    sampler, inner, opts, cal, notes = (
        prep.sampler,
        prep.statement.inner,
        prep.opts,
        prep.cal,
        prep.notes,
    )
    kernels, host_per_call, work = KernelFigures(), None, None
    if not sampling.interrupted and opts.kernel_time and sampler.on_device:
        try:
            kernels = kernel_pass(sampler, inner, opts, cal, notes)
            if not sampler.replays_graph:  # a replay issues no launches of its own to time
                host_per_call = host_pass(sampler, inner, opts, cal, kernels.kernels_per_call)
        except KeyboardInterrupt:
            sampling.interrupted = True
            finish_quietly(sampler)
    if opts.work and not sampling.interrupted:
        try:
            work = count_work(
                prep.statement.once, kernels.kernels_per_call
            )  # one more call, untimed
        except KeyboardInterrupt:
            sampling.interrupted = True
            finish_quietly(sampler)
    return assemble(
        prep,
        sampling=sampling,
        kernels=kernels,
        host_per_call=host_per_call,
        wall_time=wall_clock() - prep.wall0,
        work=work,
    )


def measure(
    statement: CompiledStatement,
    namespace: Mapping[str, object] | None = None,
    options: TimingOptions | None = None,
    *,
    sampler: Sampler | None = None,
    wall_clock: Callable[[], float] = time.perf_counter,
) -> TimingResult:
    """Time a compiled statement: :func:`prepare`, the samples, :func:`conclude`. ``sampler``
    overrides the clock choice (tests pass a scripted one).

    Ctrl-C once samples exist raises :class:`~gpumagic.errors.TimingInterrupted`, a
    ``KeyboardInterrupt`` whose ``result`` is the partial result (``interrupted``): the samples are
    kept and the interrupt still stops the caller. Before the first sample it is the plain
    ``KeyboardInterrupt``.
    """
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    opts = options or TimingOptions()
    opts.validate()
    prep = prepare(statement, namespace or {}, opts, sampler=sampler, wall_clock=wall_clock)
    sampling = sample(prep.sampler, statement.inner, prep.opts, prep.cal, wall_clock)
    result = conclude(prep, sampling, wall_clock)
    if sampling.interrupted:
        raise TimingInterrupted(result)
    return result


def gputime(
    stmt: str | Callable[[], object],
    setup: str | Callable[[], object] | None = None,
    globals: Mapping[str, object] | None = None,
    *,
    options: TimingOptions | None = None,
    ast_transform: Callable[[ast.Module], ast.Module] | None = None,
    **overrides: Any,  # Any: TimingOptions fields of several types (validate() checks them)
) -> TimingResult:
    """Time ``stmt`` on the GPU (or the host, where there is no CUDA) and return a
    :class:`TimingResult`.

    ``stmt`` and ``setup`` are source text evaluated in ``globals`` (default: the caller's module
    globals) or zero-argument callables; the statement's own assignments stay local, so the
    namespace is left untouched. Keyword ``overrides`` are :class:`TimingOptions` fields, e.g.
    ``gputime("A @ B", globals=g, graph=True)``.

    Ctrl-C after the first sample raises :class:`~gpumagic.errors.TimingInterrupted` (a
    ``KeyboardInterrupt``) whose ``result`` holds the samples taken.

    >>> r = gputime("sum(range(100))")      # doctest: +SKIP
    >>> print(r)                             # doctest: +SKIP
    1.02 µs ± 3.1 ns per call on CPU (median ± IQR of 120 samples × 1000 calls)
    """
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    opts = replace(options or TimingOptions(), **overrides)
    opts.validate()
    namespace = caller_globals(globals)
    compiled = compile_statement(stmt, setup, namespace, ast_transform=ast_transform)
    return measure(compiled, namespace, opts)
