"""``gpumagic.load_memory_snapshot`` and ``%%gpuprofile --memory``: an allocator snapshot read by
the capture layer (``capture.memory_snapshot``, ``capture.memory_cell``), analysed
(``analysis.memory``) and shown by the render layer (``render.memory_view.MemoryView``). It lives
above all three, as the magics do, so that none imports another upwards: a reader knows no HTML, a
view reads no file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..analysis.memory import analyze_memory, format_bytes
from ..capture.memory_snapshot import read_snapshot
from ..render.memory_view import MemoryView

__all__ = ["load_memory_snapshot", "memory_magic", "profile_cell_memory"]


def load_memory_snapshot(
    path: str | os.PathLike[str] | bytes | Mapping[str, Any],
    *,
    device: int | None = None,
    device_memory: int | None = None,
    top: int = 15,
) -> MemoryView:
    """Open a snapshot that ``torch.cuda.memory._dump_snapshot(path)`` wrote (or the dict
    ``_snapshot()`` returns), from this machine or any other, a run that ended in out-of-memory
    included: a :class:`MemoryView` of allocated and reserved memory over time by category, the
    exact peak and what was alive there by source line and op, and findings. ``device``: which
    device's history (default: the one with the most); ``device_memory``: the device's total bytes,
    which the snapshot does not record (the peak is then also said as a share of it)."""
    snap = read_snapshot(path, device=device)
    label = (
        os.path.basename(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else "snapshot"
    )
    return MemoryView(analyze_memory(snap, device_memory=device_memory), label=label, top=top)


def profile_cell_memory(
    shell: Any,
    cell: str,
    *,
    label: str,
    warmup: int,
    iters: int,
    top: int = 15,
    output: str | None = None,
    show: Callable[[Any], Any] = print,
) -> Any:
    """``%%gpuprofile --memory``: record the cell's allocations (``capture.memory_cell``), show the
    view with ``show``, keep it in ``shell.user_ns[output]`` when asked, and return the cell's
    value. A cell that raised (an out-of-memory error among others) is shown with what was alive
    when it failed, then its exception is raised again."""
    from ..capture.cell import Cell, compile_tree
    from ..capture.memory_cell import capture_memory

    source = shell.transform_cell(cell)
    filename = shell.compile.cache(
        source
    )  # registered with linecache: tracebacks and stacks show the cell's lines
    code, last = compile_tree(
        shell.transform_ast(shell.compile.ast_parse(source, filename)), filename
    )
    got = capture_memory(
        Cell(source=source, code=code, last=last),
        label,
        namespace=shell.user_ns,
        warmup=warmup,
        iters=iters,
    )
    analysis = analyze_memory(
        got.snapshot,
        device_memory=got.device_memory,
        known=got.known,
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
    if got.error is not None:
        raise got.error
    return got.value


def memory_magic(magics: Any, args: Any, cell: str, show: Callable[[Any], Any]) -> Any:
    """``%%gpuprofile --memory`` from the magic's parsed options (``magics``: the GpuMagics
    instance, for its settings, its checks of -w/-n/-o and the running cell); returns the cell's
    value."""
    from ..errors import InvalidOptionError
    from ..render import embed

    if args.nsys or args.ncu or args.trace:
        raise InvalidOptionError(
            option="--memory",
            value=True,
            reason="records in this process: not with --nsys, --ncu or --trace",
        )
    warmup = magics._run_options(args, cell)
    embed.ONCE.current_cell = magics._running_cell
    label = args.label or f"cell:{magics.shell.execution_count}"
    top = magics.report_options(top=args.top).top
    return profile_cell_memory(
        magics.shell,
        cell,
        label=label,
        warmup=warmup,
        iters=args.iters,
        top=top,
        output=args.output,
        show=show,
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
