"""Where the host and the GPU wait on each other: large host<->device copies, and the host
synchronising with the GPU inside the cell (``.item()``, ``.cpu()``, printing a tensor)."""

from __future__ import annotations

import pandas as pd

from ..trace import Trace, id_column
from .finding import Finding, api_names, t
from .rank_lists import listed, on_ranks, others_range
from .ranks import is_multi, rank_figures

__all__ = ["SYNC_APIS", "host_copies", "host_syncs"]

#: Host<->device copies worth a word: at least this share of GPU busy time.
COPY_SHARE = 0.10
#: Host waits worth a word: at least this share of the analysis window.
SYNC_SHARE = 0.05
#: Host calls that wait for the GPU: the host-sync finding's list, which a diff's summaries count
#: too.
SYNC_APIS = (
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
    kinds = ", ".join(f"{int(n)} {k}" for k, n in hd["kind"].value_counts().items())
    moved, rate, nbytes = _moved(hd, ns)
    return [
        Finding(
            "host_copies",
            "warn",
            f"Host<->device copies ({kinds}) {moved} in {t(ns)}{rate}: {ns / busy:.0%} of GPU "
            f"busy time. Keep "
            "tensors on the GPU between cells; where data must come from the host, pinned "
            "memory (.pin_memory()) and "
            ".to(device, non_blocking=True) let the copies overlap compute.",
            {"ns": ns, "bytes": nbytes, "share_of_busy": ns / busy},
        )
    ]


def _moved(copies: pd.DataFrame, ns: int) -> tuple[str, str, int | None]:
    """What the copies moved, in words, their rate (" (4.4 GB/s)", or ""), and the bytes (None where
    unknown). A copy whose bytes the trace does not give (ROCm's Kineto traces have none) is
    unknown: no total or rate is made from it, never a 0 or -1."""
    nbytes = pd.to_numeric(copies["bytes"], errors="coerce")
    known = nbytes[nbytes >= 0]
    if known.empty:
        return "move an unknown amount (the trace does not record their bytes)", "", None
    total = int(known.sum())
    if len(known) < len(copies):
        missing = len(copies) - len(known)
        return (
            f"move at least {_mb(total)} ({missing} of {len(copies)} without their bytes)",
            "",
            None,
        )
    return f"move {_mb(total)}", f" ({total / ns:.1f} GB/s)" if ns else "", total


def _mb(nbytes: int) -> str:
    """Bytes in MB as the findings write them; under 1 MB in kB, so a small copy never reads "0
    MB"."""
    return f"{nbytes / 1e6:,.0f} MB" if nbytes >= 1e6 else f"{nbytes / 1e3:,.1f} kB"


def _waits(api: pd.DataFrame, names: pd.Series, start: int, end: int) -> pd.DataFrame:
    """The host's waits for the GPU among ``api`` calls starting in [start, end], the capture's own
    closing synchronisation (the last cudaDeviceSynchronize) left out."""
    inside = api[names.isin(SYNC_APIS) & (api["start"] >= start) & (api["start"] <= end)]
    device_syncs = inside[names[inside.index] == "cudaDeviceSynchronize"]
    if (
        not device_syncs.empty
    ):  # gpumagic's own: one device synchronisation closes the captured runs
        inside = inside.drop(index=device_syncs["start"].idxmax())
    return inside


def _inside(trace: Trace) -> str:
    """Where the waits were: a live capture has a cell; a loaded trace or job has its analysis
    window."""
    return "inside the cell" if trace.meta.get("label") else "inside the window"


def _counts(names: pd.Series, inside: pd.DataFrame) -> str:
    counts = names[inside.index].astype(object).value_counts()
    return ", ".join(f"{name} ×{int(n)}" for name, n in counts.items())


_SYNC_ADVICE = (
    ".item(), .cpu(), .tolist(), printing a tensor and data-dependent shapes (nonzero, "
    "boolean masks) each wait for "
    "the GPU to finish; keep values on the GPU, or read them once at the end."
)


def host_syncs(trace: Trace) -> list[Finding]:
    """The host waiting for the GPU inside the analysis window, the capture's own closing
    synchronisation aside (with several processes, each in its own range, its own closing
    synchronisation aside)."""
    api = trace.api
    if api.empty:
        return []
    names = api_names(trace)
    if is_multi(trace):
        return _syncs_per_rank(trace, api, names)
    start, end, _ = trace.analysis_window()
    inside = _waits(api, names, start, end)
    wall = max(end - start, 1)
    ns = int((inside["end"] - inside["start"]).sum())
    if inside.empty or ns / wall < SYNC_SHARE:
        return []
    return [
        Finding(
            "host_sync",
            "warn",
            f"The host waited for the GPU {len(inside)} times {_inside(trace)} "
            f"({_counts(names, inside)}): {t(ns)}, "
            f"{ns / wall:.0%} of {trace.figures()['window_text']}. " + _SYNC_ADVICE,
            {"ns": ns, "calls": len(inside), "share_of_window": ns / wall},
        )
    ]


def _syncs_per_rank(trace: Trace, api: pd.DataFrame, names: pd.Series) -> list[Finding]:
    fig = rank_figures(trace).drop_duplicates("pid")
    pid = id_column(api["pid"])
    parts, numbers = [], {"ranks": [], "ns": [], "calls": [], "share_of_window": []}
    # (share, label) of the ranks that waited less: every rank of the job is accounted for
    below = []
    for _, r in fig.iterrows():
        mine = api[pid == int(r["pid"])]
        inside = _waits(mine, names[mine.index], int(r["start"]), int(r["end"]))
        wall = max(int(r["span_ns"]), 1)
        ns = int((inside["end"] - inside["start"]).sum())
        if inside.empty or ns / wall < SYNC_SHARE:
            below.append((ns / wall, r["label"]))
            continue
        parts.append(
            f"{r['label']} {len(inside)} times ({_counts(names, inside)}), {t(ns)}, "
            f"{ns / wall:.0%} of its range"
        )
        for key, value in zip(numbers, (r["label"], ns, len(inside), ns / wall)):
            numbers[key].append(value)
    if not parts:
        return []
    return [
        Finding(
            "host_sync",
            "warn",
            f"The host waited for the GPU {_inside(trace)} "
            f"{on_ranks(len(parts), len(fig), list(fig['label']))}: "
            + listed(parts)
            + _others_waited(below)
            + ". "
            + _SYNC_ADVICE,
            numbers,
        )
    ]


def _others_waited(below: list[tuple[float, str]]) -> str:
    """The ranks whose host waited less than :data:`SYNC_SHARE` of their range, with how much."""
    if not below:
        return ""
    below.sort()
    text = others_range(
        [label for _, label in below], [f"{share:.0%}" for share, _ in below], "waited"
    )
    return f"; {text} of {'its' if len(below) == 1 else 'their'} range"
