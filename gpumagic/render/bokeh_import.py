"""Bokeh's import, started on a thread of its own while a report's tables are still being read.

Importing Bokeh's plotting and models costs about 0.9 s of CPU on a 2-core machine, and a report
cannot draw its timeline without it. Before that, a big export's tables are read by SQLite threads
that do not hold Python's GIL (``capture/nsys/columns.py``), and the main thread only waits for
them: the import runs in that wait instead of after it (the 1M-kernel report: about 0.5 s sooner).
Where Bokeh is imported already, or the import fails (the drawing then fails in the main thread with
Bokeh's own error), nothing changes.
"""

from __future__ import annotations

import sys
import threading

__all__ = ["BOKEH_MODULES", "start_bokeh_import"]

#: What the report's figures import; the thread imports them in this order.
BOKEH_MODULES = ("bokeh.models", "bokeh.plotting", "bokeh.embed")
_started = threading.Event()


def start_bokeh_import() -> threading.Thread | None:
    """Import :data:`BOKEH_MODULES` on a daemon thread, once per process: the thread, or None where
    they are imported already or a thread was started before. Python's per-module import locks let
    the main thread import the same modules meanwhile: it waits for the thread's import to finish
    and uses the same modules."""
    if all(m in sys.modules for m in BOKEH_MODULES) or _started.is_set():
        return None
    _started.set()
    thread = threading.Thread(target=_import_bokeh, name="gpumagic-bokeh-import", daemon=True)
    thread.start()
    return thread


def _import_bokeh() -> None:
    import importlib

    for name in BOKEH_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the main thread's own import reports it
            return
