"""Every error gpumagic raises on purpose: one base, fields that say what happened, a message that
says what to do.

A caller catches :class:`GpuMagicError` alone (the magics layer turns it into one red ``UsageError``
line) and can still read the facts an error carries (the path, the command, the exit code, the
tool's own text) without parsing its message. Each class writes its message from a template over its
fields, so the wording lives in one place.

The core speaks to scripts: where a setting would help, a message names it as a keyword
(``nsys_path='...'``) and lists it in ``hints``; the magics layer, and only it, respells a hint as
notebook advice (``%config GpuMagics...``). Several classes also derive from the built-in type that
the condition has always raised (``ValueError`` for bad input, ``RuntimeError`` for a failed tool),
so ``except ValueError`` in existing code keeps working.

By theme: :mod:`.base` (the base, hints, an unusable option, the interrupt that keeps what was
measured), :mod:`.tools` (what any tool can fail with), :mod:`.nsys`, :mod:`.ncu`, :mod:`.capture`
(traces and files, shipping names, nested profilers) and :mod:`.job`. Every name is imported from
here, ``gpumagic.errors``.
"""

from __future__ import annotations

from .base import (
    GpuMagicError,
    Hint,
    InvalidOptionError,
    TimingInterrupted,
    tail,
)
from .capture import (
    FileMissingError,
    NestedProfilerError,
    ShippingError,
    TraceFormatError,
    UnwritablePathError,
)
from .job import (
    JobRankError,
    JobReadError,
)
from .job import TooManyReportsError as TooManyReportsError
from .ncu import (
    NcuCellError,
    NcuError,
    NcuFailedError,
    NcuNotFoundError,
    NcuPermissionError,
    NcuReplayError,
    NcuTimeoutError,
    NoKernelsProfiledError,
)
from .nsys import (
    CellError,
    ExportFormatError,
    NewerReportError,
    NoCudaDataError,
    NoReportError,
    NotEnoughGpusError,
    NsysError,
    NsysExportError,
    NsysFailedError,
    NsysNotFoundError,
    NsysTimeoutError,
    RankError,
    TorchrunMissingError,
)
from .tools import ToolFailed as ToolFailed
from .tools import ToolNotFound as ToolNotFound
from .tools import ToolTimedOut as ToolTimedOut

__all__ = [
    "CellError",
    "ExportFormatError",
    "FileMissingError",
    "GpuMagicError",
    "Hint",
    "InvalidOptionError",
    "JobRankError",
    "JobReadError",
    "NcuCellError",
    "NcuError",
    "NcuFailedError",
    "NcuNotFoundError",
    "NcuPermissionError",
    "NcuReplayError",
    "NcuTimeoutError",
    "NestedProfilerError",
    "NewerReportError",
    "NoCudaDataError",
    "NoKernelsProfiledError",
    "NoReportError",
    "NotEnoughGpusError",
    "NsysError",
    "NsysExportError",
    "NsysFailedError",
    "NsysNotFoundError",
    "NsysTimeoutError",
    "RankError",
    "ShippingError",
    "TimingInterrupted",
    "TorchrunMissingError",
    "TraceFormatError",
    "UnwritablePathError",
    "tail",
]

# Each class answers to its public home: a traceback and a pickle name it as it is imported
# (``gpumagic.errors.NsysError``), not by the module of its theme.
for _exported in (*__all__, "ToolFailed", "ToolNotFound", "ToolTimedOut", "TooManyReportsError"):
    if isinstance(globals()[_exported], type):
        globals()[_exported].__module__ = __name__
del _exported
