"""One statement (or several) over a grid of parameters: :func:`sweep` ->
:class:`~.sweep_result.Sweep`. No IPython.

Each point is a ``%gputime`` of its own: the setup and the statement are compiled in a copy of the
namespace with the point's values added (``n=1024``), so the user's namespace is untouched and each
point builds its own tensors; then the same steps (first call, warm-up, calibration, the
double-buffered samples under the same stop rule, kernel pass, host pass, work count). Several
statements at a point are timed one after the other, each with its own setup run.

The budget of a point shrinks for fast points (:func:`point_budget`): a sweep is read as a curve,
and a point whose samples are short reaches its stop rule within the rule's minimum time or is held
by noise that a longer budget only narrows by its square root.

Bad input stops nothing but the point it hits: a statement that fails at a point marks that point
failed with the error's first line; an out-of-memory error frees what the point allocated
(``gc.collect`` and, where CUDA is in use, ``torch.cuda.empty_cache``) and marks it "out of memory";
the sweep goes on. Ctrl-C keeps the points done and raises :class:`SweepInterrupted` with the
partial sweep.
"""

from __future__ import annotations

import ast
import gc
import itertools
import keyword
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InvalidOptionError, TimingInterrupted
from ..units import format_time
from .measure import sample
from .options import TimingOptions
from .result import TimingResult
from .samplers import Sampler
from .staged import conclude, prepare
from .statement import caller_globals, compile_statement
from .sweep_result import Sweep, SweepPoint

__all__ = [
    "FAST_SHARE",
    "LONG_SWEEP",
    "POINT_SAMPLES",
    "SweepInterrupted",
    "grid",
    "point_budget",
    "sweep",
]

#: Samples a point's budget is sized for: what the stop rule sees at its minimum time with ~1 ms
#: samples.
POINT_SAMPLES = 100
#: Seconds of a sweep, estimated from its first point, past which it says at once how long it will
#: take and then each point as it finishes: ``n=range(100000)`` ran ~3 h without a word.
LONG_SWEEP = 10.0
#: The least share of ``time_budget`` a point gets, however fast its samples (0.2 s of the default
#: 0.5 s: twice the stop rule's minimum measured time).
FAST_SHARE = 0.4


class SweepInterrupted(TimingInterrupted[Sweep]):
    """Ctrl-C during a sweep: ``result`` is the partial :class:`~.sweep_result.Sweep` (the points
    done, and the one that was running with what it had measured). A ``KeyboardInterrupt``, as
    :class:`TimingInterrupted` is."""

    def __init__(self, result: Sweep) -> None:
        self.result = result
        done = sum(1 for p in result.points if p.status == "ok")
        KeyboardInterrupt.__init__(
            self,
            f"sweep interrupted after {done} of {result.planned} measurements; "
            "the partial Sweep is this exception's .result",
        )


def point_budget(opts: TimingOptions, calls_per_sample: int, per_call: float) -> float:
    """The time budget of one point: ``time_budget`` for a point whose :data:`POINT_SAMPLES` samples
    need it, down to :data:`FAST_SHARE` of it for a fast point.

    ``min(time_budget, max(FAST_SHARE × time_budget, POINT_SAMPLES × seconds per sample))``, from
    the warm-up's per-call estimate rather than the first call: a first call carries the cold costs
    (lazy init, cuBLAS heuristics: 189 ms against 3.7 ms warm), which say nothing of what the
    samples will cost. Tied to ``time_budget`` so that the note's advice (``time_budget=2``)
    lengthens fast points too.
    """
    wanted = POINT_SAMPLES * calls_per_sample * per_call
    return min(opts.time_budget, max(FAST_SHARE * opts.time_budget, wanted))


