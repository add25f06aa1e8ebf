"""One Chrome-trace file that holds several ranks: read as the ranks it holds, not as one process.

Trace-merging scripts (Holistic Trace Analysis' and TraceLens' combiners, and the hand-written
ones users share) put every rank's events into one file: each event carries ``args.rank``, and
pids, thread ids and correlation ids are offset per rank so that they stay distinct. Read as one
process, such a file says "1 process on 4 GPUs", sums busy time over four GPUs beside one process's
window, and matches launches to kernels across ranks. So the file is split by rank first, each
rank read as a file of its own is read, and the ranks are stacked as a job's files are
(``reports.stack``): per-rank figures and findings, sums over GPUs labelled as such.

Where no event carries ``args.rank`` but the file still holds several processes that each launched
GPU work (a merge that only kept the pids distinct), each GPU stream is given to the process whose
launches its kernels' correlation ids match, and processes are numbered by first activity
("process N", never "rank N").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from ..edges import JsonValue
from ..trace import Trace
from ..trace.clock_alignment import align_on_collective

#: How many events with arguments are looked at before deciding that a file holds no rank tags:
#: a merge tags every event, so the first few hundred say it (and a plain file costs nothing).
_SAMPLE = 400
#: The categories a process's launches are made in, and those of the GPU's own activity.
_LAUNCH = {"cuda_runtime", "cuda_driver", "Runtime", "hip_runtime"}
_DEVICE = {
    "kernel",
    "Kernel",
    "gpu_memcpy",
    "Memcpy",
    "gpu_memset",
    "Memset",
    "gpu_user_annotation",
}


def rank_of(ev: JsonValue) -> int | None:
    """The ``args.rank`` an event was tagged with by a merge, or None."""
    if not isinstance(ev, dict):
        return None
    args = ev.get("args")
    r = args.get("rank") if isinstance(args, dict) else None
    return int(r) if isinstance(r, int) and not isinstance(r, bool) else None


def is_tagged(events: Iterable[Any]) -> bool:
    """Whether a merge tagged the events with their rank: told from the first :data:`_SAMPLE`
    events that have arguments."""
    sampled = (ev for ev in events if isinstance(ev, dict) and ev.get("args"))
    return any(rank_of(ev) is not None for _, ev in zip(range(_SAMPLE), sampled))


def split_by_rank(
    events: list[Any], tagged: bool | None = None
) -> dict[int, list[dict[str, Any]]] | None:
    """The events of each rank of a merged file, ranks in order; None unless it holds two or more.
    ``tagged``: :func:`is_tagged`'s answer where the caller has it already.

    Events without a tag (metadata, a merge's own spans) go with the rank of their pid where a
    tagged event has that pid, else to every rank. Untagged files: :func:`_split_by_process`."""
    if not (is_tagged(events) if tagged is None else tagged):
        return _split_by_process(events)
    pid_rank: dict[Any, int] = {}
    groups: dict[int, list[dict[str, Any]]] = {}
    untagged = []
    for ev in events:
        if not isinstance(ev, dict):
            continue
        r = rank_of(ev)
        if r is None:
            untagged.append(ev)
            continue
        groups.setdefault(r, []).append(ev)
        pid_rank.setdefault(ev.get("pid"), r)
    if len(groups) < 2:
        return None
    for ev in untagged:
        r = pid_rank.get(ev.get("pid"))
        for g in [groups[r]] if r is not None else groups.values():
            g.append(ev)
    return dict(sorted(groups.items()))


def _split_by_process(events: list[Any]) -> dict[int, list[dict[str, Any]]] | None:
    """Without rank tags: several processes that launched GPU work, each GPU pid given to the
    process whose launches' correlation ids its work carries. None for one process, or where a GPU
    pid's work matches no process unambiguously (then the file reads as it always did)."""
    if len(_launching_pids(events)) < 2:  # the usual file: one process, told in a light pass
        return None
    launches: dict[Any, set[int]] = {}
    device: dict[Any, Counter[int]] = {}
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = ev.get("cat")
        corr = (ev.get("args") or {}).get("correlation")
        if not isinstance(corr, int):
            continue
        if cat in _LAUNCH:
            launches.setdefault(ev.get("pid"), set()).add(corr)
        elif cat in _DEVICE:
            device.setdefault(ev.get("pid"), Counter())[corr] += 1
    if len(launches) < 2:
        return None
    owner: dict[Any, Any] = {}
    for gpu_pid, corrs in device.items():
        hits = Counter(
            {p: sum(n for c, n in corrs.items() if c in cs) for p, cs in launches.items()}
        )
        (best, n), *rest = [*hits.most_common(), (None, 0)]
        if n == 0 or (rest and rest[0][1] * 10 > n):  # nothing, or two processes claim it
            return None
        owner[gpu_pid] = best
    first: dict[Any, float] = {}
    for ev in events:
        if isinstance(ev, dict) and ev.get("pid") in launches and ev.get("ph") == "X":
            first[ev["pid"]] = min(first.get(ev["pid"], float("inf")), float(ev.get("ts") or 0))
    order = {pid: i for i, pid in enumerate(sorted(launches, key=lambda p: first.get(p, 0.0)))}
    groups: dict[int, list[dict[str, Any]]] = {i: [] for i in order.values()}
    for ev in events:
        if not isinstance(ev, dict):
            continue
        pid = ev.get("pid")
        proc = pid if pid in order else owner.get(pid)
        for g in [groups[order[proc]]] if proc is not None else groups.values():
            g.append(ev)
    return groups


def _launching_pids(events: list[Any]) -> set[Any]:
    """The pids of every event in a launch category (launches or not): at least those that
    :func:`_split_by_process` counts, from a pass that reads one field of each event (its full pass
    reads three and their arguments: 0.3 s of a 140 MB trace's load, this one 0.1 s)."""
    pids = set()
    for ev in events:
        try:
            if ev.get("cat") in _LAUNCH:
                pids.add(ev.get("pid"))
        except (AttributeError, TypeError):  # not an event object, or a category of a list
            continue
    return pids


def chrome_file_trace(
    path: str,
    read: Callable[[dict[str, Any], str], Any],
    stack: Callable[[list[Any], list[int] | None], Trace],
) -> Trace:
    """One Chrome-trace file as a Trace: its ranks stacked where it holds several
    (:func:`merged_trace`), else the file as one process. ``read`` and ``stack`` as for
    :func:`merged_trace`."""
    from ..capture.chrome.events import paused_gc
    from ..capture.chrome.reader import read_chrome_json, trace_from_chrome

    with paused_gc():  # one pause, parse to tables: on between them, it walks every parsed event
        data = read_chrome_json(path)
        trace = merged_trace(data, path, read, stack)
        if trace is None:
            trace = trace_from_chrome(data, path=path)
            trace.meta.setdefault("source", path)
        # freed while the collector is still off: switched back on with the parsed events alive,
        # its first collection walks every one of them (0.35 s of a 140 MB trace's load)
        del data
    return trace


def merged_trace(
    data: dict[str, Any] | list[Any],
    path: str,
    read: Callable[[dict[str, Any], str], Any],
    stack: Callable[[list[Any], list[int] | None], Trace],
) -> Trace | None:
    """A Trace of the ranks a merged Chrome trace holds, stacked as a job's files are, or None
    where the file holds one process. ``read`` makes one rank's report of its part of the file and
    ``stack`` stacks the reports (``reports.chrome_report`` and ``reports.stack``: passed in, as
    the reader of many files is the one that calls this)."""
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        return None
    tagged = is_tagged(events)
    groups = split_by_rank(events, tagged)
    if groups is None:
        return None
    head = {k: v for k, v in data.items() if k != "traceEvents"} if isinstance(data, dict) else {}
    reports = []
    for rank, evs in groups.items():
        part = {**head, "traceEvents": evs}
        if tagged:
            part["distributedInfo"] = {**(head.get("distributedInfo") or {}), "rank": rank}
        else:
            part.pop("distributedInfo", None)
        reports.append(read(part, path))
    trace = stack(reports, list(groups) if tagged else None)
    how = (
        "the rank every event of the file is tagged with (args.rank)"
        if tagged
        else "the order of the file's processes by first activity (no event names its rank)"
    )
    trace.meta.update(source=path, merged_ranks=len(groups), rank_rule=how)
    if not tagged:  # processes, not ranks: the views say "process N"
        trace.meta.pop("rank_marks", None)
    return align_on_collective(trace)  # two or more ranks: split_by_rank returns no fewer
