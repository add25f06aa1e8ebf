"""Each kernel a CUDA graph replay ran, traced back to the launch that captured its node, so that
the by-code view puts it on the module and line that made it, not on ``g.replay()``.

A replay's kernels carry the correlation id of their ``cudaGraphLaunch``; which node each one is,
and which launch made that node, the trace does not say (torch.profiler records no graph node ids).
Where the graph was captured inside the trace, the capture is there: between
``cudaStreamBeginCapture`` and ``cudaStreamEndCapture`` on one thread, each kernel launch (recorded
with its op, its module's range and its line's range, though no kernel ran) made one kernel node,
in order. A replay whose kernels ran on one stream, as many as the capture launched, in the same
order of names at every replay of it, is that graph: its k-th kernel is the capture's k-th launch.
Anything else (a graph captured before the trace began, an earlier cell's; a capture that forked
onto other streams, whose replay runs branches side by side; a count or an order that does not
agree) is left on the line that replayed it and counted as such, never guessed. The graph's edges,
and so the critical path through its nodes, are not in a torch.profiler trace.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .coverage import LAUNCH_APIS, names_passing

if TYPE_CHECKING:  # named through the package: Trace's own module reaches this one (lazily)
    from . import Trace

__all__ = ["GraphOrigins", "graph_note", "graph_origins"]

_BEGIN = ("cudaStreamBeginCapture", "cuStreamBeginCapture", "hipStreamBeginCapture")
_END = ("cudaStreamEndCapture", "cuStreamEndCapture", "hipStreamEndCapture")
_REPLAY = tuple(name for name in LAUNCH_APIS if name.endswith("GraphLaunch"))
_KERNEL_LAUNCH = tuple(name for name in LAUNCH_APIS if not name.endswith("GraphLaunch"))
#: What makes a memset or memcpy node in a capture.
_MEMORY_LAUNCH = (
    "cudaMemsetAsync",
    "cudaMemcpyAsync",
    "cuMemsetD8Async",
    "cuMemsetD32Async",
    "cuMemcpyAsync",
    "cuMemcpyHtoDAsync",
    "cuMemcpyDtoHAsync",
    "cuMemcpyDtoDAsync",
    "hipMemsetAsync",
    "hipMemcpyAsync",
)


#: Per kind of replayed work (a kernel, a memory operation), the calls that made its nodes.
_KINDS = {True: _KERNEL_LAUNCH, False: _MEMORY_LAUNCH}


@dataclass
class GraphOrigins:
    """Per piece of work, the capture launch its graph node came from: ``at`` (ns; NaN where
    none) and ``thread``; and what the trace's graph replays held: ``replayed`` kernels in
    ``replays`` replays, ``traced`` of them traced back to ``captures`` captures (a replay's
    memsets and copies are traced back the same way, to the capture's own, and not counted)."""

    at: np.ndarray
    thread: list[Any]
    replayed: int = 0
    replays: int = 0
    traced: int = 0
    captures: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


def _base(name: object) -> str:
    """An API name without its version suffix (``cudaStreamBeginCapture_v10000``)."""
    return str(name).split("_v")[0]


def graph_origins(trace: Trace, work: pd.DataFrame) -> GraphOrigins:
    """The :class:`GraphOrigins` of ``work`` (rows with ``correlation``, ``start``, ``stream`` and
    ``kernel``: whether it is a kernel) in ``trace``."""
    n = len(work)
    out = GraphOrigins(at=np.full(n, np.nan), thread=[None] * n)
    api = trace.api
    if api.empty or not n or "correlation" not in work:
        return out

    def named(wanted: tuple[str, ...]) -> np.ndarray:  # each distinct name asked once
        return names_passing(api["name"], lambda name: _base(name) in wanted)

    replay_rows = api[named(_REPLAY)]
    if replay_rows.empty:
        return out
    replayed = work["correlation"].isin(replay_rows["correlation"]).to_numpy()
    is_kernel = work["kernel"].to_numpy(dtype=bool)
    by_corr: dict[tuple[bool, Any], list[int]] = defaultdict(list)
    for i in np.flatnonzero(replayed).tolist():  # only the replays' own work
        by_corr[(bool(is_kernel[i]), work["correlation"].iat[i])].append(i)
    begins, ends = named(_BEGIN), named(_END)
    captures = {
        kind: _captures(api, begins, ends, named(launch)) if begins.any() else []
        for kind, launch in _KINDS.items()
    }
    out.captures = len(captures[True])
    starts = work["start"].to_numpy()
    streams = work["stream"].to_numpy() if "stream" in work else np.full(n, None)
    names = work["name"].to_numpy()
    seen_order: dict[tuple[bool, int], list[str]] = {}
    for _, r in replay_rows.sort_values("start", kind="stable").iterrows():
        groups = {
            kind: sorted(by_corr.get((kind, r["correlation"]), []), key=lambda i: starts[i])
            for kind in (True, False)
        }
        if not any(groups.values()):
            continue
        out.replays += 1
        for kind, rows in groups.items():
            if not rows:
                continue
            if kind:
                out.replayed += len(rows)
            why = _why_not(rows, r, captures[kind], streams)
            if isinstance(why, str):
                if kind:
                    out.reasons[why] = out.reasons.get(why, 0) + len(rows)
                continue
            k, launches = why
            order = [str(names[i]) for i in rows]
            if seen_order.setdefault((kind, k), order) != order:
                if kind:
                    why = "replays of it ran different kernels"
                    out.reasons[why] = out.reasons.get(why, 0) + len(rows)
                continue
            for i, (at, thread) in zip(rows, launches, strict=True):
                out.at[i], out.thread[i] = at, thread
            if kind:
                out.traced += len(rows)
    return out


def _captures(
    api: pd.DataFrame, begin: np.ndarray, end: np.ndarray, launch: np.ndarray
) -> list[tuple[float, list[tuple[float, Any]]]]:
    """Each capture in the trace: its end (ns) and its launch calls (start, thread) in order;
    ``begin``, ``end``, ``launch``: which API rows begin and end a capture and launch a node."""
    out = []
    calls = api[begin | end | launch].assign(
        role=np.select([begin, end], ["begin", "end"], "launch")[begin | end | launch]
    )
    for thread, rows in calls.groupby("thread", sort=False):
        begins = rows[rows["role"] == "begin"].sort_values("start")
        ends = rows[rows["role"] == "end"].sort_values("start")
        launches = rows[rows["role"] == "launch"].sort_values("start", kind="stable")
        for s in begins["start"].tolist():
            after = ends[ends["start"] >= s]
            if after.empty:
                continue
            e = float(after["end"].iloc[0])
            inside = launches[(launches["start"] >= s) & (launches["start"] <= e)]
            out.append((e, [(float(t), thread) for t in inside["start"].tolist()]))
    return out


def _why_not(
    rows: list[int],
    replay: pd.Series,
    captures: list[tuple[float, list[tuple[float, Any]]]],
    streams: np.ndarray,
) -> tuple[int, list[tuple[float, Any]]] | str:
    """The capture a replay's kernels came from (its index and launches), or why none is known."""
    before = [k for k, (end, _) in enumerate(captures) if end <= float(replay["start"])]
    if not before:
        return "captured before the trace began"
    if len({streams[i] for i in rows}) > 1:
        return "its kernels ran on several streams (branches side by side)"
    fits = [k for k in before if len(captures[k][1]) == len(rows)]
    if not fits:
        return "no capture in the trace launched as many kernels"
    k = fits[-1]  # the latest capture that fits: a graph captured again replaces the old one
    return k, captures[k][1]


def graph_note(origins: GraphOrigins) -> str:
    """What the view says of the graphs it could not trace back ("" where all were)."""
    left = origins.replayed - origins.traced
    if not origins.replayed or not left:
        return ""
    why = "; ".join(
        f"{why}: {n}" for why, n in sorted(origins.reasons.items(), key=lambda x: -x[1])
    )
    traced = (
        f" ({origins.traced} traced to the module and line that captured them)"
        if origins.traced
        else ""
    )
    return (
        f"{left} of {origins.replayed} kernels ran from CUDA graph replays whose capture is not in "
        f"this trace ({why}){traced}: they stay where the replay ran (its line, and the module "
        "that called it if any); to see which code made each node, profile a cell that captures "
        "the graph and replays it."
    )
