"""The map of a job: one rank's report reduced where it is read, to the few tens of KB the whole
job's views and findings need. Only this crosses to the process that folds the job.

:func:`summarize` reads a report whole (``job.reports.read_one``: every table, on its host's
clock, less the columns no summary uses: the kernels' launch shapes and the NVTX depths), runs the
single-rank analysis on it (``analysis.ranks.rank_figures``: busy, window, NCCL, overlap, work per
GPU) and keeps:

- what says which rank and which job it is (the rank marks, ``RANK``, the host, the launcher's ids);
- its per-GPU figures (the skews need every rank: the fold computes them);
- per name, mergeable statistics of its kernels, CUDA API calls, memory operations (time and
  size), OS runtime calls and NVTX ranges (``stats.py``);
- its NCCL kernels as compact arrays (name, place among that name's kernels, duration, end): the
  NCCL waits and the clock alignment match collectives across ranks (``collectives.py``);
- the inputs of the per-rank findings: host waits for the GPU in its range, kernel launches and the
  launches without a kernel;
- its busy time binned over time (``busy_bins.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.finding import api_names
from ..analysis.ranks import FIGURE_COLUMNS, nccl_names, rank_figures
from ..analysis.transfers import SYNC_APIS
from ..trace import Trace, id_column
from ..trace.coverage import LAUNCH_APIS
from ..trace.summaries import group_codes, nsys_memop_name
from .busy_bins import BusyBins, bin_busy
from .paths import local_file
from .stats import SEP, NameStats, name_stats

__all__ = ["UNIT_COLUMNS", "RankSummary", "summarize"]

#: The per-GPU figures a rank sends (``rank_figures``' columns less the rank's name and the skews).
UNIT_COLUMNS = [c for c in FIGURE_COLUMNS if c not in ("rank", "label") and "_skew" not in c]
_META = ("backend", "device", "sm_count", "compute_capability", "nsys_version", "recorded")


@dataclass
class RankSummary:
    """One rank's report, reduced (see the module's docstring)."""

    path: str
    host: str | None
    recorded_rank: int | None
    identity: dict[str, Any]
    meta: dict[str, Any]
    pids: list[int]
    first_ns: int | None
    units: pd.DataFrame  # (the fold keeps it as plain lists)
    stats: dict[str, NameStats]
    nccl_names: list[str]
    nccl: dict[str, np.ndarray]
    facts: dict[str, Any]
    bins: BusyBins | None
    seconds: float = 0.0

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        """What ``job.identity.mismatch`` reads of a report: its first activity and the
        names of its NCCL kernels (not its rows)."""
        first = [] if self.first_ns is None else [self.first_ns]
        names = self.nccl_names or ([] if not first else ["-"])
        return {
            "kernels": pd.DataFrame({"name": names, "start": (first * len(names))[: len(names)]})
        }


def summarize(path: str) -> RankSummary:
    """Read ``path`` (a local path or an fsspec URL) and reduce it to its :class:`RankSummary`. Runs
    in a worker."""
    from .reports import read_one

    t0 = time.perf_counter()
    with local_file(path) as local:
        report = read_one(local, narrow=True)  # no launch shapes, no NVTX depths: unused here
    trace = Trace(**report.tables, meta=dict(report.meta))
    units = rank_figures(trace)
    summary = RankSummary(
        path=path,
        host=report.host,
        recorded_rank=report.recorded_rank,
        identity=dict(report.identity),
        meta={
            **{k: report.meta[k] for k in _META if k in report.meta},
            "rank_marks": list(report.meta.get("rank_marks") or []),
            "gpus": list(report.meta.get("gpus") or []),
            "cuda_devices": list(report.meta.get("cuda_devices") or []),
        },
        pids=list(report.pids),
        first_ns=_first(report.tables),
        units=units[UNIT_COLUMNS].reset_index(drop=True),
        stats=(stats := _stats(trace)),
        nccl_names=[],
        nccl={},
        facts=_facts(trace, units, int(stats["kernels"].arrays["total"].sum())),
        bins=_bins(trace, units),
    )
    summary.nccl_names, summary.nccl = _nccl(trace)
    summary.seconds = time.perf_counter() - t0
    return summary


def _first(tables: dict[str, pd.DataFrame]) -> int | None:
    starts = [int(df["start"].min()) for df in tables.values() if not df.empty]
    return min(starts) if starts else None


def _stats(trace: Trace) -> dict[str, NameStats]:
    out = {}
    for table in ("kernels", "api", "osrt"):
        df = getattr(trace, table)
        out[table] = _by(df, ["name"])
    nv = trace.nvtx
    if not nv.empty:
        key = nv["style"].fillna("PushPop").astype(str) + SEP + nv["text"].astype(str)
        nv = nv.assign(_key=key)
    out["nvtx"] = _by(nv, ["_key"])
    m = trace.memops
    if not m.empty:
        m = m.assign(_op=m["kind"].map(nsys_memop_name))
    out["memops"] = _by(m, ["_op"])
    if m.empty:
        out["memop_size"] = _by(m, ["_op"])
    else:
        nbytes = pd.to_numeric(m["bytes"], errors="coerce")
        known = m[nbytes.notna() & (nbytes >= 0)]
        codes, names = group_codes(known, ["_op"]) if len(known) else ([], [[]])
        out["memop_size"] = name_stats(
            np.asarray(codes), nbytes[known.index].to_numpy(np.int64), list(names[0])
        )
    return out


def _by(df: pd.DataFrame, keys: list[str]) -> NameStats:
    if df.empty:
        return name_stats(np.empty(0, np.int64), np.empty(0, np.int64), [])
    codes, names = group_codes(df, keys)
    dur = df["end"].to_numpy(dtype=np.int64) - df["start"].to_numpy(dtype=np.int64)
    return name_stats(codes, dur, list(names[0]))


def _nccl(trace: Trace) -> tuple[list[str], dict[str, np.ndarray]]:
    """The NCCL kernels: each one's name (a number into the list returned), process, place among its
    process's kernels of that name by start and by end, duration and end."""
    k = trace.kernels
    if k.empty:
        return [], {}
    codes, all_names, is_nccl = nccl_names(trace)
    rows = np.flatnonzero(is_nccl[codes])
    if not len(rows):
        return [], {}
    names, local = np.unique(codes[rows], return_inverse=True)
    pid = id_column(k["pid"])[rows]
    start = k["start"].to_numpy(dtype=np.int64)[rows]
    end = k["end"].to_numpy(dtype=np.int64)[rows]
    local = local.reshape(-1).astype(np.int64)
    return [all_names[i] for i in names], {
        "pid": pid.astype(np.int32),  # pids are under 2**24 (nsys packs them so)
        "name": local.astype(np.int32),
        "nth_start": _nth(pid, local, start),
        "nth_end": _nth(pid, local, end),
        "dur": end - start,
        "end": end,
    }


