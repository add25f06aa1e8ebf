"""Where the host and the GPU wait on each other: large host<->device copies, and the host synchronising with the
GPU inside the cell (``.item()``, ``.cpu()``, printing a tensor)."""

from __future__ import annotations

import pandas as pd

from ..trace import WINDOW_TEXT, Trace
from .finding import Finding, api_names, t

__all__ = ["host_copies", "host_syncs"]

#: Host<->device copies worth a word: at least this share of GPU busy time.
COPY_SHARE = 0.10
#: Host waits worth a word: at least this share of the analysis window.
SYNC_SHARE = 0.05
_SYNC_APIS = (
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cuStreamSynchronize",
    "cuCtxSynchronize",
    "cuEventSynchronize",
    "cuMemcpyDtoH",
    "cuMemcpyHtoD",
)


def host_copies(trace: Trace) -> list[Finding]:
    """Host-to-device and device-to-host copies taking a tenth of GPU busy time or more."""
    m = trace.memops
    if m.empty:
        return []
    hd = m[m["kind"].isin(("HtoD", "DtoH"))]
    busy = trace.gpu_busy_ns()
    if hd.empty or not busy:
        return []
    ns = int((hd["end"] - hd["start"]).sum())
    if ns / busy < COPY_SHARE:
        return []
    nbytes = int(pd.to_numeric(hd["bytes"], errors="coerce").fillna(0).sum())
    kinds = ", ".join(f"{int(n)} {k}" for k, n in hd["kind"].value_counts().items())
    rate = f", {nbytes / ns:.1f} GB/s" if ns else ""
    return [
        Finding(
            "host_copies",
            "warn",
            f"Host<->device copies ({kinds}) move {nbytes / 1e6:,.0f} MB in {t(ns)}{rate}: {ns / busy:.0%} of GPU "
            "busy time. Keep tensors on the GPU between cells; where data must come from the host, pinned memory "
            "(.pin_memory()) and .to(device, non_blocking=True) let the copies overlap compute.",
            {"ns": ns, "bytes": nbytes, "share_of_busy": ns / busy},
        )
    ]


def host_syncs(trace: Trace) -> list[Finding]:
    """The host waiting for the GPU inside the analysis window, the capture's own closing synchronisation aside."""
    api = trace.api
    if api.empty:
        return []
    start, end, kind = trace.analysis_window()
    names = api_names(trace)
    inside = api[names.isin(_SYNC_APIS) & (api["start"] >= start) & (api["start"] <= end)]
    if inside.empty:
        return []
    device_syncs = inside[names[inside.index] == "cudaDeviceSynchronize"]
    if not device_syncs.empty:  # gpumagic's own: one device synchronisation closes the captured runs
        inside = inside.drop(index=device_syncs["start"].idxmax())
    wall = max(end - start, 1)
    ns = int((inside["end"] - inside["start"]).sum())
    if inside.empty or ns / wall < SYNC_SHARE:
        return []
    counts = names[inside.index].astype(object).value_counts()
    what = ", ".join(f"{name} ×{int(n)}" for name, n in counts.items())
    return [
        Finding(
            "host_sync",
            "warn",
            f"The host waited for the GPU {len(inside)} times inside the cell ({what}): {t(ns)}, {ns / wall:.0%} of "
            f"{WINDOW_TEXT[kind]}. .item(), .cpu(), .tolist(), printing a tensor and data-dependent "
            "shapes (nonzero, boolean masks) each wait for the GPU to finish; keep values on the GPU, or read them "
            "once at the end.",
            {"ns": ns, "calls": len(inside), "share_of_window": ns / wall},
        )
    ]
