"""A cell made ready to run in this process, as both in-process backends run it: torch.profiler
(``torch/backend.py``) and nsys in place, in a kernel under nsys (``nsys/inplace.py``).

Both run the cell in the caller's namespace (its assignments land there), and both must leave the
by-code view the same ranges: source text is compiled with each line in its range
(``marks/cell_lines.py``; the magic hands over IPython's own compile of the cell, marked already),
each line's runs are counted afresh from this capture's first run (past ``LINE_RUNS`` a line stops
pushing ranges: a count left by an earlier capture would stop it early), and the functions the cell
calls are found for ranges of their own (``marks/function_ranges.py``). Then the loop every backend
runs (``cell.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import CodeType
from typing import Any

from ..edges import UserValue
from .cell import Cell, namespace_or_new, run_cell
from .marks.cell_lines import marked_cell, reset_runs
from .marks.function_ranges import function_table

__all__ = ["CellHere"]


@dataclass(frozen=True)
class CellHere:
    """What runs here: the ``cell``, the ``namespace`` it runs in, and the table of the
    ``functions`` it calls that the capture marks ([] where nothing is marked)."""

    cell: Cell
    namespace: MutableMapping[str, Any]
    functions: list[dict[str, Any]]

    @classmethod
    def prepare(
        cls,
        cell: Cell | str | CodeType | Callable[[], Any],
        namespace: Mapping[str, Any] | None,
        marked: bool = True,
    ) -> CellHere:
        """``cell`` ready to run in ``namespace`` (the caller's, else a fresh one); ``marked``:
        with the by-code view's ranges (its lines, where it is source text, and the functions it
        calls)."""
        ns = namespace_or_new(namespace)
        runnable = marked_cell(cell) if marked and isinstance(cell, str) else Cell.of(cell)
        reset_runs()  # each line's ranges counted from this capture's first run
        return cls(runnable, ns, function_table(ns, runnable.source) if marked else [])

    def run(
        self,
        warmup: int,
        iters: int,
        inside: Callable[[], AbstractContextManager[Any]],
        sync: Callable[[], None],
        outside: Callable[[], AbstractContextManager[Any]],
    ) -> UserValue:
        """The loop (:func:`cell.run_cell`) over this cell in its namespace: the warm-up inside
        ``outside()``, the captured runs inside ``inside()``; the last captured run's value."""
        return run_cell(self.cell, self.namespace, warmup, iters, inside, sync, outside)
