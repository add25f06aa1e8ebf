"""Numbers that do not add up come first: GPU work launched but not seen, no GPU work at all, or a
capture that did not record what the figures need (kernels, CUDA API calls): that is said, with how
to record it, never read as 0."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..trace import Trace, id_column
from ..trace.coverage import LAUNCH_APIS
from .finding import Finding, api_names, t

__all__ = [
    "LAUNCH_APIS",
    "launches",
    "missing_kernels",
    "no_gpu_activity",
    "unplaced_events",
    "without_cuda",
]


def launches(trace: Trace) -> pd.DataFrame:
    """The API calls that launch kernels (versioned names such as ``cudaLaunchKernel_v7000``
    included)."""
    api = trace.api
    if api.empty:
        return api
    return trace.memo("analysis.launches", lambda: api[api_names(trace).isin(LAUNCH_APIS)])


def unplaced_events(trace: Trace) -> list[Finding]:
    """GPU events the reader left out for a time it could not place (a negative or NaN duration):
    said with their count, since the figures are of the others (a negative duration read as "GPU
    busy -3 ms")."""
    unplaced = trace.meta.get("unplaced_events") or {}
    said = [
        f"{n:,} {'kernel' if k == 'kernels' else 'memory operation'}" + ("s" if n != 1 else "")
        for k, n in unplaced.items()
    ]
    if not said:
        return []
    return [
        Finding(
            "unplaced_events",
            "warn",
            f"{' and '.join(said)} of the trace left out: a negative or NaN duration, or a start "
            "that is no number, cannot be placed in time; the figures are of the rest.",
            dict(unplaced),
        )
    ]


def without_cuda(trace: Trace) -> bool:
    """The capture ran where CUDA is not available (a CPU-only torch.profiler capture): no GPU
    record is missing."""
    return trace.meta.get("cuda_available") is False or trace.meta.get("device") == "CPU"


def _kernels_left_out(trace: Trace, kind: str, **facts: Any) -> Finding:
    """An info finding that the capture left the kernels out on purpose (``kind`` says why), in the
    trace's own sentence for it: never advice about dropped kernels or an idle GPU."""
    return Finding(kind, "info", str(trace.not_recorded("kernels")), facts)


def no_gpu_activity(trace: Trace) -> list[Finding]:
    """Why there is no GPU figure: the capture did not record kernels (say so, and how to record
    them); or nothing on the GPU: the profiler dropped it, there is no CUDA, or the cell ran on the
    CPU. Zero kernels after launches is an error, never "0 ms"; kernels not recorded are never an
    idle GPU."""
    empty = trace.kernels.empty and trace.memops.empty
    if empty and without_cuda(trace):
        return [
            Finding(
                "no_gpu",
                "info",
                "No GPU activity was captured: CUDA is not available here, so only CPU ops "
                "are shown.",
            )
        ]
    # MTIA and the like: named and left out, not advised about
    if empty and trace.meta.get("unread_devices"):
        devices = list(trace.meta["unread_devices"])
        return [_kernels_left_out(trace, "device_not_read", devices=devices)]
    # counters per kernel, not dropped kernels
    if trace.kernels.empty and trace.meta.get("range_profiler"):
        kernels = trace.meta["range_profiler"]["kernels"]
        return [_kernels_left_out(trace, "range_profiler", kernels=kernels)]
    if not trace.recorded("kernels"):
        return [_kernels_not_recorded(trace)]
    launched = launches(trace) if trace.kernels.empty else None
    if (
        launched is not None and not launched.empty
    ):  # memory operations beside them do not make it an idle GPU
        return [
            Finding(
                "kernels_dropped",
                "error",
                f"{len(launched)} kernel launches were recorded but no kernel ran in the "
                f"capture: the profiler "
                "dropped them (a known CUPTI start-up issue); run the cell again.",
                {"launches": len(launched)},
            )
        ]
    if not empty:
        return []
    who = "The cell" if trace.meta.get("label") else "The trace"
    return [
        Finding(
            "no_gpu_work", "info", f"{who} launched no GPU work (its tensors may be on the CPU)."
        )
    ]


def _kernels_not_recorded(trace: Trace) -> Finding:
    """The capture holds no kernel records: what it did record instead, and how to record
    kernels."""
    calls = trace.rows("api") if trace.recorded("api") else 0
    n = len(launches(trace)) if calls else 0
    if n:
        seen = f", though it recorded {calls:,} CUDA API calls, {n:,} of them kernel launches"
    elif calls:
        seen = f", though it recorded {calls:,} CUDA API calls"
    else:
        seen = ""
    if trace.memops.empty:
        seen += ": how long the GPU ran is unknown"
    else:
        ops = len(trace.memops)
        what = (
            "memory operation it recorded is" if ops == 1 else "memory operations it recorded are"
        )
        seen += f": the {ops:,} {what} not all the GPU did"
    message = str(trace.not_recorded("kernels", seen))
    if n and trace.meta.get("backend") == "torch.profiler":
        message += (
            " Where CUDA was among the activities already, the profiler dropped them (a "
            "known CUPTI start-up issue): "
            "run it again."
        )
    return Finding(
        "kernels_not_recorded",
        "error" if n else "warn",
        message,
        {"api_calls": calls, "launches": n, "memops": len(trace.memops)},
    )


def missing_kernels(trace: Trace) -> list[Finding]:
    """Launches whose kernel the capture lost (CUDA-graph launches run kernels of other ids, so they
    are exempt); where the capture did not record the CUDA API calls, that this cannot be checked,
    and how to record them."""
    if trace.recorded("kernels") and not trace.recorded("api"):
        detail = (
            ": kernels seen cannot be checked against launches issued, nor the host's "
            "waits for the GPU found"
        )
        return [Finding("api_not_recorded", "info", str(trace.not_recorded("api", detail)))]
    launched_df = launches(trace)
    if launched_df.empty or trace.kernels.empty:
        return []
    if any("Graph" in str(name) for name in pd.unique(launched_df["name"])):
        return []
    keys = _row_ids(launched_df)
    seen = _sorted_holds(_ids(trace.kernels), keys) & (keys >= 0)
    missing = ~seen & (keys >= 0)
    if not missing.any():
        return []
    after = missing & _after_last_kernel(launched_df, seen)
    lost = _distinct(keys[missing & ~after])
    n_after, total = len(_distinct(keys[after])), len(_distinct(keys[keys >= 0]))
    broken = _broken_correlation(trace, launched_df, keys, missing)
    if broken is not None:
        return [broken]
    tail = ""
    if n_after:
        span = _last_span(launched_df, after)
        tail = (
            f"{n_after} kernel launches in the last {t(span)} came after the capture: issued "
            "after the last launch whose kernel it recorded, their kernels ran once it had ended "
            "(not lost)"
        )
    numbers = {"missing": len(lost), "launches": total}
    if n_after:
        numbers["after_capture"] = n_after
    if not len(lost):
        return [
            Finding("launches_after_capture", "info", tail[0].upper() + tail[1:] + ".", numbers)
        ]
    return [
        Finding(
            "kernels_missing",
            "warn",
            f"{len(lost)} of {total} kernel launches have no kernel in the "
            f"capture: the profiler lost "
            "them, so GPU time is under-reported" + (f"; {tail}." if tail else "."),
            numbers,
        )
    ]


def _pids(df: pd.DataFrame) -> np.ndarray:
    return id_column(df["pid"]) if "pid" in df.columns else np.zeros(len(df), dtype=np.int64)


def _last_span(launched: pd.DataFrame, after: np.ndarray) -> int:
    """How long the launches after the capture took, each process's own (two reports of one
    folder hours apart are two captures: their launches together span the hours between)."""
    part = launched[after]
    spans = (
        part["end"].astype("int64").groupby(_pids(part)).max()
        - part["start"].astype("int64").groupby(_pids(part)).min()
    )
    return int(spans.max())


def _broken_correlation(
    trace: Trace, launched: pd.DataFrame, keys: np.ndarray, missing: np.ndarray
) -> Finding | None:
    """Where most of the trace's kernels match no launch's correlation id, the launches without a
    kernel did not come after the capture, nor were their kernels lost: the kernels are there,
    under ids that do not match (a trimmed or rewritten export). Say that; None otherwise."""
    if not missing.any():
        return None
    kernel_keys = _row_ids(trace.kernels)
    launch_ids = _distinct(keys[keys >= 0])
    matched = _sorted_holds(launch_ids, kernel_keys) & (kernel_keys >= 0)
    if matched.mean() >= BROKEN_SHARE:
        return None
    k_end = int(trace.kernels["end"].max())
    first = int(launched["start"].to_numpy(dtype="int64")[missing].min())
    n = int(missing.sum())
    return Finding(
        "correlation_broken",
        "warn",
        f"{int((~matched).sum()):,} of {len(matched):,} kernels match no launch's correlation id "
        f"and {n:,} launches no kernel's, while kernels ran for {t(max(k_end - first, 0))} after "
        "the first such launch: the file's kernel-to-launch correlation is broken (a trimmed or "
        "rewritten export?), so whether any kernel was lost cannot be told, and no kernel is tied "
        "to the op or line that launched it.",
        {"kernels_unmatched": int((~matched).sum()), "launches_unmatched": n},
    )


#: Below this share of kernels matching a launch, the correlation is broken, not a few kernels
#: lost (a profiler that drops kernels keeps the ids of those it records).
BROKEN_SHARE = 0.5


def _after_last_kernel(launched: pd.DataFrame, seen: np.ndarray) -> np.ndarray:
    """Which launches came after the last launch (of their process) whose kernel the capture has:
    the capture ended before their kernels ran, nothing was lost."""
    pid = id_column(launched["pid"]) if "pid" in launched.columns else np.zeros(len(launched), int)
    start = launched["start"].to_numpy(dtype="int64")
    none = np.iinfo(np.int64).min
    last = pd.Series(np.where(seen, start, none)).groupby(pid).transform("max").to_numpy()
    last = np.where(last == none, np.iinfo(np.int64).max, last)  # none seen: dropped, not after
    after: np.ndarray = start > last
    return after


def _row_ids(df: pd.DataFrame) -> np.ndarray:
    """Each row's correlation id with its process in the bits above 40 (:func:`_ids`); -1 where it
    has none."""
    corr = pd.to_numeric(df["correlation"], errors="coerce").fillna(-1).to_numpy(dtype=np.int64)
    pid = np.maximum(id_column(df["pid"]), 0) if "pid" in df.columns else 0
    return np.where(corr >= 0, corr | (pid << 40), -1)


def _sorted_holds(sorted_ids: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Which ``keys`` are in ``sorted_ids`` (sorted, distinct): a binary search each, not numpy's
    hashed ``isin`` (seconds on a million rows)."""
    if not len(sorted_ids):
        return np.zeros(len(keys), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_ids, keys), len(sorted_ids) - 1)
    held: np.ndarray = sorted_ids[pos] == keys
    return held


def _distinct(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a``, sorted (a sort, not numpy's slower hashed unique)."""
    a = np.sort(a)
    return a[np.r_[True, a[1:] != a[:-1]]] if len(a) else a


def _ids(df: pd.DataFrame) -> np.ndarray:
    """The distinct correlation ids of a table's rows (the -1 of "none" and missing ones left out),
    each with its process in the bits above 40 (every process numbers its correlations from 1), as
    int64."""
    corr = pd.to_numeric(df["correlation"], errors="coerce")
    keep = corr.notna().to_numpy() & (corr != -1).to_numpy()
    pid = id_column(df["pid"])[keep] if "pid" in df.columns else 0
    ids = np.sort(corr.to_numpy()[keep].astype("int64") | (np.maximum(pid, 0) << 40))
    return (
        ids[np.r_[True, ids[1:] != ids[:-1]]] if len(ids) else ids
    )  # a sort, not numpy's (slower) hashed unique
