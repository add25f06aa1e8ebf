"""``gpumagic.history()``: the saved results as a pandas DataFrame, one row a result, oldest first.

Timings and profiles share the table (``kind``: gputime, compare, sweep, profile); :func:`select`
gives timings only unless asked, so the readers of samples (export, check, plot) never meet a
profile, while :func:`history` lists both and filters by ``kind``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import TYPE_CHECKING, Any

from .provenance import MEASURED_ON
from .rows import RESULT_COLUMNS, statement_key, unpack_samples
from .store import MEMORY, PROFILE, Store, of_kind, resolve_path

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLUMNS", "KINDS", "SHOWN", "history", "select"]

#: The kinds of rows, as ``history(kind=...)`` takes them.
KINDS = ("gputime", "compare", "sweep", PROFILE, MEMORY)

#: The columns of :func:`history`, in order (``samples`` only where asked for).
COLUMNS = [
    *RESULT_COLUMNS,
    "kernel_time",
    "flop_rate",
    "byte_rate",
    *MEASURED_ON,
    "host",
    "uid",
    "gpu_busy",
    "wall",
    "kernels",
    "trace_path",
]

#: Figures a row keeps in its ``extra`` JSON that :func:`history` shows as columns (--energy).
FROM_EXTRA = ["energy_per_call", "power_w"]
#: The columns of :func:`history`'s DataFrame: the store's, then those from ``extra``.
SHOWN = [*COLUMNS[: COLUMNS.index("byte_rate") + 1], *FROM_EXTRA]
SHOWN += COLUMNS[COLUMNS.index("byte_rate") + 1 :]


def _extra(text: str | bytes | None) -> dict[str, Any]:
    """A row's ``extra`` JSON as a dict ({} where absent or unreadable)."""
    try:
        found = json.loads(text) if text else {}
    except (TypeError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def select(
    store: Store,
    *,
    label: str | None = None,
    statement: str | None = None,
    device: str | None = None,
    limit: int | None = None,
    columns: list[str] | None = None,
    kind: str | None = None,
    profiles: bool = False,
) -> list[dict[str, Any]]:
    """Saved rows, oldest first (``limit``: the latest ``limit``). ``device`` matches the name, the
    UUID or the device key (name@host). Timings only, unless ``profiles`` (all rows) or a ``kind``
    is asked for."""
    if store.readonly and not store.exists():
        return []
    where, params = [], []
    if (
        "kind" not in store.columns()
    ):  # a version-1 file opened read-only: timings of %gputime alone
        if kind not in (None, "gputime"):
            return []
    elif kind is not None:
        where.append("kind = ?")
        params.append(kind)
    elif not profiles:
        where.append(of_kind(False))
    if label is not None:
        where.append("label = ?")
        params.append(label)
    if statement is not None:
        where.append("stmt_key = ?")
        params.append(statement_key(statement))
    if device is not None:
        where.append("(device = ? OR device_uuid = ? OR device_key = ?)")
        params += [device] * 3
    clause = " AND ".join(where)
    if limit is None:
        return store.query(clause, params, columns=columns)
    return list(
        reversed(store.query(clause, params, order="id DESC", limit=limit, columns=columns))
    )


def history(
    label: str | None = None,
    statement: str | None = None,
    device: str | None = None,
    *,
    kind: str | None = None,
    path: str | os.PathLike[str] | None = None,
    samples: bool = False,
) -> pd.DataFrame:
    """The saved results as a DataFrame, one row a result (oldest first): when, label, statement,
    kind, median and IQR (seconds), samples, kernel time, rates, energy per call (J) and power (W)
    where measured (``--energy``), device, clocks, versions, commit;
    for a ``%%gpuprofile`` (kind ``profile``, its cell as the statement, no median) its GPU busy and
    wall time (seconds), kernel launches and the path of a trace kept. Filters: ``label``,
    ``statement`` (the same text), ``device`` (name or UUID), ``kind`` (one of :data:`KINDS`).
    ``path``: another store (default: where results are saved); ``samples=True`` adds each result's
    raw per-call samples (a list of seconds)."""
    import pandas as pd

    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    where = resolve_path(path)
    rows: list[dict[str, Any]] = []
    if where is not None and where.exists():
        with Store(where, readonly=True) as store:
            try:
                wanted = [*COLUMNS, "extra", *(["samples"] if samples else [])]
                rows = select(
                    store,
                    label=label,
                    statement=statement,
                    device=device,
                    columns=wanted,
                    kind=kind,
                    profiles=True,
                )
            except sqlite3.DatabaseError as exc:
                raise sqlite3.DatabaseError(f"{where}: {exc}") from exc
    columns = [*SHOWN, *(["samples"] if samples else [])]
    records = []
    for row in rows:
        record = {c: row.get(c) for c in COLUMNS}
        extra = _extra(row.get("extra"))
        record.update({k: extra.get(k) for k in FROM_EXTRA})
        record["params"] = json.loads(row["params"]) if row.get("params") else None
        record["git_dirty"] = None if row.get("git_dirty") is None else bool(row["git_dirty"])
        if samples:
            record["samples"] = unpack_samples(row.get("samples"))
        records.append(record)
    df = pd.DataFrame.from_records(records, columns=columns)
    df["created"] = (
        pd.to_datetime(df["created"], unit="s", utc=True)
        if len(df)
        else pd.Series([], dtype="object")
    )
    df.attrs["path"] = str(where) if where is not None else None
    return df
