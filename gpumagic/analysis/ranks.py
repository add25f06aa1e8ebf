"""Several processes and GPUs: who is which rank, and per rank and GPU the figures a distributed
step is judged by.

A ``torchrun`` job profiled under one nsys holds one process per rank, each on its own GPU. Summed
together, two GPUs read as one half-idle GPU; so every figure here is per *unit* (one process's work
on one GPU; one per rank in the usual one-GPU-per-rank job), over that process's own analysis
window:

- the range: the cell's NVTX range in that process, to the end of the GPU work launched inside it
  (the Trace's window rule, per process); else the span of that process's CUDA activity;
- busy: the union of its kernels and memory operations on that GPU inside the range (overlaps once);
- NCCL: the union of its NCCL kernels (the decoder's family "nccl"), and its share of busy;
- overlap: how long an NCCL kernel ran while a non-NCCL kernel ran on the same GPU (interval
  intersection), and its share of the NCCL time: communication that overlaps compute costs nothing
  on the critical path;
- work: the union of its non-NCCL kernels and memory operations (the GPU doing the step's own work);
- skew: each process's range and work against the fastest process's, in ns and as a share of the
  fastest.

Who is which rank: the NVTX mark ``gpumagic rank=R local_rank=L world=W`` that ``%%gpuprofile
--nproc``'s launcher emits in each rank (read by the nsys reader into ``meta["rank_marks"]``, or
found among the NVTX ranges). Where not every process carries one, processes are numbered by their
first GPU activity and called "process N", never "rank N": a process's place in time is not its
rank.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..kernels import decode
from ..trace import RANK_MARK, Trace, id_column, summaries
from ..trace.intervals import clip, union_by_group
from .finding import kernel_facts

__all__ = [
    "FIGURE_COLUMNS",
    "is_multi",
    "kernel_summary_by_rank",
    "processes",
    "rank_figures",
    "with_skews",
]

_MARK_TAIL = re.compile(RANK_MARK.pattern.lstrip("^"))  # NVTX table text is "<domain>:<text>"


def is_multi(trace: Trace) -> bool:
    """More than one process or GPU ran GPU work: the per-rank views apply."""
    return len(trace.gpu_units()[1]) > 1


def _marks(trace: Trace) -> dict[int, tuple[int, int, int]]:
    """pid -> (rank, local rank, world) from the launcher's marks: the reader's, else the NVTX
    table's ranges."""
    found = {
        int(m["pid"]): (int(m["rank"]), int(m["local_rank"]), int(m["world"]))
        for m in trace.meta.get("rank_marks") or []
    }
    nv = trace.nvtx
    if found or nv.empty:
        return found
    texts = pd.unique(nv["text"].astype(str))
    hits = {t: _MARK_TAIL.search(t) for t in texts if "gpumagic rank=" in t}
    for t, m in hits.items():
        if m:
            for pid in pd.unique(id_column(nv.loc[nv["text"].astype(str) == t, "pid"])):
                found.setdefault(int(pid), tuple(int(x) for x in m.groups()))  # type: ignore[arg-type]
    return found


def processes(trace: Trace) -> pd.DataFrame:
    """One row per process that ran GPU work, in rank order: ``pid``, ``rank`` (the
    torch.distributed rank where every process was marked, else the process's place by first GPU
    activity), ``label`` ("rank R" or "process N"), ``local_rank`` and ``world`` (-1 where
    unmarked), ``name`` (the process's, where the export says), ``first`` (its first GPU activity,
    ns)."""

    def compute() -> pd.DataFrame:
        codes, units = trace.gpu_units()
        starts, _ = trace._gpu_arrays()
        first_of_unit = np.full(len(units), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first_of_unit, codes, starts)
        df = units.assign(first=first_of_unit).groupby("pid", as_index=False)["first"].min()
        marks = _marks(trace)
        names = {int(p["pid"]): p.get("name") for p in trace.meta.get("processes") or []}
        df["name"] = [names.get(int(p)) for p in df["pid"]]
        marked = [marks.get(int(p)) for p in df["pid"]]
        found = [m for m in marked if m]
        ranks = [m[0] for m in found]
        if len(df) and len(found) == len(marked) and len(set(ranks)) == len(ranks):
            df["rank"], df["local_rank"], df["world"] = (
                np.array([m[i] for m in found]) for i in range(3)
            )
            df = df.sort_values("rank", kind="stable").reset_index(drop=True)
            df["label"] = [f"rank {r}" for r in df["rank"]]
        else:
            df = df.sort_values(["first", "pid"], kind="stable").reset_index(drop=True)
            df["rank"] = np.arange(len(df))
            df["local_rank"] = df["world"] = -1
            df["label"] = [f"process {i}" for i in range(len(df))]
        return df[["pid", "rank", "label", "local_rank", "world", "name", "first"]]

    return trace.memo("ranks.processes", compute).copy()


