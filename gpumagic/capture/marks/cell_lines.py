"""Each line of a ``%%gpuprofile`` cell marked in the trace, so the by-line view can say which line
launched which kernel.

A trace's Python frames name functions, not lines (torch.profiler records calls), and a cell is
one frame. So the cell's statements are wrapped, in its syntax tree, in a ``record_function``
range named ``gpumagic line N`` (N: the statement's first line in the cell): every statement,
at every depth of ``for``/``while``/``if``/``with``/``try`` (a training loop's lines: ``for micro
in ...`` / ``with autocast(...)`` / ``loss = model(x)`` each their own), not inside functions or
classes the cell defines. A line that runs more than :data:`LINE_RUNS` times in a capture (a tight
Python loop) stops pushing ranges there: its later runs go to the line around it, and the view says
so (:func:`capped_lines`). The trailing expression, whose value IPython shows, is evaluated inside
its range and stays the cell's value. A range costs about 1.5 µs under the profiler
(``fast_range``; ``benchmarks/by_code_cost.py`` times a training step with them).

The wrapper names this module through ``__import__``, so the user's namespace gains no name.

Under Nsight Systems (``--nsys``) the same ranges are NVTX ranges (:func:`nvtx_ranges`): nsys
records NVTX, not the profiler's ranges, and the by-code view reads them back from its export.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from ..cell import Cell

__all__ = [
    "LINE_RANGE_TEXT",
    "capped_lines",
    "counted_range",
    "fast_range",
    "imported",
    "line_range",
    "mark_body",
    "mark_lines",
    "marked_cell",
    "nvtx_ranges",
    "reset_runs",
    "value_in_line",
]

#: The range's name; ``gpumagic.trace.code_frames.LINE_RANGE`` reads it back.
LINE_RANGE_TEXT = "gpumagic line {}"
_T = TypeVar("_T")
#: How deep into compound statements lines are marked (1: the top level; 2: their bodies too):
#: every level, so that a training loop's ``for`` / ``with`` / ``if`` / ``try`` bodies each
#: reach their own line.
DEPTH = 64
_BODIES = ("body", "orelse", "finalbody")


#: While it holds a true value, ranges are NVTX ranges (:func:`nvtx_ranges`).
_NVTX: list[bool] = []


class _NvtxRange:
    """An NVTX push/pop range as a context manager (torch's binding: about 1 µs a range)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __enter__(self) -> None:
        from .nvtx_calls import push_pop

        push_pop()[0](self.text)

    def __exit__(self, *exc: object) -> None:
        from .nvtx_calls import push_pop

        push_pop()[1]()


@contextmanager
def nvtx_ranges() -> Iterator[None]:
    """Inside the block, :func:`fast_range` gives NVTX ranges (what nsys records); as before after
    it, whatever happens."""
    _NVTX.append(True)
    try:
        yield
    finally:
        _NVTX.pop()


def fast_range(text: str) -> AbstractContextManager[object]:
    """A profiler range named ``text``, as a context manager: torch's ``_RecordFunctionFast`` (1.5
    µs a range under the profiler on this CPU, against 13 µs for ``record_function``; recorded as
    an op, ``cpu_op``), ``record_function`` where a torch lacks it; an NVTX range inside
    :func:`nvtx_ranges`."""
    if _NVTX:
        return _NvtxRange(text)
    import torch

    fast: Callable[[str], AbstractContextManager[object]] | None = getattr(
        torch._C._profiler, "_RecordFunctionFast", None
    )
    if fast is not None:
        return fast(text)
    from torch.autograd.profiler import record_function

    return record_function(text)


#: Ranges one line pushes in a capture (warm-up and captured runs) before it stops.
LINE_RUNS = 20_000
_RUNS: dict[int | str, int] = {}
_CAPPED: set[int | str] = set()


class _NoRange:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_RANGE = _NoRange()


def reset_runs() -> None:
    """Start counting each line's runs afresh (a capture's start)."""
    _RUNS.clear()
    _CAPPED.clear()


def capped_lines() -> list[int | str]:
    """The lines that ran more than :data:`LINE_RUNS` times since :func:`reset_runs`: a cell's by
    number, a function's as its range text (``gpumagic fline 1 5``)."""
    return sorted(_CAPPED, key=str)


def line_range(line: int) -> AbstractContextManager[object]:
    """The range of one line of the cell (none past :data:`LINE_RUNS` runs of it)."""
    return counted_range(line, LINE_RANGE_TEXT.format(line))


def counted_range(key: int | str, text: str) -> AbstractContextManager[object]:
    """The range ``text`` for one run of the line ``key`` (a cell line's number, or a function's
    line), none past :data:`LINE_RUNS` runs of it (:func:`capped_lines` names it)."""
    runs = _RUNS.get(key, 0) + 1
    _RUNS[key] = runs
    if runs > LINE_RUNS:
        _CAPPED.add(key)
        return _NO_RANGE
    return fast_range(text)


def value_in_line(line: int, value: Callable[[], _T]) -> _T:
    """``value()`` evaluated inside the range of ``line``: the cell's trailing expression."""
    with line_range(line):
        return value()


def imported(attr: str, node: ast.AST, module: str = __name__) -> ast.expr:
    """``__import__(module, fromlist=[attr]).attr`` at ``node``'s place: how marked code reaches
    gpumagic's ranges without a name in the user's namespace."""
    call = ast.Call(
        func=ast.Name(id="__import__", ctx=ast.Load()),
        args=[ast.Constant(module)],
        keywords=[ast.keyword(arg="fromlist", value=ast.List([ast.Constant(attr)], ast.Load()))],
    )
    return ast.copy_location(ast.Attribute(value=call, attr=attr, ctx=ast.Load()), node)


def _wrapped(stmt: ast.stmt) -> ast.stmt:
    item = ast.withitem(
        context_expr=ast.Call(
            func=imported("line_range", stmt), args=[ast.Constant(stmt.lineno)], keywords=[]
        )
    )
    return ast.copy_location(ast.With(items=[item], body=[stmt]), stmt)


def mark_body(
    body: list[ast.stmt], wrap: Callable[[ast.stmt], ast.stmt], depth: int = 1
) -> list[ast.stmt]:
    """``body`` with each statement, at every depth of its compound statements (not inside the
    functions and classes it defines), put in the range ``wrap`` gives it: a cell's lines here, a
    function's lines in ``capture/marks/function_ranges.py``."""
    return _marked(body, depth, wrap)


def _marked(
    body: list[ast.stmt], depth: int, wrap: Callable[[ast.stmt], ast.stmt] = _wrapped
) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            out.append(stmt)  # must stay first, and costs nothing
            continue
        if depth < DEPTH and not isinstance(
            stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            for field in _BODIES:
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    setattr(stmt, field, _marked(inner, depth + 1, wrap))
            for handler in getattr(stmt, "handlers", []) or []:
                handler.body = _marked(handler.body, depth + 1, wrap)
        out.append(wrap(stmt))
    return out


def _plain(expr: ast.expr) -> bool:
    """Whether an expression can move into a lambda unchanged (no ``:=``, ``await``, ``yield``)."""
    return not any(
        isinstance(n, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)) for n in ast.walk(expr)
    )


def mark_lines(tree: ast.Module) -> ast.Module:
    """A copy of a cell's tree with each line in its range (module doc). A trailing expression
    statement stays one, its value taken inside its line's range (one with ``:=``, ``await`` or
    ``yield`` is left unmarked: a lambda would change what it means)."""
    tree = copy.deepcopy(tree)
    body = list(tree.body)
    last: ast.Expr | None = None
    tail: list[ast.stmt] = []  # a trailing expression a lambda cannot hold: left as it is
    final = body[-1] if body else None
    if isinstance(final, ast.Expr):
        body.pop()
        if _plain(final.value):
            last = final
        else:
            tail = [final]
    tree.body = _marked(body, 1) + tail
    if last is not None:
        fn = ast.Lambda(
            args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=last.value,
        )
        call = ast.Call(
            func=imported("value_in_line", last), args=[ast.Constant(last.lineno), fn], keywords=[]
        )
        tree.body.append(ast.copy_location(ast.Expr(ast.copy_location(call, last)), last))
    return ast.fix_missing_locations(tree)


def marked_cell(source: str) -> Cell:
    """A :class:`~gpumagic.capture.cell.Cell` of ``source`` with each line in its range (what
    ``capture()`` runs for source text; the magic marks IPython's own compile of the cell)."""
    from ..cell import CELL_FILENAME, Cell, compile_cell, compile_tree

    compile_cell(source)  # its lines registered for tracebacks, its syntax checked
    code, last = compile_tree(mark_lines(ast.parse(source, CELL_FILENAME)), CELL_FILENAME)
    return Cell(source=source, code=code, last=last)
