"""``%gputime``'s runs: one statement, or ``--compare`` / ``--sweep``. The magic (:mod:`.magics`)
parses the line and builds the options; the statements are read and compiled here, timed by the
core (:mod:`gpumagic.timing`), shown, and saved to the history."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from IPython.core.error import UsageError
from IPython.display import display

from ..edges import UserValue
from ..errors import GpuMagicError, TimingInterrupted
from ..timing import measure
from ..timing.statement import compile_statement
from .cell_syntax import labelled_statements, own_label, sweep_params
from .glue import notebook_advice, unquote, usage_error

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..history.saving import Recorder
    from ..timing import TimingOptions, TimingResult
    from ..timing.compare import ComparisonFailed
    from ..timing.compare_result import Comparison
    from ..timing.statement import CompiledStatement
    from ..timing.sweep_result import Sweep

__all__ = ["recorder_for", "time_many", "time_one"]


def recorder_for(history: str | None, args: argparse.Namespace) -> Recorder:
    """Where this run is saved (``-l``) and ``--vs``'s reference (a label or an id is looked up
    now, before the measurement: an unknown reference costs no time)."""
    from ..history.saving import Recorder

    if args.vs and (args.compare or args.sweep):
        raise UsageError(
            "%gputime: --vs compares one statement with a saved run, not --compare or --sweep"
        )
    try:
        return Recorder(history, label=unquote(args.label), vs=unquote(args.vs))
    except GpuMagicError as exc:
        raise usage_error("%gputime", exc) from None


def time_one(
    shell: InteractiveShell,
    args: argparse.Namespace,
    stmt: str,
    setup: str | None,
    *,
    options: TimingOptions,
    recorder: Recorder,
) -> TimingResult | None:
    """``%gputime STATEMENT``: measured, printed as one line, saved; returned with ``-o``."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    if args.baseline or args.zip:
        raise UsageError(
            "%gputime: "
            + ("--baseline goes with --compare" if args.baseline else "--zip goes with --sweep")
        )
    try:
        compiled = compile_statement(
            shell.transform_cell(stmt),
            shell.transform_cell(setup) if setup else None,
            shell.user_ns,
            ast_transform=shell.transform_ast,
        )
    except GpuMagicError as exc:  # top-level await: one line, no frames of gpumagic's
        raise usage_error("%gputime", exc) from None
    try:
        with shown_once({"": compiled}) as gated:
            result = measure(gated[""], shell.user_ns, options)
    except TimingInterrupted as exc:  # Ctrl-C: show what was measured, then stop the cell
        if not args.quiet:
            print(notebook_advice(str(exc.result), exc.result.hints))
        raise
    if args.counters:
        from ..gpu_activity.pm_sampling import in_process_counters_line

        result.notes.append(in_process_counters_line())
    result.advise_as(lambda text: notebook_advice(text, result.hints))  # also as Out[n]
    if not args.quiet:
        print(notebook_advice(str(result), result.hints))
    recorder.record(result, stmt, setup).print(quiet=args.quiet)
    return result if args.output else None


def time_many(
    shell: InteractiveShell,
    args: argparse.Namespace,
    stmt: str,
    setup: str | None,
    *,
    options: TimingOptions,
    cell_mode: bool,
    recorder: Recorder,
) -> Comparison | Sweep | None:
    """``--compare`` and ``--sweep``: the statements (and values) read here, the timing done by
    the core, the table displayed and saved."""
    __tracebackhide__ = True  # an error of the user's statement shows from their own code
    from ..timing.compare import ComparisonFailed, compare_compiled
    from ..timing.sweep import sweep

    if args.compare and not cell_mode:
        raise UsageError(
            "%gputime --compare needs the cell form: %%gputime --compare, one statement per line"
        )
    if args.baseline and not args.compare:
        raise UsageError(
            "%gputime: --baseline goes with --compare (it names one of the cell's labels)"
        )
    if args.zip and not args.sweep:
        raise UsageError(
            "%gputime: --zip goes with --sweep (it pairs the values of two parameters)"
        )
    try:
        stmts = labelled_statements(stmt) if args.compare else {own_label(stmt): stmt}
        stmts = {label: shell.transform_cell(src) for label, src in stmts.items()}
        setup = shell.transform_cell(setup) if setup else None
        params = None
        if args.sweep:
            params = sweep_params([unquote(s) or "" for s in args.sweep], shell.user_ns)
        else:
            compiled = {
                label: compile_statement(
                    src, setup, shell.user_ns, ast_transform=shell.transform_ast
                )
                for label, src in stmts.items()
            }
    except GpuMagicError as exc:
        raise usage_error("%gputime", exc) from None
    result: Comparison | Sweep
    try:
        if params is not None:
            at = {"zip": args.zip, "options": options, "ast_transform": shell.transform_ast}
            at["progress"] = None if args.quiet else _one_display()
            result = sweep(stmts, setup, params, shell.user_ns, **at)
        else:
            with shown_once(compiled) as gated:
                result = compare_compiled(gated, shell.user_ns, options, baseline=args.baseline)
    except TimingInterrupted as exc:  # Ctrl-C: show what was measured, then stop the cell
        if not args.quiet:
            partial = exc.result
            display(partial.advise_as(lambda text: notebook_advice(text, partial.hints)))
        raise
    except ComparisonFailed as exc:  # what was measured, then the statement's own error
        return _failed_lane(shell, args, exc)
    except GpuMagicError as exc:
        raise usage_error("%gputime", exc) from None
    result.advise_as(lambda text: notebook_advice(text, result.hints))  # also as Out[n]
    if args.counters:
        from ..gpu_activity.pm_sampling import in_process_counters_line

        print(in_process_counters_line())
    if not args.quiet and not args.output:  # with -o, shown once, as the cell's value
        display(result)
    recorder.record_many(result, stmts, setup).print(quiet=args.quiet)
    return result if args.output else None


