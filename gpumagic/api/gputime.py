"""``gpumagic.gputime``, ``gpumagic.compare`` and ``gpumagic.sweep`` as scripts call them: the
timing core's functions, with each result saved to the history as the magics save theirs.

Why a wrapper here and not a line in the timing core: the core measures and knows nothing of where
results go (the data flows timing -> result -> history). Two keywords are added: ``label`` (as ``-l
NAME``) and ``history`` (a path, or False for this call alone; default: ``GPUMAGIC_HISTORY``, else
the default place). A store that cannot be written prints one line on stderr; the result is returned
as always.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..history.saving import Outcome, Recorder
    from ..timing import TimingResult
    from ..timing.compare_result import Comparison
    from ..timing.sweep_result import Sweep

__all__ = ["compare", "gputime", "sweep"]

History = str | os.PathLike[str] | bool | None
#: A statement as the timing core takes it: source text or a zero-argument callable.
Statement = str | Callable[[], object]


def _source(stmt: object) -> str:
    if isinstance(stmt, str):
        return stmt
    name = getattr(stmt, "__qualname__", None) or type(stmt).__name__
    module = getattr(stmt, "__module__", None)
    return f"<callable {module}.{name}>" if module else f"<callable {name}>"


def _setup_text(setup: object) -> str | None:
    """The setup as the history keeps it: its source text (a callable setup has none to keep)."""
    return setup if isinstance(setup, str) else None


def _recorder(history: History, label: str | None) -> Recorder | None:
    if history is False:
        return None
    from ..history.saving import (
        Recorder,
    )  # sqlite3 and the rest: loaded by the first result, not by `import gpumagic`

    return Recorder(None if history is None or history is True else history, label=label)


def _save(history: History, label: str | None, save: Callable[[Recorder], Outcome]) -> None:
    """Save a result to the history as the magics save theirs, unless ``history`` is False:
    ``save`` records it on the store's recorder, whose lines are printed (a store that cannot be
    written prints one line on stderr; the result is returned as always)."""
    recorder = _recorder(history, label)
    if recorder is not None:
        save(recorder).print()


def gputime(
    stmt: Statement,
    setup: Statement | None = None,
    globals: Mapping[str, object] | None = None,
    *,
    label: str | None = None,
    history: History = None,
    **kwargs: Any,  # Any: TimingOptions fields of several types
) -> TimingResult:
    """:func:`gpumagic.timing.gputime`, the result saved to the history (``label``; ``history``: a
    path, or False not to save this one). Returns the :class:`~gpumagic.timing.TimingResult`."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    from ..timing import gputime as timed
    from ..timing.statement import caller_globals

    result = timed(stmt, setup, caller_globals(globals), **kwargs)
    _save(history, label, lambda r: r.record(result, _source(stmt), _setup_text(setup)))
    return result


def compare(
    stmts: Mapping[str, Statement] | Sequence[Statement],
    setup: Statement | None = None,
    globals: Mapping[str, object] | None = None,
    *,
    label: str | None = None,
    history: History = None,
    **kwargs: Any,  # Any: TimingOptions fields of several types, and the baseline
) -> Comparison:
    """:func:`gpumagic.timing.compare.compare`, each statement's result saved to the history."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    from ..timing.compare import compare as timed
    from ..timing.compare import labelled
    from ..timing.statement import caller_globals

    result = timed(stmts, setup, caller_globals(globals), **kwargs)
    sources = {name: _source(s) for name, s in labelled(stmts).items()}
    _save(history, label, lambda r: r.record_many(result, sources, _setup_text(setup)))
    return result


def sweep(
    stmt: str | Mapping[str, str],
    setup: str | None = None,
    params: Mapping[str, Sequence[object]] | None = None,
    globals: Mapping[str, object] | None = None,
    *,
    label: str | None = None,
    history: History = None,
    **kwargs: Any,  # Any: TimingOptions fields of several types, zip and progress
) -> Sweep:
    """:func:`gpumagic.timing.sweep.sweep`, each point's result saved to the history."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    from ..timing.statement import caller_globals
    from ..timing.sweep import sweep as timed

    kwargs.setdefault("progress", print)  # a long sweep says how long, then each point as lines
    result = timed(stmt, setup, params, caller_globals(globals), **kwargs)
    sources = dict(stmt) if isinstance(stmt, Mapping) else {str(stmt).strip(): str(stmt)}
    _save(history, label, lambda r: r.record_many(result, sources, setup))
    return result
