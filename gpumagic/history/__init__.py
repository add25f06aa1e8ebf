"""The history: every ``%gputime``, ``--compare`` and ``--sweep`` result saved to one local SQLite
file, compared between runs (``--vs``), listed, plotted, and checked in CI. It knows results, not
how they were measured.

- :mod:`.store`: the file (where it lives, WAL, the queries); :mod:`.schema`: its versions and
  migrations;
- :mod:`.rows`: a result as a row (samples packed as float64); :mod:`.provenance`: device UUID,
  driver, versions, git;
- :mod:`.saving`: saving as results are measured, never in the user's way;
  :mod:`gpumagic.api.gputime`: the script API's ``gputime``/``compare``/``sweep`` that save as the
  magics do;
- :mod:`.versus`: two runs compared from their raw samples (bootstrap interval of the ratio of
  medians);
- :mod:`.query`: :func:`history` (a DataFrame); :mod:`.plot`: :func:`plot_history`;
- :mod:`.baseline` and :mod:`gpumagic.cli.history`: ``python -m gpumagic history [--export FILE]``
  and ``check BASELINE``.

``gpumagic.history`` is this package *and* the function ``gpumagic.history(label=None,
statement=None, device=None)``: a subpackage of that name would replace a function of the same name
on ``gpumagic`` as soon as it is imported, so the package itself answers the call (its module class
has a ``__call__``).
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from .plot import plot_history
    from .store import ENV, Store, default_path, resolve_path
    from .versus import Versus, ratio_ci, versus

__all__ = [
    "ENV",
    "Store",
    "Versus",
    "default_path",
    "history",
    "plot_history",
    "ratio_ci",
    "resolve_path",
    "versus",
]

# Loaded on first use: ``import gpumagic`` imports this package (the script API saves results), and
# pandas, numpy and the queries are for when the history is read.
_LAZY = {
    "ENV": "store",
    "Store": "store",
    "default_path": "store",
    "resolve_path": "store",
    "Versus": "versus",
    "ratio_ci": "versus",
    "versus": "versus",
    "plot_history": "plot",  # Bokeh's figures: loaded when a plot is asked for
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def history(*args: Any, **kwargs: Any) -> pd.DataFrame:
    """:func:`gpumagic.history.query.history`: the saved results as a DataFrame."""
    from .query import history as query

    return query(*args, **kwargs)


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        return history(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
