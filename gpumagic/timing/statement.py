"""Turn a statement (source text or a callable) into a function that runs it n times, as ``%timeit``
does.

Why compile rather than ``eval`` each call: ``eval`` costs microseconds per call, which is the whole
run time of a small GPU kernel (CuPy's ``%gpu_timeit`` reads 1.2-3.5x slow on µs kernels for this
reason, cupy #9856). The statement is placed in the body of a ``for`` loop inside a function, so a
call costs one loop iteration.

The template::

    def __gm_factory():
        <setup>                      # runs once, before anything is timed
        def __gm_inner(__gm_n):      # the timed loop
            for __gm_i in range(__gm_n):
                <stmt>
        def __gm_once():             # one call that returns the last expression's value
            <stmt, last expression returned>
        return __gm_inner, __gm_once

Names the statement assigns stay local to that function, so the user's namespace is untouched (as
with ``%timeit``); names assigned by both setup and statement are declared ``nonlocal`` so ``x +=
1`` works on the setup's ``x``. The statement and setup are compiled on their own first so that a
``SyntaxError`` points at the user's own line, not at the template.
"""

from __future__ import annotations

import ast
import itertools
import linecache
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

from ..errors import GpuMagicError
from .compiled_calls import compiled_objects, is_compiled

__all__ = ["AwaitedStatementError", "CompiledStatement", "caller_globals", "compile_statement"]

_counter = itertools.count(1)


@dataclass
class CompiledStatement:
    """What the timer runs: ``inner(n)`` runs the statement n times; ``once()`` runs it once and
    returns its value."""

    inner: Callable[[int], None]
    once: Callable[[], object]
    read_names: frozenset[str] = field(default_factory=frozenset)
    source: str = ""
    compile_time: float = 0.0
    #: the names it reads that are bound to torch.compile'd code (``compiled_objects``)
    compiled_names: tuple[str, ...] = ()


class _ScopeBindings(ast.NodeVisitor):
    """Names bound at one scope's own level (not inside nested functions, classes or
    comprehensions)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.names.add(node.id)

    def _bind_only(self, node: ast.AST) -> None:
        name = getattr(node, "name", None)
        if name:
            self.names.add(name)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _bind_only

    def _own_scope(self, node: ast.AST) -> None:
        """A lambda or a comprehension: the names it binds are its own, not the scope's."""

    visit_Lambda = visit_ListComp = visit_SetComp = visit_DictComp = _own_scope
    visit_GeneratorExp = _own_scope

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            self.names.add((alias.asname or alias.name).split(".")[0])

    visit_ImportFrom = visit_Import


def _bound_names(body: list[ast.stmt]) -> set[str]:
    finder = _ScopeBindings()
    for node in body:
        finder.visit(node)
    return finder.names


def _read_names(trees: list[ast.AST]) -> frozenset[str]:
    return frozenset(
        node.id
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    )


def _returning_last_expression(body: list[ast.stmt]) -> list[ast.stmt]:
    body = list(body)
    if body and isinstance(body[-1], ast.Expr):
        body[-1] = ast.Return(value=body[-1].value)
    return body or [ast.Pass()]


class AwaitedStatementError(GpuMagicError, SyntaxError):
    """A statement that awaits at its top level (``await``, ``async for``, ``async with``):
    ``source``. A SyntaxError too, which is what it raised before it had a message of its own."""

    template = (
        "cannot time {source}: it awaits, and a timed statement must run to completion on each "
        "of its calls, outside any event loop. Time the synchronous work the coroutine does (the "
        "torch calls inside it), or, where no event loop is running (a script, a terminal), run "
        "it to completion in the statement: asyncio.run(...)"
    )


def _parse(source: str, filename: str) -> ast.Module:
    # Compile on its own first: invalid code can become valid inside the template (a bare `return`),
    # and a SyntaxError raised here carries the user's own line numbers.
    try:
        compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError:
        if _awaits(source):  # IPython's top-level await: an error that says so, not 'outside'
            line = source.strip().splitlines()[0]
            raise AwaitedStatementError(source=repr(line[:60] + "..." * (len(line) > 60))) from None
        raise
    return ast.parse(source, filename=filename)


