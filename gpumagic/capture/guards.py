"""What keeps an in-process capture from hurting the session it runs in.

- **One profiler at a time.** torch.profiler (Kineto) keeps one session per process: a profiler
  started inside another one crashes the interpreter when the outer one stops or exports (a
  segfault, on the CPU build too). So a capture refuses, before any work, when a profiler is already
  running (:func:`refuse_if_running`) or when the cell's source opens one
  (:func:`refuse_profiler_calls`, names resolved through the cell's imports and the namespace, so a
  user's own ``profile()`` is not mistaken for torch's). A profiler that a function the cell calls
  starts is caught at run time: during the warm-up it is recorded (:func:`watch_for_profilers`, the
  capture is then refused), inside the capture it is refused before it reaches Kineto
  (:func:`refuse_nested_profilers`).
- **Quiet starts and stops.** Kineto writes ``USDT: ... profiler_start``/``profiler_stop`` lines to
  file descriptor 2 from C++ (a red box under every notebook cell). :func:`quiet_profiler_stderr`
  points fd 2 at a file around the profiler's start and stop only (never around the cell), drops the
  known chatter and writes every other line on to ``sys.stderr``.
- **Ctrl-C at the wrong moment.** :func:`deferred_interrupts` holds a SIGINT during a cleanup (a
  profiler half stopped, an nsys left running) and raises it once the cleanup is done.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NoReturn

from ..edges import TorchValue
from ..errors import NestedProfilerError

__all__ = [
    "CHATTER",
    "deferred_interrupts",
    "profiler_calls",
    "profiler_running",
    "quiet_profiler_stderr",
    "refuse_if_running",
    "refuse_nested_profilers",
    "refuse_profiler_calls",
    "watch_for_profilers",
]

DROP_ONE = (
    "Drop %%gpuprofile (gpumagic's capture) or the cell's own profiler: one profiler at a time."
)

#: Kineto's log lines (``USDT:``/``STAGE:``/``INFO:`` date time pid:tid file.cpp:line]): chatter,
#: not messages.
CHATTER = re.compile(r"^(?:USDT|STAGE|INFO):\S+ \S+ \d+:\d+ \S+\.(?:cpp|cc|h):\d+\]")

#: The functions every torch profiler start goes through (torch.profiler.profile,
#: torch.autograd.profiler.profile, emit_nvtx, emit_itt, the legacy profiler), looked up as module
#: globals when a profiler starts.
_ENTRY_POINTS = (
    ("torch.autograd.profiler", "_prepare_profiler"),
    ("torch.autograd.profiler", "_run_on_profiler_start"),
    ("torch.autograd.profiler", "_enable_profiler"),
    ("torch.autograd.profiler_legacy", "_enable_profiler_legacy"),
)
_STARTS = {"start", "__enter__", "prepare_trace", "start_trace", "_prepare_trace", "_start_trace"}
_UNKNOWN = object()


# --- a profiler already running
# -----------------------------------------------------------------------------------


def profiler_running() -> str | None:
    """Which torch profiler is running in this process (its Python flag, or the C++ autograd state),
    or None."""
    import torch

    if getattr(torch.autograd.profiler, "_is_profiler_enabled", False):
        return "torch.profiler"
    try:
        if torch._C._autograd._profiler_enabled():
            return "the autograd profiler"
    except (AttributeError, RuntimeError):
        pass
    return None


def refuse_if_running(after_warmup: bool = False) -> None:
    """Raise :class:`NestedProfilerError` when a profiler is running (before ours starts)."""
    what = profiler_running()
    if what is None:
        return
    if after_warmup:
        raise NestedProfilerError(
            found=f"The cell's warm-up run left a profiler running ({what})",
            fix="Stop it inside the cell (a `with` block, or .stop()), or drop %%gpuprofile.",
        )
    raise NestedProfilerError(
        found=f"A profiler is already running in this process ({what}: %%gpuprofile inside a "
        f"`with profile():` "
        "block, or a profiler started and not stopped)",
        fix="Stop it first (leave its `with` block, or call its .stop()), then run "
        "%%gpuprofile on its own.",
    )


# --- a cell whose source opens a profiler
# -------------------------------------------------------------------------


def _profiler_classes() -> tuple[type, ...]:
    import torch.autograd.profiler as ap

    found = [getattr(ap, n, None) for n in ("profile", "emit_nvtx", "emit_itt")]
    for module, name in (
        ("torch.autograd.profiler_legacy", "profile"),
        ("torch.profiler.profiler", "_KinetoProfile"),
    ):
        found.append(getattr(sys.modules.get(module), name, None))
    return tuple(c for c in found if isinstance(c, type))


def _imported(path: str) -> object:
    """The object at dotted ``path`` among modules already imported (nothing is imported here), or
    _UNKNOWN."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        obj: object = sys.modules.get(".".join(parts[:i]))
        if obj is not None:
            for attr in parts[i:]:
                obj = getattr(obj, attr, _UNKNOWN)
                if obj is _UNKNOWN:
                    return _UNKNOWN
            return obj
    return _UNKNOWN


def _resolve(
    node: ast.expr,
    aliases: dict[str, str],
    namespace: Mapping[str, Any],
    classes: tuple[type, ...] = (),
) -> object:
    """What a name or dotted attribute stands for, without running anything: attributes are read on
    modules only."""
    if isinstance(node, ast.Name):
        if node.id in aliases:
            return _imported(aliases[node.id])
        return namespace.get(node.id, _UNKNOWN)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, aliases, namespace, classes)
        if isinstance(base, type(os)):
            return getattr(base, node.attr, _UNKNOWN)
        if node.attr in _STARTS and classes and isinstance(base, classes):
            return base  # prof.start() on a profiler made in an earlier cell
    return _UNKNOWN


