"""What every capture backend runs, and how: the cell, warmed up outside the capture, then run
inside it.

One loop for all backends, so that torch.profiler in this process, the ``--nsys`` subprocess and the
ones to come warm up and repeat a cell the same way: ``warmup`` runs, a synchronization (the
warm-up's GPU work must not spill into the capture), then ``iters`` runs inside the capture context,
synchronized before the context closes so that the cell's GPU work lies inside its range. Light on
purpose: the subprocess runner imports it before torch.
"""

from __future__ import annotations

import ast
import linecache
from collections.abc import Callable, Mapping, MutableMapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from types import CodeType
from typing import Any

from ..edges import UserValue
from ..errors import InvalidOptionError

__all__ = [
    "Cell",
    "compile_cell",
    "compile_source",
    "compile_tree",
    "loop_notes",
    "namespace_or_new",
    "run_cell",
    "split_last_expression",
]

CELL_FILENAME = "<gpuprofile-cell>"


@dataclass(frozen=True)
class Cell:
    """The code a capture runs: ``source`` (what a subprocess needs), ``code`` (what runs here: a
    code object that IPython compiled, so tracebacks show the cell's lines, or a zero-argument
    callable), or both; and ``last``, the cell's trailing expression compiled apart (``eval`` mode),
    whose value is the cell's value as IPython shows it (``Out[n]``). The last expression is part of
    the cell: it runs, and is profiled, on every run."""

    source: str | None = None
    code: CodeType | Callable[[], Any] | None = None
    last: CodeType | None = None

    @classmethod
    def of(cls, cell: Cell | str | CodeType | Callable[[], Any]) -> Cell:
        """A Cell from source text (compiled here, its lines registered for tracebacks), a code
        object or a callable."""
        if isinstance(cell, Cell):
            return cell
        if isinstance(cell, str):
            code, last = compile_cell(cell)
            return cls(source=cell, code=code, last=last)
        if isinstance(cell, CodeType) or callable(cell):
            return cls(code=cell)
        raise TypeError(
            f"a cell is source text, a code object or a callable, not {type(cell).__name__}"
        )

    def run(self, namespace: MutableMapping[str, Any]) -> UserValue:
        """Run once: a code object in ``namespace`` (its assignments land there, as a normal run
        leaves them). Returns the cell's value: its trailing expression's (None without one), or
        what a callable returns."""
        code, last = (
            (self.code, self.last) if self.code is not None else compile_cell(self.source or "")
        )
        if isinstance(code, CodeType):
            if not isinstance(namespace, dict):  # exec's globals: a dict and nothing else
                raise TypeError(
                    f"a cell's code runs in a dict namespace, not a {type(namespace).__name__}"
                )
            exec(code, namespace)  # noqa: S102 - the user's own cell
            return eval(last, namespace) if last is not None else None
        return code()


def split_last_expression(tree: ast.Module) -> tuple[ast.Module, ast.Expression | None]:
    """The cell without its trailing expression statement, and that expression (as IPython evaluates
    it for ``Out[n]``), or the cell unchanged and None."""
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        body = ast.Module(body=tree.body[:-1], type_ignores=tree.type_ignores)
        return body, ast.fix_missing_locations(ast.Expression(body=tree.body[-1].value))
    return tree, None


def compile_tree(
    tree: ast.Module, filename: str, compiler: Callable[..., Any] = compile
) -> tuple[CodeType, CodeType | None]:
    """A cell's AST compiled as (the statements, the trailing expression or None), with ``compiler``
    (IPython's, to keep its flags and its traceback lines)."""
    body, last = split_last_expression(tree)
    return compiler(body, filename, "exec"), (
        compiler(last, filename, "eval") if last is not None else None
    )


def compile_source(source: str, filename: str = CELL_FILENAME) -> CodeType:
    """Compile cell source, registering its lines with linecache so a traceback shows them."""
    _register(source, filename)
    return compile(source, filename, "exec")


def compile_cell(source: str, filename: str = CELL_FILENAME) -> tuple[CodeType, CodeType | None]:
    """Cell source compiled as (its statements, its trailing expression or None), its lines
    registered."""
    _register(source, filename)
    return compile_tree(ast.parse(source, filename), filename)


def _register(source: str, filename: str) -> None:
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def run_cell(
    cell: Cell,
    namespace: MutableMapping[str, Any],
    warmup: int,
    iters: int,
    inside: Callable[[], AbstractContextManager[Any]] = nullcontext,
    sync: Callable[[], None] = lambda: None,
    outside: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> UserValue:
    """Warm up ``warmup`` times (inside ``outside()``, a watch the backend may keep over the
    warm-up), synchronize, then run ``iters`` times inside ``inside()`` (the capture), synchronized
    before it closes. Returns the cell's value from the last captured run. An exception propagates
    after the capture context has exited (profiler stopped, range popped)."""
    if warmup < 0:
        raise InvalidOptionError(option="warmup", value=warmup, reason="must be 0 or more")
    if iters < 1:
        raise InvalidOptionError(option="iters", value=iters, reason="must be at least 1")
    with outside():
        for _ in range(warmup):
            cell.run(namespace)
    sync()
    value = None
    with inside():
        try:
            for _ in range(iters):
                value = None  # the previous run's value is not held while the next one runs
                value = cell.run(namespace)
        finally:
            sync()
    return value


def loop_notes(warmup: int, iters: int) -> list[str]:
    """What the loop means for the figures, said next to them."""
    notes = []
    if warmup == 0:
        notes.append(
            "No warm-up (-w 0): first-call costs (lazy init, autotuning) are in the capture."
        )
    if iters > 1:
        notes.append(f"The cell ran {iters} times inside the capture; totals cover all of them.")
    return notes


def namespace_or_new(namespace: Mapping[str, Any] | None) -> MutableMapping[str, Any]:
    """The namespace a cell runs in: the caller's, else a fresh module-like one."""
    if namespace is None:
        return {"__name__": "__main__"}
    if not isinstance(namespace, MutableMapping):
        raise TypeError(
            "the namespace must be a mutable mapping (a dict, or IPython's user namespace)"
        )
    return namespace
