"""Whether per-rank reports can be one job: what each report records of the job it ran in, and the
reasons, if any, why they cannot have run together.

Stacking any files into one Trace always succeeds, and per-rank views then compare ranks that never
waited for one another: a straggler, a skew and NCCL waits between two unrelated runs. Reports of
one job agree on what the launcher gave every rank (``TORCHELASTIC_RUN_ID``, the id torchrun's
agents share; ``SLURM_JOB_ID``; ``WORLD_SIZE``, or a torch.profiler trace's
``distributedInfo.world_size``), they were recorded at the same time (every rank is inside a
collective at once, and hosts' clocks agree to well under a second where they keep time by NTP:
hours apart is another run), and where every rank ran collectives, some of them are the same
collectives. A report that does not record a fact is not compared on it. Different GPU models are
said beside any of these reasons, never as one on their own (a job may mix GPUs).
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import pandas as pd

from ..edges import JsonValue

__all__ = ["CLOCKS_APART_NS", "RUN_ID_VARIABLES", "chrome_identity", "mismatch", "nsys_identity"]

#: Reports whose first recorded activity lies this far apart on their hosts' clocks are not one
#: capture of a job.
CLOCKS_APART_NS = 3600 * 10**9
#: The launcher's variables that every rank of one job shares, in the order they are compared.
RUN_ID_VARIABLES = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")
_ENV = re.compile(r'^([A-Z_]+)="?(.*?)"?$')


class _Report(Protocol):
    path: str
    meta: dict[str, Any]
    identity: dict[str, Any]

    @property
    def tables(self) -> dict[str, pd.DataFrame]: ...  # a RankSummary's is made on reading


def nsys_identity(con: sqlite3.Connection, tables: set[str]) -> dict[str, Any]:
    """What an nsys export records of its job: the launched process's ``TORCHELASTIC_RUN_ID``,
    ``SLURM_JOB_ID`` and ``WORLD_SIZE`` (META_DATA_CAPTURE), where present."""
    found: dict[str, Any] = {}
    if "META_DATA_CAPTURE" not in tables:
        return found
    wanted = (*RUN_ID_VARIABLES, "WORLD_SIZE")
    clause = " OR ".join("value LIKE ?" for _ in wanted)
    rows = con.execute(
        f"SELECT value FROM META_DATA_CAPTURE WHERE name LIKE "
        f"'PROCESS_%:ENVIRONMENT_VARIABLE' AND ({clause})",
        [f"{w}=%" for w in wanted],
    )
    for (value,) in rows:
        m = _ENV.match(str(value))
        if m and m.group(1) in wanted:
            found.setdefault(m.group(1), m.group(2))
    if "WORLD_SIZE" in found:
        found["world_size"] = _int(found.pop("WORLD_SIZE"))
    return found


def chrome_identity(data: Mapping[str, Any]) -> dict[str, Any]:
    """What a torch.profiler trace records of its job: ``distributedInfo.world_size``."""
    info = data.get("distributedInfo") or {}
    world = _int(info.get("world_size")) if isinstance(info, Mapping) else None
    return {"world_size": world} if world is not None else {}


def _int(value: JsonValue) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def mismatch(reports: Sequence[_Report], ranks: Sequence[int]) -> list[str]:
    """Why ``reports`` (with their ``ranks``) cannot be one job, one clause each; empty where
    nothing says so."""
    if len(reports) < 2:
        return []
    names = [f"rank {r}" for r in ranks]
    reasons = []
    for key in (*RUN_ID_VARIABLES, "world_size"):
        said = {
            n: r.identity[key] for n, r in zip(names, reports) if r.identity.get(key) is not None
        }
        if len(set(said.values())) > 1:
            what = "world sizes" if key == "world_size" else f"{key} values"
            reasons.append(f"their {what} differ ({_by_value(said)})")
    apart = _clocks_apart(reports, names)
    if apart:
        reasons.append(apart)
    common = _no_common_collective(reports)
    if common:
        reasons.append(common)
    if reasons:
        gpus = {n: r.meta.get("device") for n, r in zip(names, reports) if r.meta.get("device")}
        if len(set(gpus.values())) > 1:
            reasons.append(f"their GPUs differ ({_by_value(gpus)})")
    return reasons


def _by_value(said: Mapping[str, Any], most: int = 4) -> str:
    """ "a on rank 0, rank 2; b on rank 1", the first ``most`` values."""
    groups: dict[Any, list[str]] = {}
    for name, value in said.items():
        groups.setdefault(value, []).append(name)
    parts = [
        f"{value} on {', '.join(who[:3])}{' …' if len(who) > 3 else ''}"
        for value, who in groups.items()
    ]
    return "; ".join(parts[:most]) + (f"; {len(parts) - most} more" if len(parts) > most else "")


def _first_activity(report: _Report) -> int | None:
    starts = [
        int(df["start"].min())
        for df in report.tables.values()
        if not df.empty and "start" in df.columns
    ]
    return min(starts) if starts else None


def _clocks_apart(reports: Sequence[_Report], names: Sequence[str]) -> str:
    firsts = {n: _first_activity(r) for n, r in zip(names, reports)}
    known = {n: f for n, f in firsts.items() if f is not None}
    if len(known) < 2:
        return ""
    early, late = min(known, key=known.__getitem__), max(known, key=known.__getitem__)
    gap = known[late] - known[early]
    if gap < CLOCKS_APART_NS:
        return ""
    return (
        f"their recorded clocks are {_hours(gap)} apart ({late} starts {_hours(gap)} after {early})"
    )


def _hours(ns: int) -> str:
    hours = ns / 3.6e12
    return f"{hours:.1f} hours" if hours < 10 else f"{hours:,.0f} hours"


def _no_common_collective(reports: Sequence[_Report]) -> str:
    """Every report ran NCCL collectives and no collective's name is common to all of them."""
    from ..kernels import decode

    per: list[set[str]] = []
    for r in reports:
        k = r.tables.get("kernels")
        if k is None or k.empty:
            return ""
        nccl = {
            str(n).split("(")[0] for n in pd.unique(k["name"]) if decode(str(n)).family == "nccl"
        }
        if not nccl:
            return ""
        per.append(nccl)
    if set.intersection(*per):
        return ""
    return (
        "no NCCL collective is common to every report (each rank of one job runs the same "
        "collectives)"
    )


def short(path: str) -> str:
    return os.path.basename(path)
