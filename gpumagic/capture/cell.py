"""What every capture backend runs, and how: the cell, warmed up outside the capture, then run inside it.

One loop for all backends, so that torch.profiler in this process, the ``--nsys`` subprocess and the ones to come
warm up and repeat a cell the same way: ``warmup`` runs, a synchronization (the warm-up's GPU work must not spill into
the capture), then ``iters`` runs inside the capture context, synchronized before the context closes so that the
cell's GPU work lies inside its range. Light on purpose: the subprocess runner imports it before torch.
"""

from __future__ import annotations

import linecache
from collections.abc import Callable, Mapping, MutableMapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from types import CodeType
from typing import Any

__all__ = ["Cell", "compile_source", "loop_notes", "namespace_or_new", "run_cell"]

CELL_FILENAME = "<gpuprofile-cell>"


@dataclass(frozen=True)
class Cell:
    """The code a capture runs: ``source`` (what a subprocess needs), ``code`` (what runs here: a code object that
    IPython compiled, so tracebacks show the cell's lines, or a zero-argument callable), or both."""

    source: str | None = None
    code: CodeType | Callable[[], Any] | None = None

    @classmethod
    def of(cls, cell: Cell | str | CodeType | Callable[[], Any]) -> Cell:
        """A Cell from source text (compiled here, its lines registered for tracebacks), a code object or a
        callable."""
        if isinstance(cell, Cell):
            return cell
        if isinstance(cell, str):
            return cls(source=cell, code=compile_source(cell))
        if isinstance(cell, CodeType) or callable(cell):
            return cls(code=cell)
        raise TypeError(f"a cell is source text, a code object or a callable, not {type(cell).__name__}")

    def run(self, namespace: MutableMapping[str, Any]) -> None:
        """Run once: a code object in ``namespace`` (its assignments land there, as a normal run leaves them)."""
        code = self.code if self.code is not None else compile_source(self.source or "")
        if isinstance(code, CodeType):
            exec(code, namespace)  # noqa: S102 - the user's own cell
        else:
            code()


def compile_source(source: str, filename: str = CELL_FILENAME) -> CodeType:
    """Compile cell source, registering its lines with linecache so a traceback shows them."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(source, filename, "exec")


def run_cell(
    cell: Cell,
    namespace: MutableMapping[str, Any],
    warmup: int,
    iters: int,
    inside: Callable[[], AbstractContextManager[Any]] = nullcontext,
    sync: Callable[[], None] = lambda: None,
) -> None:
    """Warm up ``warmup`` times, synchronize, then run ``iters`` times inside ``inside()`` (the capture), synchronized
    before it closes. An exception propagates after the capture context has exited (profiler stopped, range popped)."""
    for _ in range(warmup):
        cell.run(namespace)
    sync()
    with inside():
        try:
            for _ in range(iters):
                cell.run(namespace)
        finally:
            sync()


def loop_notes(warmup: int, iters: int) -> list[str]:
    """What the loop means for the figures, said next to them."""
    notes = []
    if warmup == 0:
        notes.append("No warm-up (-w 0): first-call costs (lazy init, autotuning) are in the capture.")
    if iters > 1:
        notes.append(f"The cell ran {iters} times inside the capture; totals cover all of them.")
    return notes


def namespace_or_new(namespace: Mapping[str, Any] | None) -> MutableMapping[str, Any]:
    """The namespace a cell runs in: the caller's, else a fresh module-like one."""
    if namespace is None:
        return {"__name__": "__main__"}
    if not isinstance(namespace, MutableMapping):
        raise TypeError("the namespace must be a mutable mapping (a dict, or IPython's user namespace)")
    return namespace