def grid(params: Mapping[str, Sequence[object]], zipped: bool = False) -> list[dict[str, object]]:
    """The points: every combination of the values (the first parameter varies slowest), or with
    ``zipped`` the i-th value of each. Raises :class:`~gpumagic.errors.InvalidOptionError` for no
    parameters, a name that cannot be a Python name, a parameter without values, or lists of unequal
    length with ``zipped``."""
    if not isinstance(params, Mapping) or not params:
        raise InvalidOptionError(
            option="params",
            value=params,
            reason="must map each parameter to its values, e.g. {'n': [256, 512]}",
        )
    values: dict[str, list[object]] = {}
    for name, vals in params.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise InvalidOptionError(
                option="params",
                value=name,
                reason="names must be Python names (the statement reads them)",
            )
        if isinstance(vals, (str, bytes)) or not hasattr(vals, "__iter__"):
            raise InvalidOptionError(
                option=f"params[{name!r}]",
                value=vals,
                reason="must be a list of values, e.g. [256, 512]",
            )
        values[name] = list(vals)
        if not values[name]:
            raise InvalidOptionError(
                option=f"params[{name!r}]", value=vals, reason="needs at least one value"
            )
    names = list(values)
    if zipped:
        lengths = {name: len(v) for name, v in values.items()}
        if len(set(lengths.values())) > 1:
            said = ", ".join(f"{name} has {n}" for name, n in lengths.items())
            raise InvalidOptionError(
                option="params with zip=True",
                value=lengths,
                reason=f"need lists of one length ({said} values): give each the same number "
                f"of values, "
                "or zip=False for every combination",
            )
        combos: Iterable[tuple[object, ...]] = zip(*values.values())
    else:
        combos = itertools.product(*values.values())
    return [dict(zip(names, combo)) for combo in combos]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def is_out_of_memory(exc: BaseException) -> bool:
    """``torch.cuda.OutOfMemoryError`` (or any error of that type name), or an allocator's "out of
    memory"."""
    if any(t.__name__ == "OutOfMemoryError" for t in type(exc).__mro__):
        return True
    return isinstance(exc, (RuntimeError, MemoryError)) and (
        isinstance(exc, MemoryError) or "out of memory" in str(exc).lower()
    )


def free_memory() -> None:
    """Give back what a failed point allocated: the garbage, and PyTorch's cached CUDA blocks where
    CUDA is in use."""
    gc.collect()
    torch = sys.modules.get(
        "torch"
    )  # never imported here: a sweep without torch has no cache to empty
    if torch is not None:
        try:
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - freeing is best effort; the point is already marked
            pass


def sweep(
    stmt: str | Mapping[str, str],
    setup: str | None = None,
    params: Mapping[str, Sequence[object]] | None = None,
    globals: Mapping[str, object] | None = None,
    *,
    zip: bool = False,
    options: TimingOptions | None = None,
    ast_transform: Callable[[ast.Module], ast.Module] | None = None,
    progress: Callable[[str], None] | None = None,
    **overrides: Any,  # Any: TimingOptions fields of several types (validate() checks them)
) -> Sweep:
    """Time ``stmt`` at every point of ``params``: ``sweep("A @ B", "A = torch.randn(n, n); B =
    ...", params={"n": [256, 512, 1024]})``.

    ``stmt`` is source text, or a mapping of label to source text for several statements (several
    lines on the plot). ``setup`` runs before each statement at each point, in a copy of ``globals``
    (default: the caller's module globals) with the point's values added. Points are every
    combination of the values, or with ``zip=True`` the i-th value of each list. Keyword
    ``overrides`` are :class:`TimingOptions` fields; ``time_budget`` is the budget of a slow point
    (fast ones get less: :func:`point_budget`). ``progress`` receives, for a sweep whose estimate
    from its first point passes :data:`LONG_SWEEP`, that estimate at once and then a line per
    point as it finishes (a script passes ``print``; the notebook updates one display).
    """
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    opts = replace(options or TimingOptions(), **overrides)
    opts.validate()
    points = grid(params if params is not None else {}, zipped=zip)
    stmts = dict(stmt) if isinstance(stmt, Mapping) else {str(stmt).strip(): stmt}
    for label, src in stmts.items():
        if not isinstance(src, str):
            raise TypeError(
                f"sweep statements are source text (they read the parameters); {label!r} is not"
            )
        compile(
            src, "<sweep-stmt>", "exec", dont_inherit=True
        )  # a SyntaxError now, not once per point
    if setup is not None:
        compile(setup, "<sweep-setup>", "exec", dont_inherit=True)
    namespace = caller_globals(globals)
    return run_sweep(
        stmts, setup, points, namespace, opts, ast_transform=ast_transform, progress=progress
    )


