"""Numbers that do not add up come first: GPU work launched but not seen, no GPU work at all, or a
capture that did not record what the figures need (kernels, CUDA API calls): that is said, with how
to record it, never read as 0."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import Trace, id_column
from ..trace.coverage import LAUNCH_APIS
from .finding import Finding, api_names

__all__ = ["LAUNCH_APIS", "launches", "missing_kernels", "no_gpu_activity", "without_cuda"]


def launches(trace: Trace) -> pd.DataFrame:
    """The API calls that launch kernels (versioned names such as ``cudaLaunchKernel_v7000``
    included)."""
    api = trace.api
    if api.empty:
        return api
    return trace.memo("analysis.launches", lambda: api[api_names(trace).isin(LAUNCH_APIS)])


def without_cuda(trace: Trace) -> bool:
    """The capture ran where CUDA is not available (a CPU-only torch.profiler capture): no GPU
    record is missing."""
    return trace.meta.get("cuda_available") is False or trace.meta.get("device") == "CPU"


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
    if empty and trace.meta.get(
        "unread_devices"
    ):  # MTIA and the like: named and left out, not advised about
        unread = trace.meta["unread_devices"]
        return [
            Finding(
                "device_not_read",
                "info",
                str(trace.not_recorded("kernels")),
                {"devices": list(unread)},
            )
        ]
    if trace.kernels.empty and trace.meta.get(
        "range_profiler"
    ):  # counters per kernel, not dropped kernels
        info = trace.meta["range_profiler"]
        return [
            Finding(
                "range_profiler",
                "info",
                str(trace.not_recorded("kernels")),
                {"kernels": info["kernels"]},
            )
        ]
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
    return [
        Finding(
            "no_gpu_work", "info", "The cell launched no GPU work (its tensors may be on the CPU)."
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
    launched = _ids(launched_df)
    missing = np.setdiff1d(launched, _ids(trace.kernels), assume_unique=True)
    if not len(missing) or any("Graph" in str(name) for name in pd.unique(launched_df["name"])):
        return []
    return [
        Finding(
            "kernels_missing",
            "warn",
            f"{len(missing)} of {len(launched)} kernel launches have no kernel in the "
            f"capture: the profiler lost "
            "them, so GPU time is under-reported.",
            {"missing": len(missing), "launches": len(launched)},
        )
    ]


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
