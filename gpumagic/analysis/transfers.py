"""Where the host and the GPU wait on each other: large host<->device copies, and the host synchronising with the
GPU inside the cell (``.item()``, ``.cpu()``, printing a tensor)."""

from __future__ import annotations

import pandas as pd

from ..trace import WINDOW_TEXT, Trace, id_column
from .finding import Finding, api_names, t
from .ranks import is_multi, rank_figures

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


def _waits(api: pd.DataFrame, names: pd.Series, start: int, end: int) -> pd.DataFrame:
    """The host's waits for the GPU among ``api`` calls starting in [start, end], the capture's own closing
    synchronisation (the last cudaDeviceSynchronize) left out."""
    inside = api[names.isin(_SYNC_APIS) & (api["start"] >= start) & (api["start"] <= end)]
    device_syncs = inside[names[inside.index] == "cudaDeviceSynchronize"]
    if not device_syncs.empty:  # gpumagic's own: one device synchronisation closes the captured runs
        inside = inside.drop(index=device_syncs["start"].idxmax())
    return inside


def _counts(names: pd.Series, inside: pd.DataFrame) -> str:
    counts = names[inside.index].astype(object).value_counts()
    return ", ".join(f"{name} ×{int(n)}" for name, n in counts.items())


_SYNC_ADVICE = (
    ".item(), .cpu(), .tolist(), printing a tensor and data-dependent shapes (nonzero, boolean masks) each wait for "
    "the GPU to finish; keep values on the GPU, or read them once at the end."
)


def host_syncs(trace: Trace) -> list[Finding]:
    """The host waiting for the GPU inside the analysis window, the capture's own closing synchronisation aside
    (with several processes, each in its own range, its own closing synchronisation aside)."""
    api = trace.api
    if api.empty:
        return []
    names = api_names(trace)
    if is_multi(trace):
        return _syncs_per_rank(trace, api, names)
    start, end, kind = trace.analysis_window()
    inside = _waits(api, names, start, end)
    wall = max(end - start, 1)
    ns = int((inside["end"] - inside["start"]).sum())
    if inside.empty or ns / wall < SYNC_SHARE:
        return []
    return [
        Finding(
            "host_sync",
            "warn",
            f"The host waited for the GPU {len(inside)} times inside the cell ({_counts(names, inside)}): {t(ns)}, "
            f"{ns / wall:.0%} of {WINDOW_TEXT[kind]}. " + _SYNC_ADVICE,
            {"ns": ns, "calls": len(inside), "share_of_window": ns / wall},
        )
    ]


def _syncs_per_rank(trace: Trace, api: pd.DataFrame, names: pd.Series) -> list[Finding]:
    fig = rank_figures(trace).drop_duplicates("pid")
    pid = id_column(api["pid"])
    parts, numbers = [], {"ranks": [], "ns": [], "calls": [], "share_of_window": []}
    for _, r in fig.iterrows():
        mine = api[pid == int(r["pid"])]
        inside = _waits(mine, names[mine.index], int(r["start"]), int(r["end"]))
        wall = max(int(r["span_ns"]), 1)
        ns = int((inside["end"] - inside["start"]).sum())
        if inside.empty or ns / wall < SYNC_SHARE:
            continue
        parts.append(
            f"{r['label']} {len(inside)} times ({_counts(names, inside)}), {t(ns)}, {ns / wall:.0%} of its range"
        )
        for key, value in zip(numbers, (r["label"], ns, len(inside), ns / wall)):
            numbers[key].append(value)
    if not parts:
        return []
    return [
        Finding(
            "host_sync",
            "warn",
            f"The host waited for the GPU inside the cell: {'; '.join(parts)}. " + _SYNC_ADVICE,
            numbers,
        )
    ]
