"""The functions a cell calls, marked in the trace with their own lines, so that the by-line view
can go on below a line that calls ``train_step(model, batch)``.

A cell's lines are ranges (``capture/marks/cell_lines.py``); the functions it calls were defined
elsewhere, in an earlier cell or a file of the user's, and the profiler records neither their calls
(its Python tracer costs +6-12% on a host-paced step, so it stays off) nor their lines. So each
such function the cell reaches by name, and those they reach in turn by the globals they read, is
given, for the captured runs only, a second code object: its own source compiled again with its
body in a range ``gpumagic function K NAME`` and each of its statements, at every depth, in a range
``gpumagic fline K LINE`` (K: the function's number in the capture). The function object stays
the same object (its ``__code__`` is swapped, then swapped back), so nothing that holds it, pickles
it or compares it sees a change, and its line numbers and file stay its own (tracebacks point where
they did).

Left as they are: functions whose source cannot be read, generators and coroutines (a range cannot
span a ``yield``), functions with free variables (a closure's cells belong to its code), methods,
``torch.compile``\\ d functions and anything in a library.
"""

from __future__ import annotations
import __future__

import ast
import functools
import inspect
import operator
import os
import sys
import textwrap
import types
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ...edges import UserValue
from .cell_inputs import free_names
from .cell_lines import counted_range, fast_range, imported, mark_body
from .compiled_functions import is_compiled_function

__all__ = [
    "FUNCTION_LINE_TEXT",
    "FUNCTION_RANGE_TEXT",
    "function_line",
    "function_range",
    "function_ranges",
    "function_table",
]

#: A function's call: its number in the capture and its name.
FUNCTION_RANGE_TEXT = "gpumagic function {} {}"
#: One of its statements: the function's number and the line (in its own file).
FUNCTION_LINE_TEXT = "gpumagic fline {} {}"
#: Most functions marked in one capture.
MOST = 200
_FUTURE = functools.reduce(
    operator.or_, (getattr(__future__, f).compiler_flag for f in __future__.all_feature_names)
)
_NOT_PLAIN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_LIBRARY_ROOTS = tuple(
    {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix) if p}
)


def function_range(token: int, name: str) -> AbstractContextManager[object]:
    """The range of one call of function ``token``."""
    return fast_range(FUNCTION_RANGE_TEXT.format(token, name))


def function_line(token: int, line: int) -> AbstractContextManager[object]:
    """The range of one run of a function's line (none past ``cell_lines.LINE_RUNS`` runs)."""
    text = FUNCTION_LINE_TEXT.format(token, line)
    return counted_range(text, text)


def _plain(fn: UserValue) -> bool:
    """Whether ``fn`` is a plain function whose code can be swapped: not a generator or coroutine,
    no closure, no method, not compiled."""
    if not isinstance(fn, types.FunctionType) or is_compiled_function(fn):
        return False
    code = fn.__code__
    return not (code.co_flags & _NOT_PLAIN or code.co_freevars or "." in fn.__qualname__)


def _users(fn: UserValue) -> bool:
    """Whether ``fn`` is a plain function of the user's own code."""
    if not _plain(fn):
        return False
    filename = fn.__code__.co_filename
    if filename.startswith("<") and not filename.startswith("<ipython-input"):
        return False  # exec'd or generated code: no source of its own
    path = os.path.realpath(filename) if not filename.startswith("<") else ""
    if path and (path.startswith(_LIBRARY_ROOTS) or "site-packages" in path):
        return False
    return "gpumagic" not in path.split(os.sep)


def _read_globals(code: types.CodeType) -> set[str]:
    """The global names a code object and the code nested in it (comprehensions, lambdas) read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _read_globals(const)
    return names


def function_table(namespace: Mapping[str, Any], source: str | None) -> list[dict[str, Any]]:
    """The functions to mark for a cell of ``source``: those its free names hold, then those their
    globals hold, each once, in the order met; per function ``token``, ``name``, ``path`` (how it
    is reached: a name of the namespace, then names of each function's globals), ``file``,
    ``first`` (its first line) and ``lines`` (its source lines). Plain data: it travels to a
    tool's subprocess as it is, which marks the same functions from it."""
    try:
        wanted: list[tuple[list[str], Any]] = [
            ([n], namespace.get(n)) for n in (free_names(source) if source else [])
        ]
    except SyntaxError:
        return []
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    while wanted and len(out) < MOST:
        path, fn = wanted.pop(0)
        if id(fn) in seen or not _users(fn):
            continue
        seen.add(id(fn))
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError):
            continue
        out.append(
            {
                "token": len(out) + 1,
                "name": fn.__qualname__,
                "path": path,
                "file": fn.__code__.co_filename,
                "first": int(first),
                "lines": [ln.rstrip("\n") for ln in lines],
            }
        )
        scope = fn.__globals__
        wanted += [([*path, n], scope.get(n)) for n in sorted(_read_globals(fn.__code__))]
    return out


