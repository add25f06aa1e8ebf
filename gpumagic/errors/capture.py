"""What a capture can meet besides its tool: a trace that is not one, a file missing or not
writable, names that cannot be sent to the subprocess, a profiler started inside another."""

from __future__ import annotations

import os
from typing import Any

from .base import GpuMagicError


class TraceFormatError(GpuMagicError, ValueError):
    """A file is not a torch.profiler Chrome trace gpumagic can read: ``path`` and ``reason``."""

    template = "{path}: not a readable Chrome-trace JSON ({reason})"


class FileMissingError(GpuMagicError, FileNotFoundError):
    """A file to read does not exist: ``path``, and ``what`` it should have been (an nsys report, a
    trace)."""

    path: str | os.PathLike[str]
    template = "{what} {path} does not exist. Check the path{relative}."

    def extra_fields(self) -> dict[str, Any]:
        relative = (
            "" if os.path.isabs(self.path) else f" (a relative path is read from {os.getcwd()})"
        )
        return {"relative": relative}


class UnwritablePathError(GpuMagicError, ValueError):
    """A file cannot be written where asked: ``path``, ``option`` (what asked for it) and
    ``reason``."""

    template = (
        "{option}: cannot write {path} ({reason}). Choose a path in an existing, writable "
        "directory."
    )


class ShippingError(GpuMagicError, ValueError):
    """Some names the cell needs cannot be sent to the subprocess: ``problems`` maps each name to
    why."""

    problems: dict[str, str]
    template = (
        "These names cannot be sent to the subprocess that runs the cell:\n{lines}\n"
        'Each says what to do instead; --setup "..." runs code in the subprocess before the '
        "capture, and nothing has run yet."
    )

    def __init__(self, problems: dict[str, str]) -> None:
        super().__init__(problems=dict(problems))

    def extra_fields(self) -> dict[str, Any]:
        return {"lines": "\n".join(f"  {n}: {why}" for n, why in self.problems.items())}


class NestedProfilerError(GpuMagicError, RuntimeError):
    """A profiler would start inside another one, which crashes the process (torch.profiler / Kineto
    keeps one session): ``found`` says which profiler and where, ``fix`` what to do instead."""

    template = "{found}: a profiler started inside another one crashes the Python process. {fix}"