def _failed_lane(
    shell: InteractiveShell, args: argparse.Namespace, exc: ComparisonFailed
) -> Comparison:
    """One statement of ``--compare`` raised during its samples: the comparison of what was
    measured (its row says why) is shown, then the statement's error is raised from the user's own
    code, so that the cell fails as under ``%timeit``. With ``-o`` the partial comparison is the
    cell's value instead, and the error is shown as its traceback and one line."""
    __tracebackhide__ = True  # the statement's error shows from the user's own code
    partial, error = exc.result, exc.error
    partial.advise_as(lambda text: notebook_advice(text, partial.hints))
    line = f"%gputime --compare: {exc.label!r} raised {partial.failed[exc.label]}"
    if args.output:
        shell.showtraceback((type(error), error, error.__traceback__))
        print(f"{line}; the comparison of what was measured is returned (-o), not saved")
        return partial
    if not args.quiet:
        display(partial)
    if hasattr(error, "add_note"):  # Python 3.11+
        error.add_note(f"{line}; the comparison of what was measured is shown above, not saved")
    raise error from None


class _Gate:
    """Stands for ``sys.stdout`` or ``sys.stderr`` while a statement is timed: what is written
    during a statement's first call passes through, the rest is counted and dropped (a statement
    that prints 1 MB wrote 31-38 MB into the notebook, once per repetition)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.open, self.held = stream, False, 0

    def write(self, text: str) -> int:
        if self.open:
            return self.stream.write(text)
        self.held += len(text)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno: the stream's own
        return getattr(self.stream, name)


@contextlib.contextmanager
def shown_once(statements: Mapping[str, CompiledStatement]) -> Iterator[dict[str, Any]]:
    """The statements with their output shown during each one's first call only, and silenced
    during the repetitions (warm-up, samples, the kernel and work passes); afterwards one line
    says how much was held back, where anything was. Only the first ``once()`` opens the gate:
    the timed loop is not wrapped, so the samples pay nothing for it."""
    __tracebackhide__ = True  # the statement's error shows from the user's own code
    gates = [_Gate(sys.stdout), _Gate(sys.stderr)]

    def first_shown(once: Callable[[], Any]) -> Callable[[], Any]:
        calls = [0]

        def run() -> UserValue:
            __tracebackhide__ = True  # the statement's error shows from the user's own code
            calls[0] += 1
            if calls[0] > 1:
                return once()
            for gate in gates:
                gate.flush()
                gate.open = True
            try:
                return once()
            finally:
                for gate in gates:
                    gate.open = False

        return run

    gated = {k: dataclasses.replace(c, once=first_shown(c.once)) for k, c in statements.items()}
    try:
        with contextlib.redirect_stdout(gates[0]), contextlib.redirect_stderr(gates[1]):
            yield gated
    finally:
        held = sum(gate.held for gate in gates)
        if held:
            print(
                f"The statement's output was shown once (its first call) and silenced during "
                f"its repetitions ({held:,} characters held back)."
            )


def _one_display() -> Callable[[str], None]:
    """A long sweep's progress as one display, updated in place: its estimate, then the latest
    point (a terminal shows each update as a line)."""
    lines: list[str] = []
    handle: list[Any] = []

    def say(line: str) -> None:
        lines[1:] = [line] if lines else []
        if not lines:
            lines.append(line)
        data = {"text/plain": "\n".join(lines)}
        if handle:
            handle[0].update(data, raw=True)
        else:
            handle.append(display(data, raw=True, display_id=True))

    return say
