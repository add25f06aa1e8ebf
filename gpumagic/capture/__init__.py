"""Capture backends: each runs a cell (or reads a saved trace) and returns a :class:`Capture`.

Every backend is called the same way, so the magic (and a script) can swap one for another::

    capture(cell, label, *, namespace=None, warmup=WARMUP, iters=ITERS, options=None) -> Capture

``cell`` is source text, a code object or a callable (in-process backends; a subprocess needs
source), ``label`` names the NVTX range around the captured runs, and ``options`` is the backend's
own dataclass (``capture/options.py``).

One folder per tool, each with its ``backend.capture``: ``torch/`` (torch.profiler in this
process), ``nsys/`` (a subprocess under Nsight Systems, and its SQLite reader), ``ncu/`` (Nsight
Compute); ``chrome/`` reads Chrome trace JSON, ``memory/`` the caching allocator. What they share:
``marks/`` (the ranges that name the code), ``child/`` (shipping a cell's names to a subprocess and
the script it runs), and at this level the loop every backend runs (``cell.py``), the options
(``options.py``), the guards that keep a capture from hurting the session (``guards.py``), the
phases of a tool run (``phases.py``) and finding the tools (``tools.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..edges import PrettyPrinter, UserValue

if TYPE_CHECKING:
    from ..trace import Trace
    from .phases import Phases

__all__ = ["Capture", "Shown"]


@dataclass
class Capture:
    """What a backend recorded: the ``trace``, ``notes`` that qualify it (sentences for the report),
    the ``files`` it kept, by role (``report``, ``sqlite``, ...), for the user to open with other
    tools, and ``value``: the cell's value (its trailing expression's) from the last captured run,
    as IPython would show it (None without one; a subprocess backend gives its printed form, a
    :class:`Shown`); ``phases``: where the run's wall time went (a ``capture.phases.Phases``, for
    the backends that time their phases; None otherwise)."""

    trace: Trace
    notes: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    value: UserValue = None
    phases: Phases | None = None


class Shown:
    """A value that stayed in another process, by its printed form: its repr is the repr it had
    there, so ``Out[n]`` shows the same text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_pretty_(self, p: PrettyPrinter, cycle: bool) -> None:
        p.text(self.text)
