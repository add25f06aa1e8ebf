"""What a ``--nsys`` cell's report becomes, whether the cell ran in a subprocess (``backend.py``)
or in this kernel, under nsys itself (``inplace.py``).

Either way the report is exported with the nsys that recorded it (:func:`export_sqlite`, its
output read for the error it means: :func:`nsys_error`) and read as a Trace, both as phases of the
run; the trace is stamped with the run's facts (label, nsys, phases, what nsys
traced), the by-code ranges the cell's NVTX marks left are read back (only where nsys traced NVTX:
without it there are none), the GPU metrics attached; and the notes name the files kept. One home
for those steps, so that a cell profiled in place reads as one profiled in a subprocess.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any

from ...errors import NewerReportError, NoReportError, NsysError, NsysFailedError
from ...trace import Trace
from ..marks.code_marks import code_from_nvtx
from ..phases import Phases
from .gpu_metrics import attach_counters
from .sqlite import read_sqlite

__all__ = ["CellReport", "export_sqlite", "nsys_error", "traces_nvtx"]


def nsys_error(command: list[str], output: str, rc: int, files: list[str]) -> NsysError | None:
    """The error nsys' output and exit status mean, if any."""
    if re.search(
        r"newer than|created (?:in|by) (?:a )?newer|unsupported.*version", output, re.IGNORECASE
    ):
        return NewerReportError(output)
    if "No reports were generated" in output:
        return NoReportError(output)
    if rc != 0:
        return NsysFailedError(command, rc, output, files)
    return None


def export_sqlite(nsys: str, report: str, timeout: float = 600) -> str:
    """Export ``report`` to a fresh ``.sqlite`` next to it with the same nsys; return its path."""
    out = os.path.splitext(report)[0] + ".sqlite"
    if os.path.exists(out):
        os.remove(out)  # never reuse a stale or half-written export
    cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", out, report]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    err = nsys_error(cmd, proc.stdout + proc.stderr, proc.returncode, [])
    if err is not None:
        raise err
    if not os.path.exists(out):
        raise NsysFailedError(
            cmd, proc.returncode, f"nsys export wrote no {out}.\n{proc.stdout + proc.stderr}"
        )
    return out


def traces_nvtx(traced: str) -> bool:
    """Whether nsys' ``-t`` list ``traced`` records NVTX: without it no report holds the cell's
    range, nor the by-code view's."""
    return "nvtx" in traced.split(",")


@dataclass(frozen=True)
class CellReport:
    """One ``--nsys`` cell's run, as its report is read: the ``nsys`` that recorded it (and so
    exports it), the cell's ``label``, what nsys ``traced`` (its ``-t``), whether GPU metrics were
    asked for (``counters``), and the run's ``phases``, which the export and the reading join."""

    nsys: str
    label: str
    traced: str
    counters: bool
    phases: Phases

    def export(self, report: str) -> str:
        """The report exported to a fresh SQLite (the "export" phase); its path."""
        with self.phases.timed("export"):
            return export_sqlite(self.nsys, report)

    def read(self, sqlite: str) -> Trace:
        """The export read as a Trace (the "reading" phase)."""
        with self.phases.timed("reading"):
            return read_sqlite(sqlite)

    def finish(
        self,
        trace: Trace,
        sqlite: str,
        source: str | None,
        functions: list[dict[str, Any]],
        by_code: bool = True,
        **meta: Any,
    ) -> None:
        """Stamp ``trace`` with the run's facts (and ``meta``), read back its by-code ranges
        (``by_code``; ``source``: the cell's text for its lines, ``functions``: the table of the
        functions marked) and attach the export's GPU metrics."""
        trace.meta.update(
            label=self.label,
            nsys=self.nsys,
            phases=self.phases.rows,
            nsys_trace=self.traced,
            **meta,
        )
        if by_code and traces_nvtx(self.traced):
            code_from_nvtx(trace, source, functions=functions)
        attach_counters(trace, sqlite, asked=self.counters)

    @staticmethod
    def notes(trace: Trace, where: str, report: str | None, sqlite: str) -> list[str]:
        """The notes every ``--nsys`` report ends with: why GPU metrics are missing (where
        asked for and none came), ``where`` the cell ran, and the files kept."""
        return [
            *([trace.meta["counters_note"]] if "counters_note" in trace.meta else []),
            where,
            f"report: {report}" if report else "report: (not kept)",
            f"SQLite export: {sqlite}",
        ]
