"""Where the host and the GPU wait on each other: large host<->device copies, and the host
synchronising with the GPU inside the cell (``.item()``, ``.cpu()``, printing a tensor)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..trace import Trace, id_column, union_ns
from ..units import format_rate, plural
from .finding import Finding, api_names, t
from .host_work import covered, merged
from .rank_lists import listed, on_ranks, others_range
from .ranks import is_multi, rank_figures

__all__ = ["FREE_APIS", "SYNC_APIS", "host_copies", "host_syncs"]

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
    "cudaMemcpy2D",
    "cudaMemcpy3D",
    "cudaMemcpyToSymbol",
    "cudaMemcpyFromSymbol",
    "cudaMemcpyPeer",
    "cuStreamSynchronize",
    "cuCtxSynchronize",
    "cuEventSynchronize",
    "cuMemcpy",
    "cuMemcpy2D",
    "cuMemcpy3D",
    "cuMemcpyDtoH",
    "cuMemcpyHtoD",
    "cuMemcpyPeer",
    # ROCm's, in a Kineto trace of an AMD GPU
    "hipStreamSynchronize",
    "hipDeviceSynchronize",
    "hipEventSynchronize",
    "hipCtxSynchronize",
    "hipMemcpy",
    "hipMemcpyWithStream",
    "hipMemcpyDtoH",
    "hipMemcpyHtoD",
    "hipMemcpy2D",
    "hipMemcpy3D",
    "hipMemcpyToSymbol",
    "hipMemcpyFromSymbol",
    "hipMemcpyPeer",
)
#: Calls that wait for the whole device's work before they free memory: a wait only while the GPU
#: worked (the rest of their time is the free itself, which the pace verdict calls set-up).
FREE_APIS = ("cudaFree", "cuMemFree", "hipFree")
#: The device synchronisation that closes a capture's runs.
_DEVICE_SYNCS = ("cudaDeviceSynchronize", "hipDeviceSynchronize")


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
            f"busy time. {_copy_advice(trace)}",
            {"ns": ns, "bytes": nbytes, "share_of_busy": ns / busy},
        )
    ]


def _copy_advice(trace: Trace) -> str:
    """What keeps copies off the GPU's path, said for what made the trace: a notebook cell's
    tensors (between cells), a PyTorch program's (across steps), or a CUDA program's own."""
    names = trace.kernels["name"] if "name" in trace.kernels else pd.Series([], dtype=object)
    torch_made = trace.meta.get("backend") == "torch.profiler" or any(
        "at::native" in str(n) for n in pd.unique(names)[:2000]
    )
    if not torch_made:
        return (
            "Keep data on the device between kernels; where it must come from the host, pinned "
            "host memory (cudaMallocHost) and cudaMemcpyAsync on a stream of its own let the "
            "copies overlap compute."
        )
    where = "between cells" if trace.meta.get("cell_source") else "across steps"
    return (
        f"Keep tensors on the GPU {where}; where data must come from the host, pinned memory "
        "(.pin_memory()) and .to(device, non_blocking=True) let the copies overlap compute."
    )


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
    return f"move {_mb(total)}", f" ({format_rate(total / ns * 1e9)})" if ns else "", total


def _mb(nbytes: int) -> str:
    """Bytes in MB as the findings write them; under 1 MB in kB and under 100 B in bytes, so a
    small copy never reads "0 MB" or "0.0 kB"."""
    if nbytes >= 1e6:
        return f"{nbytes / 1e6:,.0f} MB"
    return f"{nbytes / 1e3:,.1f} kB" if nbytes >= 100 else f"{int(nbytes)} B"  # never "0.0 kB"


def _pageable_copies(trace: Trace) -> set[int]:
    """The correlation ids of device-to-host copies into pageable memory: their
    ``cudaMemcpyAsync`` cannot return before the copy is done, so the host waits for the GPU to
    finish all the work queued before it, as ``.item()`` and ``.cpu()`` do."""
    m = trace.memops
    if m.empty:
        return set()
    hit = (m["kind"] == "DtoH").to_numpy() & m["name"].astype(str).str.contains(
        "Pageable"
    ).to_numpy()
    return set(pd.to_numeric(m.loc[hit, "correlation"], errors="coerce").dropna().astype(int))


def _waits(trace: Trace, api: pd.DataFrame, start: int, end: int) -> pd.DataFrame:
    """The host's waits for the GPU among ``api`` calls starting in [start, end] (the capture's own
    closing synchronisation, the last device synchronisation, left out), with ``what`` (the name
    they are counted under) and ``wait`` (ns: a free's only while the GPU worked)."""
    # compared as they are (a big export's million names are a categorical: asked per category);
    # only the calls kept are turned into strings
    names = api_names(trace)[api.index]
    pageable = _pageable_copies(trace)
    copy = api["correlation"].isin(pageable) if pageable else pd.Series(False, index=api.index)
    hit = names.isin(SYNC_APIS) | names.isin(FREE_APIS) | copy
    inside = api[hit & (api["start"] >= start) & (api["start"] <= end)]
    device_syncs = inside[names[inside.index].isin(_DEVICE_SYNCS)]
    if not device_syncs.empty:  # gpumagic's own: one device synchronisation closes the runs
        inside = inside.drop(index=device_syncs["start"].idxmax())
    kept = names[inside.index].astype(str)
    what = kept.where(~copy[inside.index], kept + " (DtoH to pageable memory)")
    # a wait counts inside [start, end] only: a call that outlasts the window is cut at its end
    s = inside["start"].to_numpy("int64").clip(start, end)
    e = inside["end"].to_numpy("int64").clip(start, end)
    wait = (e - s).astype("int64")
    free = kept.isin(FREE_APIS).to_numpy()
    if free.any():
        gpu = trace.gpu_intervals()
        busy = merged(gpu["start"].to_numpy("int64"), gpu["end"].to_numpy("int64"))
        wait = np.where(free, covered(busy, s, e), wait)
        what = what.where(~free, what + " (while the GPU worked)")
    out = inside.assign(what=what.to_numpy(), wait=wait, wait_start=s, wait_end=e)
    return out[lambda d: d["wait"] > 0]


def _waited_ns(inside: pd.DataFrame) -> int:
    """The time the host spent waiting: the waits' union (threads that wait at once count once),
    a free's share while the GPU worked added as it is; never more than the window holds."""
    free = inside["what"].astype(str).str.endswith("(while the GPU worked)").to_numpy()
    plain = inside[~free]
    ns = int(union_ns(plain["wait_start"], plain["wait_end"])) if len(plain) else 0
    return ns + int(inside.loc[free, "wait"].sum())


def _inside(trace: Trace) -> str:
    """Where the waits were: a live capture has a cell; a loaded trace or job has its analysis
    window."""
    return "inside the cell" if trace.meta.get("label") else "inside the window"


def _counts(inside: pd.DataFrame) -> str:
    counts = inside["what"].value_counts()
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
    if is_multi(trace):
        return _syncs_per_rank(trace, api)
    start, end, _ = trace.analysis_window()
    inside = _waits(trace, api, start, end)
    wall = max(end - start, 1)
    ns = min(_waited_ns(inside), wall)
    if inside.empty or ns / wall < SYNC_SHARE:
        return []
    return [
        Finding(
            "host_sync",
            "warn",
            f"The host waited for the GPU {plural(len(inside), 'time')} {_inside(trace)} "
            f"({_counts(inside)}): {t(ns)}, "
            f"{ns / wall:.0%} of {trace.figures()['window_text']}. " + _advice(inside),
            {"ns": ns, "calls": len(inside), "share_of_window": ns / wall},
        )
    ]


def _advice(inside: pd.DataFrame) -> str:
    """What to do: where most of the waiting is device-to-host copies into pageable memory, that is
    said first (each is a ``.item()``/``.cpu()`` of a tensor, a wait of its own)."""
    pageable = inside["what"].str.contains("pageable", regex=False)
    ns = int(inside.loc[pageable, "wait"].sum())
    if not pageable.any() or ns < inside["wait"].sum() / 2:
        return _SYNC_ADVICE
    n = int(pageable.sum())
    return (
        f"Most of it is {n} device-to-host cop{'y' if n == 1 else 'ies'} into pageable memory "
        f"({t(ns)}): each one blocks the host until the GPU has finished everything queued before "
        "it, as .item(), .cpu() and .tolist() do. Keep the values on the GPU and read them once "
        "at the end, or copy into pinned memory (non_blocking=True) and synchronise once."
    )


def _syncs_per_rank(trace: Trace, api: pd.DataFrame) -> list[Finding]:
    fig = rank_figures(trace).drop_duplicates("pid")
    pid = id_column(api["pid"])
    parts: list[str] = []
    numbers: dict[str, list[Any]] = {"ranks": [], "ns": [], "calls": [], "share_of_window": []}
    # (share, label) of the ranks that waited less: every rank of the job is accounted for
    below = []
    for _, r in fig.iterrows():
        mine = api[pid == int(r["pid"])]
        inside = _waits(trace, mine, int(r["start"]), int(r["end"]))
        wall = max(int(r["span_ns"]), 1)
        ns = min(_waited_ns(inside), wall)
        if inside.empty or ns / wall < SYNC_SHARE:
            below.append((ns / wall, r["label"]))
            continue
        parts.append(
            f"{r['label']} {plural(len(inside), 'time')} ({_counts(inside)}), {t(ns)}, "
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
