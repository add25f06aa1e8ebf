"""A job read rank by rank: more reports than one Trace should hold, none readable, a rank it does
not have."""

from __future__ import annotations

from .base import GpuMagicError


class TooManyReportsError(GpuMagicError, ValueError):
    """A job of more reports than one Trace should hold (``detail``: how many, and what to do)."""


class JobReadError(GpuMagicError):
    """No report of the job could be read, or none of its kind was found (``detail`` says why)."""


class JobRankError(GpuMagicError, KeyError):
    """A rank the job does not have, or whose file cannot be read again (``detail``)."""

    def __str__(self) -> str:  # KeyError's own would quote the message
        return str(self.args[0]) if self.args else ""
