"""A job's summaries on disk: a folder of Parquet files and one JSON of its meta, reopened in a
second without the raw reports (``gpumagic.load_job``).

``figures.parquet`` (one row per rank and GPU), ``ranks.parquet`` (one row per rank),
``rank_kernels.parquet`` (per rank and kernel name), ``busy.parquet`` (per rank, busy share per
time bin), ``summary_<table>.parquet`` (the job's ``nsys stats`` tables) and ``job.json`` (meta,
the heatmap's grid, the format's version). Parquet needs ``pyarrow`` (the ``dask`` extra).
"""

from __future__ import annotations

import json
import os

import pandas as pd

from ..edges import JsonValue
from ..errors import FileMissingError
from .fold import JobData
from .stats import TABLES

__all__ = ["FORMAT", "load", "save"]

#: The folder's format; a later one that reads differently raises the number.
FORMAT = 1


def save(data: JobData, path: str) -> str:
    """Write ``data`` to the folder ``path`` (made where missing); returns ``path``."""
    os.makedirs(path, exist_ok=True)
    data.figures.to_parquet(os.path.join(path, "figures.parquet"), index=False)
    data.ranks.to_parquet(os.path.join(path, "ranks.parquet"), index=False)
    data.rank_kernels.to_parquet(os.path.join(path, "rank_kernels.parquet"), index=False)
    busy = data.busy.reset_index() if not data.busy.empty else pd.DataFrame({"rank": []})
    busy.to_parquet(os.path.join(path, "busy.parquet"), index=False)
    for table in TABLES:
        data.summaries[table].to_parquet(
            os.path.join(path, f"summary_{table}.parquet"), index=False
        )
    info = {"format": FORMAT, "meta": data.meta, "busy": dict(data.busy.attrs)}
    with open(os.path.join(path, "job.json"), "w", encoding="utf-8") as f:
        json.dump(info, f, default=_plain)
    return path


def _plain(value: object) -> JsonValue:
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def load(path: str | os.PathLike[str]) -> JobData:
    """The :class:`~.fold.JobData` saved in the folder ``path``."""
    path = os.fspath(path)
    info_path = os.path.join(path, "job.json")
    if not os.path.exists(info_path):
        raise FileMissingError(path=path, what="A saved job (its job.json)")
    with open(info_path, encoding="utf-8") as f:
        info = json.load(f)
    meta = info["meta"]
    clock = meta.get("clock_alignment") or {}
    if "shifts_ns" in clock:  # JSON keys are text: pids again
        clock["shifts_ns"] = {int(k): int(v) for k, v in clock["shifts_ns"].items()}

    def read(name: str) -> pd.DataFrame:
        return pd.read_parquet(os.path.join(path, f"{name}.parquet"))

    busy = read("busy")
    busy = busy.set_index("rank") if len(busy) else pd.DataFrame()
    busy.attrs.update(info.get("busy") or {})
    return JobData(
        figures=read("figures"),
        ranks=read("ranks"),
        summaries={t: read(f"summary_{t}") for t in TABLES},
        rank_kernels=read("rank_kernels"),
        busy=busy,
        meta=meta,
    )
