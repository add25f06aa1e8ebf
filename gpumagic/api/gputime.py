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
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..history.saving import Recorder

__all__ = ["compare", "gputime", "sweep"]

History = str | os.PathLike[str] | bool | None


def _source(stmt: Any) -> str:
    if isinstance(stmt, str):
        return stmt
    name = getattr(stmt, "__qualname__", None) or type(stmt).__name__
    module = getattr(stmt, "__module__", None)
    return f"<callable {module}.{name}>" if module else f"<callable {name}>"


def _recorder(history: History, label: str | None) -> Recorder | None:
    if history is False:
        return None
    from ..history.saving import (
        Recorder,
    )  # sqlite3 and the rest: loaded by the first result, not by `import gpumagic`

    return Recorder(None if history is None or history is True else history, label=label)


def gputime(
    stmt: str | Callable[[], Any],
    setup: str | Callable[[], Any] | None = None,
    globals: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
    history: History = None,
    **kwargs: Any,
) -> Any:
    """:func:`gpumagic.timing.gputime`, the result saved to the history (``label``; ``history``: a
    path, or False not to save this one). Returns the :class:`~gpumagic.timing.TimingResult`."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    from ..timing import gputime as timed

    namespace = globals if globals is not None else sys._getframe(1).f_globals
    result = timed(stmt, setup, namespace, **kwargs)
    recorder = _recorder(history, label)
    if recorder is not None:
        recorder.record(result, _source(stmt), setup if isinstance(setup, str) else None).print()
    return result


def compare(
    stmts: Mapping[str, str | Callable[[], Any]] | Sequence[str | Callable[[], Any]],
    setup: str | Callable[[], Any] | None = None,
    globals: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
    history: History = None,
    **kwargs: Any,
) -> Any:
    """:func:`gpumagic.timing.compare.compare`, each statement's result saved to the history."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    from ..timing.compare import compare as timed
    from ..timing.compare import labelled

    namespace = globals if globals is not None else sys._getframe(1).f_globals
    result = timed(stmts, setup, namespace, **kwargs)
    recorder = _recorder(history, label)
    if recorder is not None:
        sources = {name: _source(s) for name, s in labelled(stmts).items()}
        recorder.record_many(result, sources, setup if isinstance(setup, str) else None).print()
    return result


def sweep(
    stmt: str | Mapping[str, str],
    setup: str | None = None,
    params: Mapping[str, Sequence[Any]] | None = None,
    globals: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
    history: History = None,
    **kwargs: Any,
) -> Any:
    """:func:`gpumagic.timing.sweep.sweep`, each point's result saved to the history."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    from ..timing.sweep import sweep as timed

    namespace = globals if globals is not None else sys._getframe(1).f_globals
    kwargs.setdefault("progress", print)  # a long sweep says how long, then each point as lines
    result = timed(stmt, setup, params, namespace, **kwargs)
    recorder = _recorder(history, label)
    if recorder is not None:
        sources = dict(stmt) if isinstance(stmt, Mapping) else {str(stmt).strip(): str(stmt)}
        recorder.record_many(result, sources, setup).print()
    return result
