"""``%%gpuprofile --memory``: the caching allocator's history for one cell (recorded by
``capture.memory.cell``), analysed (``analysis.memory``) and shown (``render.memory_view``), with
the checks every ``%%gpuprofile`` backend shares (:class:`~.profile_magic.CellRun`); the peak's
summary saved to the history (``-l NAME``) and compared with a saved run (``--vs``)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..analysis.memory import analyze_memory, format_bytes
from ..analysis.memory_diff import diff_memory, memory_summary
from ..edges import Shell, UserValue
from ..render.memory_view import MemoryView
from .glue import compile_cell

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..history.memory_runs import MemoryRecorder
    from .config import GpuMagicsConfig

__all__ = ["memory_magic", "profile_cell_memory"]


def profile_cell_memory(
    shell: Shell,
    cell: str,
    *,
    label: str,
    warmup: int,
    iters: int,
    top: int = 15,
    output: str | None = None,
    show: Callable[[Any], Any] = print,
    saver: MemoryRecorder | None = None,
) -> UserValue:
    """``%%gpuprofile --memory``: record the cell's allocations (``capture.memory.cell``), show the
    view with ``show``, keep it in ``shell.user_ns[output]`` when asked, and return the cell's
    value. A cell that raised (an out-of-memory error among others) is shown with what was alive
    when it failed, then its exception is raised again. ``saver``: where the run is saved, and
    what it is compared with (``--vs``)."""
    from ..capture.memory.cell import capture_memory

    got = capture_memory(
        compile_cell(shell, shell.transform_cell(cell)),
        label,
        namespace=shell.user_ns,
        warmup=warmup,
        iters=iters,
    )
    analysis = analyze_memory(
        got.snapshot,
        device_memory=got.device_memory,
        names=got.names,
        failed_request=_failed_request(got.error),
    )
    notes = list(got.notes)
    if got.peak_counter is not None:
        if got.peak_counter == analysis.peak_bytes:
            notes.append(
                "The peak equals the allocator's own max_memory_allocated() after the cell."
            )
        else:
            notes.append(
                f"The allocator's own max_memory_allocated() after the cell is "
                f"{format_bytes(got.peak_counter)} "
                f"({got.peak_counter - analysis.peak_bytes:+,} bytes from the history's peak: "
                f"the history counts "
                "each request rounded to 512-byte blocks; a cached block handed out whole "
                "can be bigger)."
            )
    view = MemoryView(analysis, label=label, top=top, notes=notes, error=got.error)
    if output:
        shell.user_ns[output] = view
    show(view)
    if saver is not None:
        summary = memory_summary(analysis)
        outcome = saver.record(summary, cell, got.device_name or "cuda", got.device_index)
        for line in outcome.lines:
            print(line)
        for note in outcome.notes:
            print(note, file=sys.stderr)
        if outcome.reference is not None:
            show(diff_memory(outcome.reference, summary, outcome.names))
    if got.error is not None:
        raise got.error
    return got.value


def memory_magic(
    config: GpuMagicsConfig,
    shell: InteractiveShell,
    args: argparse.Namespace,
    cell: str,
    show: Callable[[Any], Any],
) -> UserValue:
    """``%%gpuprofile --memory`` from the magic's parsed options; returns the cell's value."""
    from ..errors import InvalidOptionError
    from .profile_magic import CellRun

    if args.nsys or args.ncu or args.trace:
        raise InvalidOptionError(
            option="--memory",
            value=True,
            reason="records in this process: not with --nsys, --ncu or --trace",
        )
    from ..history.memory_runs import MemoryRecorder
    from .glue import unquote

    run = CellRun.from_args(config, shell, args, cell)
    # an unknown --vs reference is said before the cell runs
    saver = MemoryRecorder(config.history, label=args.label, vs=unquote(args.vs))
    return profile_cell_memory(
        shell,
        cell,
        label=run.label,
        warmup=run.warmup,
        iters=run.iters,
        top=config.report_options(top=args.top).top,
        output=run.output,
        show=show,
        saver=saver,
    )


_TRIED = re.compile(r"Tried to allocate ([0-9.]+) (B|KiB|MiB|GiB|TiB)")
_UNIT = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def _failed_request(error: BaseException | None) -> int | None:
    """The bytes an ``OutOfMemoryError`` says the cell asked for (its message, rounded to 2
    decimals), else None."""
    if error is None or type(error).__name__ != "OutOfMemoryError":
        return None
    found = _TRIED.search(str(error))
    return int(float(found[1]) * _UNIT[found[2]]) if found else None
