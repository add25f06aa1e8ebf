"""Numbers that do not add up come first: GPU work launched but not seen, or no GPU work at all."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import Trace, id_column
from .finding import Finding, api_names

__all__ = ["launches", "missing_kernels", "no_gpu_activity"]

LAUNCH_APIS = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cudaLaunchCooperativeKernel",
    "cudaGraphLaunch",
    "cuGraphLaunch",
)


def launches(trace: Trace) -> pd.DataFrame:
    """The API calls that launch kernels (versioned names such as ``cudaLaunchKernel_v7000`` included)."""
    api = trace.api
    if api.empty:
        return api
    return trace.memo("analysis.launches", lambda: api[api_names(trace).isin(LAUNCH_APIS)])


def no_gpu_activity(trace: Trace) -> list[Finding]:
    """Why there is nothing on the GPU: the profiler dropped it, there is no CUDA, or the cell ran on the CPU.
    Zero kernels after launches is an error, never "0 ms"."""
    if not (trace.kernels.empty and trace.memops.empty):
        return []
    launched = launches(trace)
    if not launched.empty:
        return [
            Finding(
                "kernels_dropped",
                "error",
                f"{len(launched)} kernel launches were recorded but no kernel ran in the capture: the profiler "
                "dropped them (a known CUPTI start-up issue); run the cell again.",
                {"launches": len(launched)},
            )
        ]
    if trace.meta.get("cuda_available") is False or trace.meta.get("device") == "CPU":
        return [
            Finding(
                "no_gpu",
                "info",
                "No GPU activity was captured: CUDA is not available here, so only CPU ops are shown.",
            )
        ]
    return [Finding("no_gpu_work", "info", "The cell launched no GPU work (its tensors may be on the CPU).")]


def missing_kernels(trace: Trace) -> list[Finding]:
    """Launches whose kernel the capture lost (CUDA-graph launches run kernels of other ids, so they are exempt)."""
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
            f"{len(missing)} of {len(launched)} kernel launches have no kernel in the capture: the profiler lost "
            "them, so GPU time is under-reported.",
            {"missing": len(missing), "launches": len(launched)},
        )
    ]


def _ids(df: pd.DataFrame) -> np.ndarray:
    """The distinct correlation ids of a table's rows (the -1 of "none" and missing ones left out), each with its
    process in the bits above 40 (every process numbers its correlations from 1), as int64."""
    corr = pd.to_numeric(df["correlation"], errors="coerce")
    keep = corr.notna().to_numpy() & (corr != -1).to_numpy()
    pid = id_column(df["pid"])[keep] if "pid" in df.columns else 0
    ids = np.sort(corr.to_numpy()[keep].astype("int64") | (np.maximum(pid, 0) << 40))
    return ids[np.r_[True, ids[1:] != ids[:-1]]] if len(ids) else ids  # a sort, not numpy's (slower) hashed unique
