"""The errors of reading a job rank by rank (each a :class:`~gpumagic.errors.GpuMagicError`)."""

from __future__ import annotations

from ..errors import GpuMagicError

__all__ = ["JobRankError", "JobReadError"]


class JobReadError(GpuMagicError):
    """No report of the job could be read, or none of its kind was found (``detail`` says why)."""


class JobRankError(GpuMagicError, KeyError):
    """A rank the job does not have, or whose file cannot be read again (``detail``)."""

    def __str__(self) -> str:  # KeyError's own would quote the message
        return str(self.args[0]) if self.args else ""