def _nth(pid: np.ndarray, code: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Each row's place among the rows of its (pid, code) by ``order`` (stable), as
    ``trace.collectives.collective_instances`` numbers them."""
    idx = np.lexsort((np.arange(len(order)), order, code, pid))
    key = np.stack([pid[idx], code[idx]], axis=1)
    new = np.ones(len(idx), dtype=bool)
    new[1:] = (key[1:] != key[:-1]).any(axis=1)
    first = np.maximum.accumulate(np.where(new, np.arange(len(idx)), 0))
    out = np.empty(len(idx), dtype=np.int32)
    out[idx] = np.arange(len(idx)) - first
    return out


def _facts(trace: Trace, units: pd.DataFrame, kernel_ns: int) -> dict[str, Any]:
    """The per-rank findings' inputs: per process, the host's waits for the GPU in its range (calls,
    ns, calls per API name; the closing device synchronisation aside, as ``host_syncs`` does); the
    kernel launches, those without a kernel, and whether any launch was a graph's. In numpy on the
    names' codes: which names are waits or launches is asked once per distinct name. ``kernel_ns``:
    the kernels' time (their statistics' total)."""
    api = trace.api
    facts: dict[str, Any] = {"syncs": {}, "launches": 0, "missing": 0, "after": 0, "graph": False}
    k = trace.kernels
    facts["kernel_ns"] = kernel_ns
    kernel_pid = id_column(k["pid"])
    one = len(k) and (kernel_pid == kernel_pid[0]).all()  # one process, as a rule: no hash table
    facts["kernel_pids"] = [int(p) for p in (kernel_pid[:1] if one else pd.unique(kernel_pid))]
    if api.empty:
        return facts
    codes, names = _coded(api_names(trace))
    pid = id_column(api["pid"])
    start = api["start"].to_numpy(dtype=np.int64)
    end = api["end"].to_numpy(dtype=np.int64)
    syncs = np.flatnonzero(np.isin(names, SYNC_APIS)[codes])
    device = names == "cudaDeviceSynchronize"
    at = start[syncs]
    for _, r in units.drop_duplicates("pid").iterrows():
        inside = (pid[syncs] == int(r["pid"])) & (at >= int(r["start"])) & (at <= int(r["end"]))
        rows = syncs[inside]
        closing = rows[device[codes[rows]]]
        if len(closing):  # the last device synchronisation (the first of the latest start)
            rows = rows[rows != closing[np.argmax(start[closing])]]
        counts = pd.Series(names[codes[rows]], dtype=object).value_counts()
        facts["syncs"][int(r["pid"])] = {
            "calls": len(rows),
            "ns": int((end[rows] - start[rows]).sum()),
            "by_name": {str(k): int(v) for k, v in counts.items()},
        }
    launch = np.flatnonzero(np.isin(names, LAUNCH_APIS)[codes])
    if len(launch) and not k.empty:
        keys = _keys(api["correlation"].to_numpy()[launch], pid[launch])
        valid = keys >= 0
        keys, starts = keys[valid], start[launch][valid]
        found = _member(keys, _ids(k))
        # as analysis.selfcheck: a launch after the last one (of its process) whose kernel the
        # capture holds came after the capture, and its kernel was not lost
        after = ~found & (starts > _last_found(keys >> 40, starts, found))
        order = np.argsort(keys, kind="stable")
        keys, found, after = keys[order], found[order], after[order]
        facts["launches"] = _distinct(keys)
        facts["missing"] = _distinct(keys[~found & ~after])
        facts["after"] = _distinct(keys[after])
        facts["graph"] = any("Graph" in str(names[c]) for c in np.unique(codes[launch]))
    return facts


def _coded(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each row's number and the distinct values (an object array): a categorical's own codes."""
    if isinstance(col.dtype, pd.CategoricalDtype) and not (col.cat.codes.to_numpy() < 0).any():
        return col.cat.codes.to_numpy().astype(np.int64), np.asarray(col.cat.categories, object)
    codes, uniques = pd.factorize(col, use_na_sentinel=False)
    return codes.astype(np.int64), np.asarray(uniques, dtype=object)