def _run_now(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes of the code that runs when the cell runs: not the bodies of the functions and
    classes it defines (a function called later is caught when it starts a profiler)."""
    todo = list(ast.iter_child_nodes(tree))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def profiler_calls(source: str, namespace: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(line, code) of each place in the code ``source`` runs at once that opens a torch profiler: a
    call of a profiler class, a ``with`` over a profiler object, ``.start()`` on one. Names resolve
    through the cell's own imports, then the namespace; a user's own ``profile()`` is not
    torch's."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the run reports it
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = (
                    a.name if a.asname else a.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    classes = _profiler_classes()
    found: set[tuple[int, str]] = set()
    for node in _run_now(tree):
        target: ast.expr
        code: ast.expr
        if isinstance(node, ast.Call):
            target, code = node.func, node
        elif isinstance(node, ast.withitem) and not isinstance(node.context_expr, ast.Call):
            target, code = node.context_expr, node.context_expr
        else:
            continue
        obj = _resolve(target, aliases, namespace, classes)
        if (isinstance(obj, type) and issubclass(obj, classes)) or isinstance(obj, classes):
            text = ast.unparse(code)
            found.add((code.lineno, text if len(text) <= 60 else text[:57] + "..."))
    return sorted(found)


def refuse_profiler_calls(source: str | None, namespace: Mapping[str, Any]) -> None:
    """Raise :class:`NestedProfilerError` when the cell's source opens a profiler, before the cell
    runs."""
    calls = profiler_calls(source, namespace) if source else []
    if calls:
        where = "; ".join(f"line {line}: {code}" for line, code in calls)
        raise NestedProfilerError(found=f"The cell opens its own profiler ({where})", fix=DROP_ONE)


# --- a profiler started at run time
# -------------------------------------------------------------------------------


def _caller() -> str:
    """Where a profiler start came from: the innermost frame outside torch and gpumagic."""
    torch_dir = os.path.dirname(sys.modules["torch"].__file__ or "")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith((torch_dir, here)):
            return f"{frame.filename}, line {frame.lineno}, in {frame.name}"
    return "a call from the cell"


@contextmanager
def _entry_points_replaced(
    make: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> Iterator[None]:
    saved = []
    for module_name, attr in _ENTRY_POINTS:
        module = sys.modules.get(module_name)
        original = getattr(module, attr, None)
        if callable(original):
            saved.append((module, attr, original))
            setattr(module, attr, make(original))
    try:
        yield
    finally:
        for module, attr, original in reversed(saved):
            setattr(module, attr, original)


@contextmanager
def watch_for_profilers() -> Iterator[list[str]]:
    """Record where each profiler start during the block came from (the starts go ahead: no profiler
    of ours is running yet). The warm-up runs under it, so that a cell starting a profiler is
    refused before the capture."""
    seen: list[str] = []

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> TorchValue:
            seen.append(_caller())
            return original(*args, **kwargs)

        return recorded

    with _entry_points_replaced(make):
        yield seen


def refuse_started(seen: list[str]) -> None:
    """Raise :class:`NestedProfilerError` when the warm-up started a profiler (``seen`` from the
    watch)."""
    if seen:
        raise NestedProfilerError(
            found=f"The cell started a profiler during its warm-up run ({seen[0]})", fix=DROP_ONE
        )


@contextmanager
def refuse_nested_profilers() -> Iterator[None]:
    """While our profiler records, a profiler start (the cell's, directly or through any function)
    raises :class:`NestedProfilerError` before it reaches Kineto, instead of crashing the process
    later."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> NoReturn:
            raise NestedProfilerError(
                found=f"The cell started a profiler inside gpumagic's capture ({_caller()})",
                fix=DROP_ONE,
            )

        return refused

    with _entry_points_replaced(make):
        yield


# --- stderr and Ctrl-C
# --------------------------------------------------------------------------------------------


def _flush_stderr() -> None:
    try:
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        pass


@contextmanager
def quiet_profiler_stderr() -> Iterator[None]:
    """File descriptor 2 into a temporary file for the block (a profiler's start or stop, never the
    cell); then Kineto's chatter is dropped and every other line written on to ``sys.stderr``."""
    _flush_stderr()
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 to redirect: nothing to quieten
        saved = -1
    if saved < 0:
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            _flush_stderr()  # Python writes in the block, where sys.stderr is fd 2
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", errors="replace")
            kept = "".join(ln for ln in text.splitlines(keepends=True) if not CHATTER.match(ln))
            if kept:
                sys.stderr.write(kept)
                _flush_stderr()


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """A Ctrl-C (SIGINT) during the block waits for its end, then goes to the handler that was
    installed (Python's raises KeyboardInterrupt). Main thread only, and only over a Python-level
    handler; elsewhere a plain block."""
    previous = (
        signal.getsignal(signal.SIGINT)
        if threading.current_thread() is threading.main_thread()
        else None
    )
    if not callable(previous):
        yield
        return
    pending: list[tuple[int, Any]] = []
    signal.signal(signal.SIGINT, lambda signum, frame: pending.append((signum, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            previous(*pending[0])
