"""The parent's side of a cell run in a tool's subprocess (``--nsys``, ``--ncu``): the private
directory the cell travels in, and what the child leaves there.

Both subprocess backends take the same steps around their tool: the cell must be source text (a
code object or a callable cannot travel); a fresh work dir receives the cell's names
(``shipping.py``) and then its ``cell.json``, written whole, which is what
``capture/child/runner.py`` runs and what a child started early waits for; the runner's
``error.txt`` (the cell's traceback) and ``value.txt`` (its value, printed) are read back; and the
directory goes, the notebook's shared CUDA storages released, however the run ends, a Ctrl-C
meanwhile waiting for the tidy-up. One home for those steps, so that the backends (and the warm
child's run) read the child's files alike.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from .. import Shown
from ..guards import deferred_interrupts
from .runner import write_whole
from .shipping import Manifest, free_names, release, ship

__all__ = ["WorkDir", "raise_cell_error", "shown_value", "source_text"]


def source_text(cell: object, tool: str) -> str:
    """``cell`` where it is source text, which a subprocess runs; a TypeError naming ``tool``'s
    backend otherwise."""
    if not isinstance(cell, str):
        raise TypeError(
            f"the {tool} backend runs the cell in a subprocess: give it the cell's source text"
        )
    return cell


class WorkDir:
    """A subprocess run's private directory (``path``), made at once. :meth:`ship` sends the cell
    into it; :meth:`close` (or leaving the ``with`` block) removes it and releases what was
    shipped."""

    def __init__(self, prefix: str) -> None:
        self.path = tempfile.mkdtemp(prefix=prefix)
        self.shipped: Manifest | None = None

    def ship(
        self,
        cell: str,
        setup: str | None,
        namespace: Mapping[str, Any] | None,
        spec: Mapping[str, Any],
        checked: Callable[[], None] | None = None,
        for_ranks: bool = False,
    ) -> Manifest:
        """The names ``cell`` and ``setup`` read, taken from ``namespace`` (``checked`` and
        ``for_ranks`` as :func:`shipping.ship` takes them), then ``cell.json``: the cell, the setup
        and ``spec`` (the loop's counts, the label, what else the runner is told), written whole
        and last, as the go-ahead a child started early waits for."""
        names = free_names(cell) + (free_names(setup) if setup else [])
        self.shipped = ship(names, namespace or {}, self.path, checked=checked, for_ranks=for_ranks)
        write_whole(self.path, "cell.json", json.dumps({"cell": cell, "setup": setup, **spec}))
        return self.shipped

    def close(self) -> None:
        """Remove the directory and release the shipped CUDA storages; a Ctrl-C meanwhile waits
        (the shipped tensors do not outlive an interrupted cell)."""
        with deferred_interrupts():
            shutil.rmtree(self.path, ignore_errors=True)
            release(self.shipped)

    def __enter__(self) -> WorkDir:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def raise_cell_error(workdir: str, error: Callable[[str], Exception]) -> None:
    """Raise ``error(traceback)`` where the runner wrote the cell's traceback to ``error.txt``."""
    path = os.path.join(workdir, "error.txt")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            raise error(f.read())


def shown_value(workdir: str) -> Shown | None:
    """The cell's value as the subprocess printed it (``value.txt``, written by the runner), or
    None."""
    path = os.path.join(workdir, "value.txt")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return Shown(f.read())
