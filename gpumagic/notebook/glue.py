"""What every gpumagic magic does the same way in IPython: gpumagic's errors said as a one-line
``UsageError`` with ``%config`` advice, a cell's trailing ';', quoted option values, the running
cell's id, and a cell compiled as IPython compiles it (so tracebacks and stacks show its lines)."""

from __future__ import annotations

import sys
import tokenize
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from IPython.core.displayhook import DisplayHook
from IPython.core.error import UsageError

from ..errors import CellError, GpuMagicError, Hint

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..capture.cell import Cell

__all__ = [
    "capture_errors",
    "compile_cell",
    "ends_with_semicolon",
    "notebook_advice",
    "running_cell",
    "unquote",
    "usage_error",
]

#: What an interrupted in-process capture leaves behind, said on stderr.
INTERRUPTED = "Nothing was captured; no profiler is left running and the NVTX range is closed."


def notebook_advice(text: str, hints: Iterable[Hint]) -> str:
    """The core names a helpful setting as a keyword (``kernel_time=False``); in a notebook it is a
    ``%config``."""
    for hint in hints:
        text = text.replace(hint.script(), f"%config GpuMagics.{hint.setting} = {hint.value}")
    return text


def usage_error(prefix: str, exc: GpuMagicError) -> UsageError:
    """IPython's one-line error for a gpumagic error, its advice in ``%config`` words."""
    return UsageError(f"{prefix}: {notebook_advice(str(exc), exc.hints)}")


def ends_with_semicolon(source: str) -> bool:
    """A trailing ';' hides a cell's value, as in any IPython cell."""
    try:
        return bool(DisplayHook.semicolon_at_end_of_expression(source))
    except (SyntaxError, tokenize.TokenError):
        return False


def unquote(value: str | None) -> str | None:
    """magic_arguments keeps the quotes around a quoted value ('k = 1'): drop one matching pair."""
    if value and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


@contextmanager
def capture_errors(prefix: str, *, said: bool, fallback: str) -> Iterator[None]:
    """How a capture's failure reaches the notebook, for every backend: the cell's own error as its
    traceback and a one-line UsageError; gpumagic's errors with their advice in %config words; an
    interrupt said on stderr (what a subprocess backend stopped, when ``said``, else ``fallback``)
    and raised again."""
    try:
        yield
    except CellError as exc:
        print(exc.traceback, file=sys.stderr)
        raise UsageError(str(exc).splitlines()[0]) from None
    except GpuMagicError as exc:
        raise usage_error(prefix, exc) from None
    except KeyboardInterrupt as exc:
        print(f"{prefix}: interrupted. {(str(exc) if said else '') or fallback}", file=sys.stderr)
        raise


def running_cell(shell: InteractiveShell) -> tuple[Any, Any] | None:
    """(the front end's id of the running cell, this execution) where the kernel says it
    (JupyterLab sends a ``cellId`` with each execute request), so that re-running the cell whose
    report carried BokehJS carries it again; None in a terminal."""
    kernel = getattr(shell, "kernel", None)
    get_parent = getattr(kernel, "get_parent", None)
    parent = get_parent() if callable(get_parent) else getattr(shell, "parent_header", None)
    cell_id = ((parent or {}).get("metadata") or {}).get("cellId")
    return (cell_id, shell.execution_count) if cell_id else None


def compile_cell(shell: InteractiveShell, source: str, lines: bool = False) -> Cell:
    """The cell compiled as IPython runs it: registered with linecache (tracebacks and allocation
    stacks show its lines), IPython's AST transformers applied, its last expression kept apart.
    ``lines``: each line in its profiler range, for the by-line view
    (``capture/marks/cell_lines.py``)."""
    from ..capture.cell import Cell, compile_tree
    from ..capture.marks.cell_lines import mark_lines

    filename = shell.compile.cache(source)
    tree = shell.transform_ast(shell.compile.ast_parse(source, filename))
    code, last = compile_tree(mark_lines(tree) if lines else tree, filename)
    return Cell(source=source, code=code, last=last)