def run_sweep(
    stmts: Mapping[str, str],
    setup: str | None,
    points: Sequence[Mapping[str, object]],
    namespace: Mapping[str, object],
    opts: TimingOptions,
    *,
    ast_transform: Callable[[ast.Module], ast.Module] | None = None,
    sampler_for: Callable[[Mapping[str, object], str], Sampler | None] | None = None,
    wall_clock: Callable[[], float] = time.perf_counter,
    progress: Callable[[str], None] | None = None,
) -> Sweep:
    """Time each statement at each point. ``sampler_for(point, label)`` overrides the clock
    (tests); ``progress`` as in :func:`sweep`."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    names = list(points[0]) if points else []
    out = Sweep(points=[], params=names, labels=list(stmts), planned=len(points) * len(stmts))
    run = _PointRun(setup, namespace, opts, ast_transform, wall_clock)
    began, said = wall_clock(), [False]
    for point in points:
        for label, src in stmts.items():
            sampler = sampler_for(point, label) if sampler_for is not None else None
            entry = _time_point(run, src, dict(point), label, sampler)
            out.points.append(entry)
            if progress is not None:
                _progress(progress, out, entry, wall_clock() - began, said)
            if entry.status == "interrupted":
                out.interrupted = True
                raise SweepInterrupted(out)
    return out


def _progress(
    say: Callable[[str], None], out: Sweep, entry: SweepPoint, elapsed: float, said: list[bool]
) -> None:
    """The estimate once, after the first point, where the sweep will pass :data:`LONG_SWEEP`;
    then each point as it finishes, with the time left at the pace so far."""
    done, planned = len(out.points), out.planned
    left = elapsed / done * (planned - done)
    if not said[0]:
        if done == planned or elapsed + left <= LONG_SWEEP:
            return
        said[0] = True
        say(
            f"Sweep of {planned:,} measurements: about {_duration(elapsed + left)} at "
            f"{_duration(elapsed / done)} each (from the first); each is shown as it finishes, "
            "and Ctrl-C keeps those done."
        )
    value = ", ".join(f"{k}={v!r}" for k, v in entry.params.items())
    r = entry.timed
    shown = format_time(r.median, r.precision) if r is not None else entry.status
    if entry.error:
        shown += f" ({entry.error})"
    label = f" {entry.label}" if len(out.labels) > 1 else ""
    say(f"[{done:,}/{planned:,}] {value}{label}: {shown}; about {_duration(left)} left")


def _duration(seconds: float) -> str:
    """A span as a reader wants it: '2 h 47 min', '3 min 10 s', '12 s', '0.25 s'."""
    if seconds < 10:
        return f"{seconds:.2g} s"
    s = round(seconds)
    h, m, sec = s // 3600, s % 3600 // 60, s % 60
    return f"{h} h {m} min" if h else f"{m} min {sec} s" if m else f"{sec} s"


@dataclass(frozen=True)
class _PointRun:
    """What every point of one sweep is measured with: the setup, the namespace the point's values
    are added to, the options, the AST transform and the wall clock."""

    setup: str | None
    namespace: Mapping[str, object]
    opts: TimingOptions
    ast_transform: Callable[[ast.Module], ast.Module] | None
    wall_clock: Callable[[], float]


def _time_point(
    run: _PointRun, src: str, point: dict[str, object], label: str, sampler: Sampler | None
) -> SweepPoint:
    """One statement at one point; never raises but for a statement whose error is not an
    ``Exception``."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    entry = SweepPoint(params=point, label=label, result=None)
    out_of_memory = False
    try:
        result = _measure_point(run, src, point, sampler)
    except TimingInterrupted as exc:
        entry.result, entry.status = exc.result, "interrupted"
    except KeyboardInterrupt:
        entry.status = "interrupted"
    except Exception as exc:  # noqa: BLE001 - a failing point is marked, and the sweep goes on
        out_of_memory = is_out_of_memory(exc)
        entry.status = "out of memory" if out_of_memory else "failed"
        entry.error = _first_line(exc)
    else:
        entry.result = result
    if out_of_memory:
        # here, once the error (and the frames holding the point's tensors) has been let go
        free_memory()
    return entry


def _measure_point(
    run: _PointRun, src: str, point: dict[str, object], sampler: Sampler | None
) -> TimingResult:
    """Compile in a copy of the namespace with the point's values, prepare, sample with the point's
    budget, conclude. An interrupt after the first sample raises :class:`TimingInterrupted` carrying
    the partial result."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    ns, wall_clock = {**run.namespace, **point}, run.wall_clock
    compiled = compile_statement(src, run.setup, ns, ast_transform=run.ast_transform)
    prep = prepare(compiled, ns, run.opts, sampler=sampler, wall_clock=wall_clock)
    prep.opts = replace(
        prep.opts, time_budget=point_budget(prep.opts, prep.cal.calls_per_sample, prep.cal.per_call)
    )
    sampling = sample(prep.sampler, compiled.inner, prep.opts, prep.cal, wall_clock)
    result = conclude(prep, sampling, wall_clock)
    if sampling.interrupted:
        raise TimingInterrupted(result)
    return result