def _windows(trace: Trace, pids: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Each process's analysis window (start, end) and its kind ("nvtx" or "cuda"): the Trace's
    rule, per process."""
    codes, units = trace.gpu_units()
    starts, ends = trace._gpu_arrays()
    unit_pid = units["pid"].to_numpy(dtype=np.int64)
    row_pid = unit_pid[codes] if len(codes) else np.empty(0, dtype=np.int64)
    label = trace.meta.get("label")
    nv, api = trace.nvtx, trace.api
    cell = (
        nv[nv["text"].astype(str).str.endswith(str(label))]
        if label and not nv.empty
        else nv.iloc[0:0]
    )
    cell_pid = id_column(cell["pid"]) if not cell.empty else np.empty(0, dtype=np.int64)
    api_pid = id_column(api["pid"]) if not api.empty else np.empty(0, dtype=np.int64)
    lo, hi, kinds = np.zeros(len(pids), np.int64), np.zeros(len(pids), np.int64), []
    for i, pid in enumerate(pids.tolist()):
        mine = row_pid == pid
        r = cell[cell_pid == pid] if len(cell_pid) else cell
        if not r.empty:
            lo[i], hi[i] = int(r["start"].min()), int(r["end"].max())
            after = ends[mine & (starts >= lo[i])]
            hi[i] = max(hi[i], int(after.max())) if len(after) else hi[i]
            kinds.append("nvtx")
            continue
        lo[i], hi[i] = int(starts[mine].min()), int(ends[mine].max())
        calls = api["start"].to_numpy(dtype=np.int64)[api_pid == pid] if len(api_pid) else []
        lo[i] = min(lo[i], int(np.min(calls))) if len(calls) else lo[i]
        kinds.append("cuda")
    return lo, hi, kinds


def _gpu_name(trace: Trace, pid: int, device: int) -> str:
    """The GPU's name: the job's GPU table's, unless several files' GPUs share that id (their
    names differ: an H200 rank beside an MI350 one), then the process's own file's."""
    listed = trace.meta.get("gpus") or []
    gpus = {g.get("id"): g.get("name") for g in listed}
    own = (trace.meta.get("rank_devices") or {}).get(pid)
    if own and sum(g.get("id") == device for g in listed) > 1:
        return str(own)
    for d in trace.meta.get("cuda_devices") or []:
        if d.get("pid") == pid and d.get("cuda_id") == device and d.get("gpu") in gpus:
            return str(gpus[d["gpu"]])
    return str(gpus.get(device) or own or trace.meta.get("device") or "")


def rank_figures(trace: Trace) -> pd.DataFrame:
    """One row per process and GPU, in rank order: ``rank``, ``label``, ``pid``, ``device``, ``gpu``
    (its name), ``window`` ("nvtx": the cell's range; "cuda": the span of its CUDA activity),
    ``start``, ``end``, ``span_ns``, ``busy_ns``, ``nccl_ns``, ``nccl_share`` (of busy),
    ``overlap_ns``, ``overlap_share`` (of NCCL), ``work_ns``, ``kernels`` and ``nccl_kernels``
    (those that ran in the range), and each process's skew against the fastest process by range,
    busy time and work: ``span_skew_ns``, ``span_skew`` (a share of the fastest's),
    ``busy_skew_ns``, ``busy_skew``, ``work_skew_ns``, ``work_skew``. Times are integer ns."""
    return trace.memo("ranks.figures", lambda: _rank_figures(trace)).copy()


def nccl_names(trace: Trace) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Each kernel's name code, the distinct names and whether each name is an NCCL kernel's, as
    ``kernel_facts`` has them (its where on the decoded family), without its labels (which look up
    every kernel's launch call): kept on the trace."""
    if "analysis.kernel_facts" in trace._memo:
        facts = kernel_facts(trace)
        return facts.codes, facts.names, np.array([d.family == "nccl" for d in facts.decoded], bool)

    def compute() -> tuple[np.ndarray, list[str], np.ndarray]:
        codes, uniques = pd.factorize(trace.kernels["name"], use_na_sentinel=False)
        names = [str(n) for n in uniques]
        is_nccl = np.array([bool(decode(n).family == "nccl") for n in names], dtype=bool)
        return np.asarray(codes, dtype=np.int64), names, is_nccl

    return trace.memo("ranks.nccl_names", compute)


def _rank_figures(trace: Trace) -> pd.DataFrame:
    procs = processes(trace)
    codes, units = trace.gpu_units()
    starts, ends = trace._gpu_arrays()
    pids = procs["pid"].to_numpy(dtype=np.int64)
    lo_p, hi_p, kinds = _windows(trace, pids)
    place = {int(p): i for i, p in enumerate(pids.tolist())}
    unit_proc = np.array([place[int(p)] for p in units["pid"]], dtype=np.int64)
    n_units, n_k = len(units), len(trace.kernels)
    if n_units == 1:  # one process on one GPU (a rank's own report): one window for every row
        lo_row, hi_row = lo_p[unit_proc[0]], hi_p[unit_proc[0]]
    else:
        lo_row, hi_row = lo_p[unit_proc][codes], hi_p[unit_proc][codes]
    s, e = clip(starts, ends, lo_row, hi_row)
    nccl = np.zeros(len(s), dtype=bool)
    if n_k:
        codes_k, _, is_nccl = nccl_names(trace)
        nccl[:n_k] = is_nccl[codes_k]
    is_kernel = np.zeros(len(s), dtype=bool)
    is_kernel[:n_k] = True
    inside = (starts <= hi_row) & (ends >= lo_row)  # ran in the range, wholly or in part
    if len(s):
        # sorted by unit, then start, once: the unions below then take their rows in order, sorting
        # nothing (kernels, then memory operations: two sorted runs, merged by a stable sort)
        if n_units == 1:
            order = np.argsort(s, kind="stable")
        else:
            t0 = int(s.min())
            order = np.argsort(codes * (int(e.max()) - t0 + 1) + (s - t0), kind="stable")
            codes = codes[order]
        s, e, nccl, is_kernel, inside = (a[order] for a in (s, e, nccl, is_kernel, inside))
    compute = is_kernel & ~nccl

    def union(rows: np.ndarray) -> np.ndarray:  # of the rows picked (one unit: no codes to pick)
        picked = codes[rows] if n_units > 1 else np.zeros(np.count_nonzero(rows), np.int64)
        return union_by_group(picked, s[rows], e[rows], n_units)

    busy = union_by_group(codes, s, e, n_units)
    comm = union(nccl)
    # NCCL kernels against the others: |A ∩ B| = |A| + |B| - |A ∪ B|, A ∪ B being every kernel
    kernels = busy if is_kernel.all() else union(is_kernel)
    overlap = comm + union(compute) - kernels
    work = union(~nccl)
    df = units.assign(
        proc=unit_proc,
        busy_ns=busy,
        nccl_ns=comm,
        overlap_ns=overlap,
        work_ns=work,
        kernels=np.bincount(codes[is_kernel & inside], minlength=n_units),
        nccl_kernels=np.bincount(codes[nccl & inside], minlength=n_units),
    )
    df["rank"] = procs["rank"].to_numpy()[unit_proc]
    df["label"] = procs["label"].to_numpy()[unit_proc]
    df["gpu"] = [_gpu_name(trace, int(p), int(d)) for p, d in zip(df["pid"], df["device"])]
    df["window"] = [kinds[i] for i in unit_proc]
    df["start"], df["end"] = lo_p[unit_proc], hi_p[unit_proc]
    df["span_ns"] = df["end"] - df["start"]
    df["nccl_share"] = np.where(df["busy_ns"] > 0, df["nccl_ns"] / df["busy_ns"].clip(lower=1), 0.0)
    df["overlap_share"] = np.where(
        df["nccl_ns"] > 0, df["overlap_ns"] / df["nccl_ns"].clip(lower=1), np.nan
    )
    df = with_skews(df, df["proc"])
    return df.sort_values(["proc", "device"], kind="stable").reset_index(drop=True)[FIGURE_COLUMNS]


#: :func:`rank_figures`' columns, in order.
FIGURE_COLUMNS = [
    "rank",
    "label",
    "pid",
    "device",
    "gpu",
    "window",
    "start",
    "end",
    "span_ns",
    "busy_ns",
    "nccl_ns",
    "nccl_share",
    "overlap_ns",
    "overlap_share",
    "work_ns",
    "kernels",
    "nccl_kernels",
    *(f"{k}_skew{u}" for k in ("span", "busy", "work") for u in ("_ns", "")),
]


def with_skews(fig: pd.DataFrame, proc: pd.Series | np.ndarray) -> pd.DataFrame:
    """``fig`` (one row per process and GPU, with ``span_ns``, ``busy_ns`` and ``work_ns``) with
    each process's skew against the fastest process by range, busy time and work (``proc``: each
    row's process). One definition for a Trace's figures and for a job's read rank by rank
    (``gpumagic.job``)."""
    df = fig.copy()
    procs = np.asarray(proc)
    if len(df) and (procs == procs[0]).all():  # one process (a rank's own report): no groupby
        for name, per in (
            ("span", int(df["span_ns"].iloc[0])),
            ("busy", int(df["busy_ns"].sum())),
            ("work", int(df["work_ns"].sum())),
        ):
            fastest = max(per, 0)
            df[f"{name}_skew_ns"] = np.full(len(df), per - fastest, dtype=np.int64)
            df[f"{name}_skew"] = (per - fastest) / fastest if fastest else 0.0
        return df
    proc = pd.Series(procs, index=df.index)
    span = df.groupby(proc)["span_ns"].first()  # a process's range: the same on each of its GPUs
    per_proc_busy = df.groupby(proc)["busy_ns"].sum()
    per_proc_work = df.groupby(proc)["work_ns"].sum()  # a process's work over all its GPUs
    # the fastest of the processes that ran kernels: a file that recorded none has a range of a
    # few copies, no yardstick for the others
    worked = df.groupby(proc)["kernels"].sum() > 0 if "kernels" in df else per_proc_work > 0
    for name, per in (("span", span), ("busy", per_proc_busy), ("work", per_proc_work)):
        pool = per[worked] if worked.any() else per
        fastest = max(int(pool.min()), 0) if len(pool) else 0
        # -1: a process that ran no kernels, not compared (no "fastest" for a file of copies)
        skew = (per - fastest).clip(lower=0).where(worked | ~worked.any(), -1)
        df[f"{name}_skew_ns"] = skew.reindex(proc).to_numpy().astype(np.int64)
        share = df[f"{name}_skew_ns"] / fastest if fastest else pd.Series(0.0, index=df.index)
        df[f"{name}_skew"] = share.where(df[f"{name}_skew_ns"] >= 0)
    return df


def kernel_summary_by_rank(trace: Trace) -> pd.DataFrame:
    """``nsys stats``' cuda_gpu_kern_sum per process (Time (%) of that process's kernel time),
    stacked in rank order with ``rank``, ``rank_label`` and ``pid`` columns first: a kernel of every
    rank in one frame."""

    def compute() -> pd.DataFrame:
        k = trace.kernels
        procs = processes(trace)
        pid = id_column(k["pid"]) if not k.empty else np.empty(0, dtype=np.int64)
        parts = []
        for _, p in procs.iterrows():
            rows = k[pid == int(p["pid"])]
            if rows.empty:
                continue
            s = summaries.duration_summary(rows, ["name"], "Instances", ["Name"])
            s.insert(0, "pid", int(p["pid"]))
            s.insert(0, "rank_label", p["label"])
            s.insert(0, "rank", int(p["rank"]))
            parts.append(s)
        if not parts:
            return pd.DataFrame(
                columns=["rank", "rank_label", "pid", *trace.kernel_summary().columns]
            )
        return pd.concat(parts, ignore_index=True)

    return trace.memo("ranks.kernel_summary", compute).copy()
