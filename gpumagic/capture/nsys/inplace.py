"""``%%gpuprofile --nsys`` in a kernel that runs under Nsight Systems: the cell profiled in place,
nothing shipped.

A kernel started by ``python -m gpumagic kernel install --nsys``'s spec runs as ``nsys launch
--session-new=NAME ... python -m ipykernel_launcher`` (``notebook/nsys_kernel.py``); its
environment names the session (:data:`SESSION_ENV`), the nsys that launched it (:data:`NSYS_ENV`)
and what that launch traces (:data:`TRACE_ENV`). Here a cell runs as the in-process path runs it,
in the user's namespace with the user's own objects, compiled code and CUDA graphs: its warm-up,
then ``nsys start --session=NAME -o STEM`` (Nsight Systems' interactive CLI, the case "start/stop
collection multiple times"), the captured runs inside the cell's NVTX range, ``nsys stop`` (one
report per cell), and the report exported and read as every ``--nsys`` report is. No child starts,
no torch import, no shipping.

What a process that lives for hours needs of nsys: nothing on ``nsys launch`` limits the session
(no ``--duration``), each cell's ``start`` names its own report, and nsys collects nothing between
cells. The reports stay under the profiles directory, one ``.nsys-rep`` and ``.sqlite`` per cell,
until removed (their paths are in each report's notes).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import CodeType
from typing import Any

from ...errors import InvalidOptionError, NsysFailedError
from .. import Capture
from ..cell import Cell, loop_notes, namespace_or_new, run_cell
from ..marks.cell_lines import marked_cell
from ..marks.code_marks import code_from_nvtx, nvtx_code_marks
from ..marks.function_ranges import function_table
from ..options import ITERS, WARMUP, NsysOptions, ready_profile_dir, split_start_args
from ..phases import Phases
from .warm import missed_range, settle_seconds, start_args

__all__ = ["NSYS_ENV", "SESSION_ENV", "TRACE_ENV", "capture", "session"]

#: The environment a kernel under nsys is given by its launcher: the session, the nsys binary,
#: and the ``-t`` it was launched with.
SESSION_ENV, NSYS_ENV, TRACE_ENV = (
    "GPUMAGIC_NSYS_SESSION",
    "GPUMAGIC_NSYS",
    "GPUMAGIC_NSYS_TRACE",
)
#: Seconds an ``nsys start`` or ``stop`` may take.
CLI_LIMIT = 120.0


def session() -> str | None:
    """This process' nsys session where it runs under ``nsys launch`` from gpumagic's kernel spec;
    else None."""
    return os.environ.get(SESSION_ENV) or None


def _cli(nsys: str, name: str, *args: str) -> tuple[list[str], int, str]:
    cmd = [nsys, *args[:1], f"--session={name}", *args[1:]]
    try:
        proc = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CLI_LIMIT
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return cmd, -1, str(exc)
    return cmd, proc.returncode, (proc.stdout + proc.stderr).strip()


def _nvtx() -> tuple[Callable[[str], Any], Callable[[], Any], Callable[[], None]]:
    """NVTX push and pop, and a device synchronization (none without CUDA)."""
    from ..marks.nvtx_calls import push_pop, synchronize

    return (*push_pop(), synchronize())


def capture(
    cell: Cell | str | CodeType | Callable[[], Any],
    label: str,
    *,
    namespace: Mapping[str, Any] | None = None,
    warmup: int = WARMUP,
    iters: int = ITERS,
    options: NsysOptions | None = None,
) -> Capture:
    """Run ``cell`` in ``namespace`` (its assignments land there, as a normal run leaves them):
    ``warmup`` runs, then ``iters`` runs between this session's ``nsys start`` and ``nsys stop``,
    inside the NVTX range ``label``; export the report and read it. A cell's exception propagates
    after the collection has stopped and the range is popped."""
    from .backend import export_sqlite, find_nsys
    from .sqlite import read_sqlite

    name = session()
    if name is None:
        raise RuntimeError(f"not under nsys: {SESSION_ENV} is unset")
    opts = options or NsysOptions()
    extra_args = opts.tool_args()
    launch_only = split_start_args(extra_args)[0]
    if launch_only:
        raise InvalidOptionError(
            option="--nsys-args",
            value=" ".join(launch_only),
            reason=(
                "these switches are nsys launch's, fixed when this kernel started under nsys; "
                "give them to `python -m gpumagic kernel install --nsys --nsys-args ...` and "
                "start a new kernel of that spec"
            ),
        )
    nsys = os.environ.get(NSYS_ENV) or find_nsys(opts.nsys_path)
    ns = namespace_or_new(namespace)
    stem = os.path.join(
        ready_profile_dir(opts.profile_dir), f"{time.strftime('%Y%m%d-%H%M%S')}-{_slug(label)}"
    )
    phases = Phases()
    push, pop, sync = _nvtx()
    warm_began = [time.time()]

    @contextmanager
    def outside() -> Iterator[None]:
        warm_began[0] = time.time()
        yield

    @contextmanager
    def inside() -> Iterator[None]:
        phases.add("warm-up", time.time() - warm_began[0])
        t = time.perf_counter()
        cmd, rc, out = _cli(
            nsys, name, "start", "-o", stem, "--force-overwrite=true", *start_args(extra_args)
        )
        if rc != 0:
            raise NsysFailedError(cmd, rc, out)
        time.sleep(settle_seconds())  # `nsys start` answers before its collection records
        phases.add("tool start", time.perf_counter() - t)
        t = time.perf_counter()
        push(label)
        try:
            with nvtx_code_marks(ns, functions):  # the by-code view's ranges, as NVTX
                yield
        finally:
            pop()
            phases.add("capture", time.perf_counter() - t)
            t = time.perf_counter()
            stop_cmd, stop_rc, stop_out = _cli(nsys, name, "stop")
            phases.add("tool stop/flush", time.perf_counter() - t)
        if stop_rc != 0:
            raise NsysFailedError(stop_cmd, stop_rc, stop_out)

    runnable = marked_cell(cell) if isinstance(cell, str) else Cell.of(cell)
    functions = function_table(ns, runnable.source)
    value = run_cell(runnable, ns, warmup, iters, inside, sync, outside)
    report = stem + ".nsys-rep"
    with phases.timed("export"):
        sqlite = export_sqlite(nsys, report)
    with phases.timed("reading"):
        trace = read_sqlite(sqlite)
    traced = os.environ.get(TRACE_ENV) or opts.trace
    notes = loop_notes(warmup, iters)
    if "nvtx" in traced.split(",") and missed_range(trace, label):
        notes.append(
            "The report lacks the cell's NVTX range: nsys' collection began after the cell had "
            "started, so some of its work may be missing. Run the cell again (the next waits "
            "longer after nsys start)."
        )
    trace.meta.update(
        label=label, nsys=nsys, phases=phases.rows, nsys_trace=traced, child="in place"
    )
    if "nvtx" in traced.split(","):
        source = runnable.source or (cell if isinstance(cell, str) else None)
        code_from_nvtx(trace, source, functions=functions)
    from .gpu_metrics import attach_counters

    attach_counters(trace, sqlite, asked=opts.counters)
    if "counters_note" in trace.meta:
        notes.append(trace.meta["counters_note"])
    notes += [
        f"Profiled in place: this kernel runs under nsys (session {name}); nothing was shipped.",
        f"report: {report}",
        f"SQLite export: {sqlite}",
    ]
    return Capture(
        trace, notes=notes, files={"report": report, "sqlite": sqlite}, value=value, phases=phases
    )


def _slug(label: str) -> str:
    from .backend import _slug as slug

    return slug(label)