def _reach(namespace: Mapping[str, Any], path: list[str]) -> UserValue:
    """The object ``path`` names: its first name in ``namespace``, each next one in the globals of
    the function before it."""
    obj: UserValue = namespace.get(path[0]) if path else None
    for name in path[1:]:
        obj = getattr(obj, "__globals__", {}).get(name)
    return obj


def _in(node: ast.stmt, body: list[ast.stmt], call: str, *args: Any) -> ast.stmt:
    item = ast.withitem(
        context_expr=ast.Call(
            func=imported(call, node, __name__), args=[ast.Constant(a) for a in args], keywords=[]
        )
    )
    return ast.copy_location(ast.With(items=[item], body=body), node)


def _marked_code(fn: types.FunctionType, entry: Mapping[str, Any]) -> types.CodeType | None:
    """``fn``'s code compiled again from ``entry``'s source with its ranges; None where that source
    is not ``fn``'s (edited since) or the new code would not fit the function."""
    token = int(entry["token"])
    try:
        tree = ast.parse(textwrap.dedent("\n".join(entry["lines"]) + "\n"))
    except SyntaxError:
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef) or node.name != fn.__code__.co_name:
        return None
    ast.increment_lineno(tree, int(entry["first"]) - 1)
    node.decorator_list = []
    doc = node.body[:1] if ast.get_docstring(node, clean=False) is not None else []
    body = mark_body(node.body[len(doc) :], lambda s: _in(s, [s], "function_line", token, s.lineno))
    call = _in(node, body or [ast.Pass()], "function_range", token, str(entry["name"]))
    node.body = [*doc, call]
    try:
        module = compile(  # with the function's own __future__ flags, not this module's
            ast.fix_missing_locations(tree),
            str(entry.get("file") or fn.__code__.co_filename),
            "exec",
            flags=fn.__code__.co_flags & _FUTURE,
            dont_inherit=True,
        )
    except (SyntaxError, ValueError):
        return None
    for const in module.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == fn.__code__.co_name:
            old = fn.__code__
            same = (old.co_argcount, old.co_kwonlyargcount, old.co_posonlyargcount, old.co_flags)
            new = (const.co_argcount, const.co_kwonlyargcount, const.co_posonlyargcount)
            if const.co_freevars or same[:3] != new or const.co_flags != same[3]:
                return None
            return const
    return None


def with_their_globals(
    namespace: Mapping[str, Any], table: list[dict[str, Any]]
) -> Mapping[str, Any]:
    """``namespace`` and the public names of the globals of the functions of ``table``: where the
    models those functions use are found (a subprocess's namespace holds only the cell's own names;
    the model a shipped ``step()`` trains travels in its globals)."""
    globals_of_each = (
        getattr(_reach(namespace, list(e["path"])), "__globals__", None) for e in table
    )
    # a notebook's own functions read the namespace itself: nothing to add
    scopes = [g for g in globals_of_each if g and g is not namespace]
    if not scopes:
        return namespace
    scope = dict(namespace)
    for globals_of in scopes:
        for key, value in globals_of.items():
            if not key.startswith("_"):
                scope.setdefault(key, value)
    return scope


@contextmanager
def function_ranges(
    namespace: Mapping[str, Any], table: list[dict[str, Any]]
) -> Iterator[list[dict[str, Any]]]:
    """Inside the block, each function of ``table`` (:func:`function_table`) that ``namespace``
    still holds runs its marked code; its own code again after it, whatever happens (a function
    the cell rebound or redefined is left as the cell left it). Yields the entries marked."""
    swapped: list[tuple[types.FunctionType, types.CodeType, types.CodeType]] = []
    marked = []
    try:
        for entry in table:
            fn = _reach(namespace, list(entry["path"]))
            # the table chose the user's functions; a subprocess's copy of one (shipped by value)
            # has a file name of the pickler's, so only its kind is checked here
            if not _plain(fn) or fn.__qualname__ != entry["name"]:
                continue
            code = _marked_code(fn, entry)
            if code is None:
                continue
            swapped.append((fn, fn.__code__, code))
            fn.__code__ = code
            marked.append(entry)
        yield marked
    finally:
        for fn, original, code in reversed(swapped):
            if fn.__code__ is code:
                fn.__code__ = original