def _keys(corr: np.ndarray, pid: np.ndarray) -> np.ndarray:
    """Each row's correlation id with its process (``pid << 40``), -1 where it has none."""
    if corr.dtype.kind not in "iu":
        corr = pd.to_numeric(pd.Series(corr), errors="coerce").fillna(-1).to_numpy(np.int64)
    p = np.maximum(pid, 0)
    one = len(p) and (p == p[0]).all()
    out = corr | (int(p[0]) << 40) if one else corr | (p << 40)  # a new array either way
    out[corr == -1] = -1
    return out


def _ids(df: pd.DataFrame) -> np.ndarray:
    """Distinct correlation ids with their process, sorted, as ``analysis.selfcheck`` counts them
    (kernels come in start order, and so their ids: sorted already, as a rule)."""
    ids = _keys(df["correlation"].to_numpy(), id_column(df["pid"]))
    if (ids < 0).any():
        ids = ids[ids >= 0]
    if len(ids) and (ids[1:] < ids[:-1]).any():
        ids.sort()
    repeat = ids[1:] == ids[:-1]
    return ids[np.r_[True, ~repeat]] if repeat.any() else ids


def _member(keys: np.ndarray, sorted_ids: np.ndarray) -> np.ndarray:
    """Whether each key is among ``sorted_ids`` (a binary search: no hash table of every kernel)."""
    if not len(sorted_ids):
        return np.zeros(len(keys), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_ids, keys), len(sorted_ids) - 1)
    held: np.ndarray = sorted_ids[at] == keys
    return held


def _last_found(pids: np.ndarray, starts: np.ndarray, found: np.ndarray) -> np.ndarray:
    """Per launch, the latest start of a launch of its process whose kernel was found (the largest
    int64 where none was)."""
    never = np.iinfo(np.int64).min
    if not len(pids):
        return starts
    if (pids == pids[0]).all():  # one process, as a rule: no sort
        uniq, which = pids[:1], np.zeros(len(pids), dtype=np.int64)
    else:
        uniq, which = np.unique(pids, return_inverse=True)
    last = np.full(len(uniq), never, dtype=np.int64)
    np.maximum.at(last, which.reshape(-1), np.where(found, starts, never))
    last[last == never] = np.iinfo(np.int64).max
    return last[which.reshape(-1)]


def _distinct(sorted_keys: np.ndarray) -> int:
    """How many distinct values a sorted array holds."""
    return int(len(sorted_keys) and 1 + np.count_nonzero(sorted_keys[1:] != sorted_keys[:-1]))


def _bins(trace: Trace, units: pd.DataFrame) -> BusyBins | None:
    codes, gpu_units = trace.gpu_units()
    if not len(codes) or units.empty:
        return None
    starts, ends = trace._gpu_arrays()
    if len(gpu_units) == 1:  # one process on one GPU: every row
        per = [(starts, ends)]
    else:
        per = [(starts[codes == i], ends[codes == i]) for i in range(len(gpu_units))]
    return bin_busy(per, int(units["start"].min()), int(units["end"].max()))


def summary_bytes(summary: RankSummary) -> int:
    """How many bytes ``summary`` is as it crosses (pickled)."""
    import pickle

    return len(pickle.dumps(summary, protocol=pickle.HIGHEST_PROTOCOL))