def _awaits(source: str) -> bool:
    """Whether ``source`` compiles once top-level ``await`` is allowed (it did not without)."""
    try:
        compile(source, "<await>", "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError:
        return False
    return True


def _from_callable(
    stmt: Callable[[], object], setup: Callable[[], object] | None
) -> CompiledStatement:
    if setup is not None:
        setup()

    def inner(n: int) -> None:
        for _ in range(n):
            stmt()

    return CompiledStatement(
        inner=inner,
        once=stmt,
        source=getattr(stmt, "__qualname__", repr(stmt)),
        compiled_names=("<the callable>",) if is_compiled(stmt) else (),
    )


def caller_globals(globals: Mapping[str, object] | None) -> Mapping[str, object]:
    """The namespace a statement runs in: ``globals`` as given, else the module globals of the code
    that called the public function calling this one (``gputime``, ``compare``, ``sweep``), as a
    statement typed at that point would see them."""
    return globals if globals is not None else sys._getframe(2).f_globals


def compile_statement(
    stmt: str | Callable[[], object],
    setup: str | Callable[[], object] | None = None,
    globals: Mapping[str, object] | None = None,
    *,
    ast_transform: Callable[[ast.Module], ast.Module] | None = None,
) -> CompiledStatement:
    """Compile ``stmt`` (and ``setup``, run once now) against ``globals`` into a
    :class:`CompiledStatement`.

    ``ast_transform`` receives the filled template (IPython passes ``shell.transform_ast``, as
    ``%timeit`` does). Raises ``SyntaxError`` for invalid code and ``TypeError`` for a statement
    that is neither text nor callable.
    """
    if callable(stmt):
        if setup is not None and not callable(setup):
            raise TypeError("with a callable statement, setup must be a callable too (or None)")
        return _from_callable(stmt, setup)
    if not isinstance(stmt, str):
        raise TypeError(f"statement must be source text or a callable, not {type(stmt).__name__}")
    if setup is not None and not isinstance(setup, str):
        raise TypeError("with a source-text statement, setup must be source text too (or None)")
    if not stmt.strip():
        raise ValueError("empty statement: give the code to time, e.g. gputime('A @ B')")

    t0 = time.perf_counter()
    stmt_tree = _parse(stmt, "<gputime-stmt>")
    setup_tree = _parse(setup or "pass", "<gputime-setup>")
    module = _template(stmt, stmt_tree, setup_tree)
    if ast_transform is not None:
        module = ast_transform(module)
    ast.fix_missing_locations(module)
    code = _compiled_with_source(module)
    compile_time = time.perf_counter() - t0

    namespace: dict[str, Any] = {}  # Any: what the exec'd factory binds
    exec(code, _exec_globals(globals), namespace)  # noqa: S102 - running user code is the point
    inner_fn, once_fn = namespace["__gm_factory"]()  # runs setup
    read = _read_names([stmt_tree, setup_tree])
    return CompiledStatement(
        inner=inner_fn,
        once=once_fn,
        read_names=read,
        source=stmt,
        compile_time=compile_time,
        compiled_names=tuple(compiled_objects(read, globals)),
    )


def _template(stmt: str, stmt_tree: ast.Module, setup_tree: ast.Module) -> ast.Module:
    """The module docstring's template filled in: ``__gm_factory`` runs the setup and returns the
    timed loop ``__gm_inner(n)`` and the one call ``__gm_once()``, which share the setup's names
    the statement assigns (``nonlocal``)."""
    shared = sorted(_bound_names(setup_tree.body) & _bound_names(stmt_tree.body))
    nonlocal_decl: list[ast.stmt] = [ast.Nonlocal(names=shared)] if shared else []
    loop = ast.For(
        target=ast.Name("__gm_i", ast.Store()),
        iter=ast.Call(ast.Name("range", ast.Load()), [ast.Name("__gm_n", ast.Load())], []),
        body=stmt_tree.body,
        orelse=[],
    )
    inner = _function("__gm_inner", ["__gm_n"], [*nonlocal_decl, loop])
    returning = _returning_last_expression(ast.parse(stmt).body)
    once = _function("__gm_once", [], [*nonlocal_decl, *returning])
    both = ast.Tuple(
        [ast.Name("__gm_inner", ast.Load()), ast.Name("__gm_once", ast.Load())], ast.Load()
    )
    factory = _function("__gm_factory", [], [*setup_tree.body, inner, once, ast.Return(both)])
    return ast.Module(body=[factory], type_ignores=[])


def _function(name: str, params: list[str], body: list[ast.stmt]) -> ast.FunctionDef:
    """``def name(*params): body``, undecorated. One place for the node's fields, which change with
    Python's version: ``type_params`` is a field from 3.12 on (and given explicitly there), unknown
    before."""
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(p) for p in params],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[],
    )
    if sys.version_info >= (3, 12):
        return ast.FunctionDef(name=name, args=args, body=body, decorator_list=[], type_params=[])
    return ast.FunctionDef(name=name, args=args, body=body, decorator_list=[])


def _compiled_with_source(module: ast.Module) -> CodeType:
    """Compile from the unparsed text and register it with linecache, so a traceback through the
    statement shows the line that failed instead of "<gputime-3> line 5"."""
    source = ast.unparse(module)
    filename = f"<gputime-{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    return compile(source, filename, "exec", dont_inherit=True)


def _exec_globals(globals: Mapping[str, object] | None) -> dict[str, object]:
    """The globals the statement runs in: the namespace given, itself and not a copy, so that the
    statement reads it as it is when it runs (``exec`` takes nothing but a dict: any other mapping
    is copied once)."""
    if globals is None:
        return {}
    return globals if isinstance(globals, dict) else dict(globals)
