"""``gpumagic.diff(a, b)``: any two runs in, a :class:`~gpumagic.render.diff_view.ProfileDiff` out.

A run is whatever the user holds: a ``%%gpuprofile -o`` report, a Trace
(``load_trace``/``load_nsys``, one file or a whole job's per-rank files), a saved
:class:`~gpumagic.analysis.profile_summary.ProfileSummary` (or its dict), or a path (an nsys
``.sqlite``/``.nsys-rep``, a Chrome/Perfetto ``.json[.gz]``, a directory, glob or list of per-rank
reports). Each is reduced to its summaries first (a big nsys export through its few needed columns),
so two million-kernel exports are never held as tables at once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..analysis.diff import diff_summaries
from ..analysis.profile_summary import SYNC_APIS, Narrow, ProfileSummary, summarize
from ..errors import GpuMagicError
from ..history.profiles import ProfileOutcome
from ..render.diff_view import ProfileDiff
from ..trace import Trace

__all__ = ["diff", "load_run", "summary_of"]

_JSON = (".json", ".json.gz")


def load_run(path: str | os.PathLike[str] | list[Any] | tuple[Any, ...]) -> Trace:
    """The Trace of a path: nsys exports by ``load_nsys``, Chrome traces by ``load_trace``, several
    by either."""
    from ..job.reports import expand, is_many, load_nsys, load_trace

    if isinstance(path, (list, tuple)) or is_many(path):  # the isinstance: for the type checker
        files = expand(path)
        chrome = bool(files) and all(str(f).endswith(_JSON) for f in files)
        return load_trace(files) if chrome else load_nsys(files)
    text = os.fspath(path)
    return load_trace(text) if text.endswith(_JSON) else load_nsys(text)


#: What gpumagic.diff compares: a report (``-o``) or a Trace, saved summaries, or paths to a run's
#: files.
Run = Any  # ProfileReport | Trace | ProfileSummary | Mapping | str | os.PathLike | list of paths


def summary_of(run: Run) -> ProfileSummary:
    """The summaries of one run, whatever form it comes in (see the module's docstring)."""
    if isinstance(run, ProfileSummary):
        return run
    if isinstance(run, Mapping) and "kernels" in run and "ranks" in run:
        return ProfileSummary.from_dict(dict(run))
    trace = getattr(run, "trace", run)  # a ProfileReport holds its Trace
    if isinstance(trace, Trace):
        return summarize(trace)
    if isinstance(run, (str, os.PathLike, list, tuple)):
        trace = load_run(run)
        from ..capture.nsys.narrow import narrow_read

        columns = narrow_read(trace, SYNC_APIS)
        return summarize(trace, Narrow(**columns) if columns else None)
    raise GpuMagicError(
        detail=f"cannot compare a {type(run).__name__}: gpumagic.diff takes %%gpuprofile "
        f"reports (-o), Traces "
        "(load_trace/load_nsys), saved profile summaries, or paths to nsys exports and "
        "Chrome traces"
    )


def _name(run: Run, default: str) -> str:
    if isinstance(run, (str, os.PathLike)):
        return os.path.basename(os.fspath(run).rstrip("/")) or default
    return str(getattr(run, "label", "") or default)


def diff(
    a: Run, b: Run, *, name_a: str | None = None, name_b: str | None = None, top: int = 15
) -> ProfileDiff:
    """What changed from run ``a`` to run ``b``: kernels matched by what they are, per launching op,
    the figures side by side, the largest changes in a sentence each, and where the GPU time moved
    (a waterfall). ``name_a`` and ``name_b`` name the runs on the page (default: their labels or
    file names, else A and B); ``top``: table rows."""
    na, nb = name_a or _name(a, "A"), name_b or _name(b, "B")
    if na == nb:
        na, nb = f"A ({na})", f"B ({nb})"
    return ProfileDiff(diff_summaries(summary_of(a), summary_of(b)), na, nb, top=top)


def versus_saved(outcome: ProfileOutcome) -> ProfileDiff | None:
    """``%%gpuprofile --vs``: the diff of a saved profile (the history's ``ProfileOutcome``) with
    the one just captured, drawn as plain bars under the report (not a second Bokeh document:
    ~0.1 s); None where no reference was found or saved."""
    if outcome.reference is None:
        return None
    name_a, name_b = outcome.names
    shown = diff(outcome.reference, outcome.summary, name_a=name_a, name_b=name_b)
    shown.waterfall = "bars"
    return shown
