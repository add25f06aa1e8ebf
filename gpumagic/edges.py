"""The names of what enters gpumagic from code it does not own, where no precise type can be said.

The package is checked by mypy in strict mode, and a bare ``Any`` in a signature hides what a value
is. Where a value comes from a third party whose types mypy cannot or should not follow, the
signature names it with one of the aliases below instead: each says what the value is and why it is
``Any``. ``tests/test_types.py`` fails on a bare ``Any`` annotation anywhere else (``*args`` and
``**kwargs`` forwarded as they came excepted).

Why not the real classes: Bokeh and torch are imported lazily (Bokeh's import is 0.9 s; torch may
not be installed in a reader's process), and following torch's inline types makes mypy take
minutes; IPython, cupti-python, cloudpickle and Dask ship partial types or none.

:class:`PrettyPrinter` is what the results' ``_repr_pretty_`` use of IPython's printer, as a
protocol: one definition for every layer that shows a result in a terminal.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = [
    "BokehModel",
    "CuptiRecord",
    "DaskClient",
    "JsonValue",
    "PrettyPrinter",
    "Shell",
    "TorchValue",
    "UserValue",
]

#: A Bokeh figure, layout, glyph renderer or data source: Bokeh is imported on first draw.
BokehModel = Any
#: A torch object (tensor, module, optimizer, profiler, stream, event): torch is imported lazily and
#: its own annotations are too large for the checker to follow on every run.
TorchValue = Any
#: IPython's InteractiveShell (or a stand-in with ``user_ns``): IPython's types are partial.
Shell = Any
#: One activity record of cupti-python (kernel, memcpy, API call): the package ships no types.
CuptiRecord = Any
#: A dask.distributed client or future: Dask is optional and its types partial.
DaskClient = Any
#: A value parsed from JSON (or JSON-like meta): a dict, list, str, number, bool or None.
JsonValue = Any
#: A value of the user's: what a cell's namespace, a statement or a callable returns, unknowable.
UserValue = Any


class PrettyPrinter(Protocol):
    """What a result's ``_repr_pretty_`` uses of IPython's pretty printer: the core does not import
    IPython, not even for its types."""

    def text(self, obj: str) -> None: ...
