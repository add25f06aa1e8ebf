"""A whole job, read where its files are: each rank reduced to a summary where it is read, the
summaries folded as they finish, the job's views and findings made of them, and any rank's rows
read again on demand.

``gpumagic.job.read_job(paths, executor=..., client=...)`` gives a :class:`Job`;
``gpumagic.load_job(path)`` reopens one saved with :meth:`Job.save`. ``gpumagic.load_nsys(folder)``
still gives one Trace of every rank, every row in one process: right for a few ranks, and the
way to a rank's rows; a job of hundreds of ranks is read here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..errors import JobRankError, JobReadError

if TYPE_CHECKING:
    from .model import Job
    from .read import read_job

__all__ = ["Job", "JobRankError", "JobReadError", "load_job", "read_job"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: reading one export (``gpumagic.load_nsys``, this package's ``reports``)
    # must not pay for the job's model and its analyses (0.4 s of imports).
    if name == "Job":
        from .model import Job

        return Job
    if name == "read_job":
        from .read import read_job

        return read_job
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_job(path: str | os.PathLike[str]) -> Job:
    """A :class:`Job` from its saved summaries (the folder :meth:`Job.save` wrote), or read from
    per-rank reports where ``path`` holds those instead (a folder, a glob, a list)."""
    from .model import Job
    from .read import read_job
    from .store import load

    p = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if p is not None and os.path.exists(os.path.join(p, "job.json")):
        return Job(load(p))
    return read_job(path)
