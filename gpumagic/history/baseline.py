"""Baselines for CI: the latest saved result of each statement written to a file, and a check of the
latest results against it that re-runs nothing (``python -m gpumagic history --export FILE``,
``python -m gpumagic check FILE``).

A result is matched to its baseline by label, statement, the statement's name in its run and a sweep
point's values; the comparison is :func:`gpumagic.history.versus.ratio_ci`'s, on the raw samples
both sides keep. A check fails on a *significant* slowdown *beyond* the threshold: the interval
above 1 and the ratio above 1 + threshold, so neither noise nor a real but negligible change fails a
build.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..edges import JsonValue
from .provenance import MEASURED_ON
from .query import select
from .rows import RESULT_COLUMNS, unpack_samples
from .store import Store
from .versus import RatioCI, differences, ratio_ci

__all__ = ["FORMAT", "CheckEntry", "check", "entry_key", "export", "read_baseline"]

FORMAT = "gpumagic-history-baseline"
VERSION = 1
#: What a baseline keeps of each result besides its samples: the history's columns of a result and
#: where it was measured, with the keys that find the same measurement in another store.
_KEPT = ("uid", "stmt_key", *RESULT_COLUMNS, *MEASURED_ON, "device_key", "host")


def entry_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes a result "the same measurement" in another run."""
    return (row.get("label"), row.get("stmt_key"), row.get("variant"), row.get("params"))


def latest_per_key(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:  # oldest first: a later one replaces
        found.pop(entry_key(row), None)
        found[entry_key(row)] = dict(row)
    return list(found.values())


def export(
    store: Store,
    path: str | os.PathLike[str],
    *,
    label: str | None = None,
    statement: str | None = None,
    device: str | None = None,
) -> int:
    """Write the latest result of each statement (filtered) with its samples to ``path`` (JSON); how
    many."""
    rows = latest_per_key(select(store, label=label, statement=statement, device=device))
    results = [
        {**{k: row.get(k) for k in _KEPT}, "samples": unpack_samples(row.get("samples"))}
        for row in rows
    ]
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "exported": time.time(),
        "source": str(store.path),
        "results": results,
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    return len(results)


def read_baseline(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The baseline file's contents; ValueError where it is not one."""
    with open(path, encoding="utf-8") as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(
            f"{path}: not a gpumagic baseline (write one with: python -m gpumagic history "
            f"--export FILE)"
        )
    version = doc.get("version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError(f"{path}: its 'version' is {version!r}, not a whole number")
    if version > VERSION:
        raise ValueError(
            f"{path}: baseline format {doc.get('version')} is newer than this gpumagic reads"
        )
    results = doc.get("results", [])
    if not isinstance(results, list):
        raise ValueError(f"{path}: its 'results' is not a list of results")
    for i, entry in enumerate(results, 1):
        problem = _entry_problem(entry)
        if problem:  # a malformed entry crashed check with exit 1, which means "slower"
            raise ValueError(f"{path}: result {i} {problem}")
    return doc


def _entry_problem(entry: JsonValue) -> str | None:
    """What is wrong with one baseline result, or None."""
    if not isinstance(entry, dict):
        return f"is {type(entry).__name__}, not an object"
    samples = entry.get("samples")
    if not isinstance(samples, list) or not samples:
        return "has no 'samples' (a list of seconds)"
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in samples):
        return "has samples that are not numbers"
    if not all(math.isfinite(v) and v >= 0 for v in samples):
        return "has samples that are negative, NaN or infinite"
    created = entry.get("created")
    if created is not None and not isinstance(created, (int, float)):
        return f"has a 'created' of {created!r}, not a time"
    for key in ("statement", "stmt_key", "device", "label", "uid", "variant", "params"):
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            return f"has a '{key}' of {type(value).__name__}, not text"
    return None


@dataclass
class CheckEntry:
    """One baseline result against the latest saved result of the same measurement (None: there is
    none)."""

    baseline: dict[str, Any]
    current: dict[str, Any] | None
    stats: RatioCI | None = None
    failed: bool = False
    warnings: list[str] = field(default_factory=list)


def check(
    store: Store, baseline: Mapping[str, Any], *, fail_above: float = 0.05
) -> list[CheckEntry]:
    """Each baseline result against the latest saved result of the same measurement saved after it
    (never the baseline's own, nor one older than it)."""
    rows = select(store) if store.exists() else []
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    seen_uids = {r.get("uid") for r in baseline.get("results", [])}
    for row in rows:
        if row.get("uid") not in seen_uids:
            latest[entry_key(row)] = row
    out = []
    for base in baseline.get("results", []):
        current = latest.get(entry_key(base))
        if current is not None and (current.get("created") or 0) <= (base.get("created") or 0):
            current = None
        entry = CheckEntry(dict(base), current)
        if current is not None:
            entry.stats = ratio_ci(base["samples"], unpack_samples(current.get("samples")))
            entry.failed = entry.stats.verdict == "slower" and entry.stats.ratio > 1 + fail_above
            entry.warnings = differences(base, current)
        out.append(entry)
    return out
