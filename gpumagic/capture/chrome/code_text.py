"""What a torch.profiler trace says about the user's code, kept for the by-code view
(``gpumagic.trace.by_code``): its Python frames and each op's autograd sequence number.

Two kinds of events carry it, and the Trace's tables hold neither. ``python_function`` events
(recorded ``with_stack`` or ``with_modules``) are the Python calls, named ``file.py(LINE): func``
(LINE is the function's first line) or ``nn.Module: Block_1`` (a module's forward, one instance
name per class in the order the profiler first met them). ``cpu_op`` events carry a "Sequence
number" where autograd recorded a node: a forward op the number of the node it made, a backward op
the number of the node it runs (and a "Fwd thread id" above 0), which is how a backward kernel finds
the forward op, and so the module and line, that caused it. Built-in calls (``<built-in ...>``) are
left out: they are neither a line of the user's nor a module.

Kept in ``meta["code"]`` as plain lists (the meta stays JSON), read back as frames by
``gpumagic.trace.code_frames``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["code_events"]


def code_events(
    python_functions: list[Any], autograd: dict[str, list[Any]] | None = None
) -> dict[str, Any]:
    """``{"code": {...}}`` for a trace's meta, or ``{}`` where it has neither Python frames nor
    sequence numbers. ``frames``: name, start, end (ns), thread of each Python call but built-ins;
    ``autograd``: name, start, end, thread, seq, fwd_thread of each op that has a sequence
    number, as the reader of the ops table takes them in its own pass over the ops
    (``chrome_events.op_columns``); None where the trace has no ops."""
    frames = [
        ev
        for ev in python_functions
        if isinstance(ev, dict) and not str(ev.get("name", "")).startswith("<built-in")
    ]
    if autograd is None:
        autograd = {**_timed([]), "seq": [], "fwd_thread": []}
    if not frames and not autograd["seq"]:
        return {}
    return {"code": {"frames": _timed(frames), "autograd": autograd}}


def _timed(evs: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Name, start, end (integer ns, rounded as the Trace's tables are) and thread of events; those
    without a number ``ts`` left out."""
    kept, start, dur = [], [], []
    for ev in evs:
        try:
            s, d = float(ev["ts"]), float(ev.get("dur", 0) or 0)
        except (KeyError, TypeError, ValueError):
            continue
        kept.append(ev)
        start.append(s)
        dur.append(d)
    s_ns = np.rint(np.array(start, dtype=np.float64) * 1000.0).astype(np.int64)
    d_ns = np.rint(np.array(dur, dtype=np.float64) * 1000.0).astype(np.int64)
    return {
        "name": [str(ev.get("name", "")) for ev in kept],
        "start": s_ns.tolist(),
        "end": (s_ns + d_ns).tolist(),
        "thread": [ev.get("tid") for ev in kept],
    }
