"""Where a tool run's wall time goes: shipping, child start, torch import, CUDA init, warm-up,
capture, tool stop/flush, export, reading, report.

A run under nsys is several processes: the parent (this kernel) ships the inputs, starts the tool,
exports and reads; the child imports torch, starts CUDA, warms up and runs the captured iterations.
Each side times its own phases; the child writes its marks (wall-clock start and end of each phase)
to ``phases.json`` in the run's work dir (:class:`PhaseMarks`), the parent reads them back and
puts every phase in one ordered :class:`Phases`, with the gaps between the two sides named too
("child start": from the tool's start to the child's first mark; "tool stop/flush": from the
child's last mark to the tool's answer). Wall-clock times (``time.time``) are used because the two
sides are different processes on the same machine.

Light on purpose (no pandas, no torch at import): the child imports this before torch, to time the
torch import itself.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PHASES_FILE", "PhaseMarks", "Phases", "read_marks"]

#: The file the child writes its marks to, in the run's work dir.
PHASES_FILE = "phases.json"


@contextmanager
def _clocked(clock: Callable[[], float], done: Callable[[float, float], None]) -> Iterator[None]:
    """Time the block by ``clock`` and give ``done`` its start and end, even where it raises:
    the one timer of both sides, the child's marks (wall clock: two processes compare them) and
    the parent's phases (``perf_counter``: a duration within this process)."""
    start = clock()
    try:
        yield
    finally:
        done(start, clock())


class PhaseMarks:
    """The child's side: ``(name, start, end)`` in wall-clock seconds, written whole to
    ``phases.json`` (a parent may read the file while the child still runs)."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, float, float]] = []

    def mark(self, name: str) -> AbstractContextManager[None]:
        """The block as the mark ``name``, in wall-clock time (the parent reads it beside its
        own)."""
        return _clocked(time.time, lambda start, end: self.add(name, start, end))

    def add(self, name: str, start: float, end: float) -> None:
        self.marks.append((name, start, end))

    def write(self, directory: str, name: str = PHASES_FILE) -> None:
        path = os.path.join(directory, name)
        with open(path + ".part", "w", encoding="utf-8") as f:
            json.dump(self.marks, f)
        os.replace(path + ".part", path)


def read_marks(directory: str, name: str = PHASES_FILE) -> list[tuple[str, float, float]]:
    """The child's marks from ``directory`` (file ``name``); [] where it wrote none (it failed
    before, or an older runner)."""
    try:
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            return [(str(n), float(a), float(b)) for n, a, b in json.load(f)]
    except (OSError, ValueError, TypeError):
        return []


class Phases:
    """One run's phases in the order they happened: name -> seconds. Kept on the capture
    (``Capture.phases``) and, as a plain dict, in ``trace.meta["phases"]``; ``%%gpuprofile
    --phases`` shows it. A phase measured twice (two exports) adds up."""

    def __init__(self, rows: dict[str, float] | None = None) -> None:
        self.rows: dict[str, float] = dict(rows or {})

    def add(self, name: str, seconds: float) -> None:
        self.rows[name] = self.rows.get(name, 0.0) + max(0.0, seconds)

    def timed(self, name: str) -> AbstractContextManager[None]:
        """The block's seconds added to the phase ``name``."""
        return _clocked(time.perf_counter, lambda start, end: self.add(name, end - start))

    def add_child(
        self, marks: list[tuple[str, float, float]], started: float | None, ended: float | None
    ) -> None:
        """The child's ``marks``, with "child start" (``started``, when the parent started the
        tool, to the first mark) before them and "tool stop/flush" (the last mark to ``ended``,
        when the tool answered) after them, where those are given."""
        if not marks:
            return
        if started is not None:
            self.add("child start", marks[0][1] - started)
        for name, start, end in marks:
            self.add(name, end - start)
        if ended is not None:
            self.add("tool stop/flush", ended - marks[-1][2])

    @property
    def total(self) -> float:
        return sum(self.rows.values())

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 6) for k, v in self.rows.items()}

    def to_dataframe(self) -> pd.DataFrame:
        import pandas as pd

        total = self.total or 1.0
        return pd.DataFrame(
            {
                "Phase": list(self.rows),
                "Seconds": list(self.rows.values()),
                "Share": [v / total for v in self.rows.values()],
            }
        )

    def __repr__(self) -> str:
        width = max((len(n) for n in self.rows), default=5)
        lines = [f"{'phase':<{width}}  {'s':>7}  share"]
        total = self.total or 1.0
        for name, s in self.rows.items():
            lines.append(f"{name:<{width}}  {s:7.3f}  {s / total:5.0%}")
        lines.append(f"{'total':<{width}}  {self.total:7.3f}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from html import escape

        total = self.total or 1.0
        body = "".join(
            f"<tr><td>{escape(n)}</td><td style='text-align:right'>{s:.3f}</td>"
            f"<td style='text-align:right'>{s / total:.0%}</td></tr>"
            for n, s in self.rows.items()
        )
        return (
            "<table><thead><tr><th>phase</th><th>s</th><th>share</th></tr></thead>"
            f"<tbody>{body}<tr><td><b>total</b></td><td style='text-align:right'>"
            f"<b>{self.total:.3f}</b></td><td></td></tr></tbody></table>"
        )
