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
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

from ...errors import InvalidOptionError, NsysFailedError
from .. import Capture
from ..cell import Cell, loop_notes
from ..in_process import CellHere
from ..marks.code_marks import nvtx_code_marks
from ..marks.nvtx_calls import push_pop, synchronize
from ..options import ITERS, WARMUP, NsysOptions, ready_profile_dir, report_stem, split_start_args
from ..phases import Phases
from .cell_report import CellReport, traces_nvtx
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
    from .backend import find_nsys

    name = session()
    if name is None:
        raise RuntimeError(f"not under nsys: {SESSION_ENV} is unset")
    opts = options or NsysOptions()
    extra_args = _start_only(opts.tool_args())
    nsys = os.environ.get(NSYS_ENV) or find_nsys(opts.nsys_path)
    stem = report_stem(ready_profile_dir(opts.profile_dir), label)
    run = CellReport(nsys, label, os.environ.get(TRACE_ENV) or opts.trace, opts.counters, Phases())
    collection = _Collection(nsys, name, stem, start_args(extra_args), run.phases)
    here = CellHere.prepare(cell, namespace)
    value = here.run(
        warmup, iters, lambda: collection.captured(label, here), synchronize(), collection.warm_up
    )
    report = stem + ".nsys-rep"
    sqlite = run.export(report)
    trace = run.read(sqlite)
    notes = loop_notes(warmup, iters)
    if traces_nvtx(run.traced) and missed_range(trace, label):
        notes.append(
            "The report lacks the cell's NVTX range: nsys' collection began after the cell had "
            "started, so some of its work may be missing. Run the cell again (the next waits "
            "longer after nsys start)."
        )
    run.finish(trace, sqlite, here.cell.source, here.functions, child="in place")
    where = f"Profiled in place: this kernel runs under nsys (session {name}); nothing was shipped."
    notes += run.notes(trace, where, report, sqlite)
    return Capture(
        trace,
        notes=notes,
        files={"report": report, "sqlite": sqlite},
        value=value,
        phases=run.phases,
    )


def _start_only(extra_args: list[str]) -> list[str]:
    """``extra_args`` where ``nsys start`` takes them all; those that only ``nsys launch`` takes
    are refused, naming where they go instead."""
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
    return extra_args


@dataclass
class _Collection:
    """One cell's collection in this kernel's nsys session: the warm-up watched
    (:meth:`warm_up`), then :meth:`captured`: ``nsys start`` (its report to ``stem``), the
    captured runs inside the cell's NVTX range and the by-code view's, and ``nsys stop`` however
    they end; each step a phase."""

    nsys: str
    session: str
    stem: str
    start_args: list[str]
    phases: Phases
    warm_began: float = field(default_factory=time.time)

    @contextmanager
    def warm_up(self) -> Iterator[None]:
        self.warm_began = time.time()
        yield

    @contextmanager
    def captured(self, label: str, here: CellHere) -> Iterator[None]:
        self.phases.add("warm-up", time.time() - self.warm_began)
        with self.phases.timed("tool start"):
            _checked(
                _cli(
                    self.nsys,
                    self.session,
                    "start",
                    "-o",
                    self.stem,
                    "--force-overwrite=true",
                    *self.start_args,
                )
            )
            time.sleep(settle_seconds())  # `nsys start` answers before its collection records
        push, pop = push_pop()
        began = time.perf_counter()
        push(label)
        try:
            with nvtx_code_marks(here.namespace, here.functions):  # the by-code view's, as NVTX
                yield
        finally:
            pop()
            self.phases.add("capture", time.perf_counter() - began)
            with self.phases.timed("tool stop/flush"):
                stopped = _cli(self.nsys, self.session, "stop")
        _checked(stopped)


def _checked(answer: tuple[list[str], int, str]) -> None:
    """An ``nsys start`` or ``stop`` that failed, as the error that names its command and
    output."""
    cmd, rc, out = answer
    if rc != 0:
        raise NsysFailedError(cmd, rc, out)
