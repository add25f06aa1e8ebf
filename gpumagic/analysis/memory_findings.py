"""The memory view's findings: one sentence each, with the numbers behind it (a memory analysis in,
a list of :class:`~gpumagic.analysis.finding.Finding` out).

Said, in this order: an out-of-memory failure and what was alive then; the peak against the device's
memory; the gap between reserved and allocated at the peak (the allocator's cache and its
fragmentation); the largest category at the peak; allocations freed and made again with the same
size at the same line (a buffer re-made each time round a loop); and what
``torch.cuda.empty_cache()`` would hand back at the end.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import pandas as pd

from .finding import Finding

__all__ = [
    "REMADE_AT_LEAST",
    "MemoryFacts",
    "findings_of",
    "format_bytes",
    "repeated_allocations",
]

#: An allocation site counts as re-made in a loop from this many frees followed by the same
#: allocation again.
REMADE_AT_LEAST = 3
#: Blocks smaller than this are not worth a finding when re-made.
REMADE_MIN_BYTES = 1 << 20
#: A reserved-minus-allocated gap is said from this share of reserved memory (or 1 GiB) on.
GAP_NOTED = 0.05
#: A reserved-minus-allocated gap reads as notable above this share of reserved memory.
GAP_SHARE = 0.2


class MemoryFacts(Protocol):
    """What the findings and the levers read of a :class:`~gpumagic.analysis.memory.MemoryAnalysis`
    (that module imports this one and :mod:`.memory_levers`: naming the class here would be an
    import cycle)."""

    peak_bytes: int
    peak_time_ms: float
    peak_reserved: int
    has_times: bool
    device_memory: int | None
    oom: dict[str, Any] | None
    live_at_oom: pd.DataFrame | None
    live_at_peak: pd.DataFrame
    category_at_peak: dict[str, int]
    at_end: dict[str, int]
    empty_cache_bytes: int
    repeats: pd.DataFrame


def format_bytes(n: float) -> str:
    """Binary units, three significant digits: 1.5 GiB, 640 MiB, 512 B."""
    sign, n = ("-" if n < 0 else ""), abs(float(n))
    units = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
    for i, (unit, scale) in enumerate(units):
        if n >= scale or (n >= 999.5 and unit == "KiB"):
            if n / scale >= 999.5 and i:  # "1.02e+03 MiB" at three digits: the next unit up
                unit, scale = units[i - 1]
            return f"{sign}{n / scale:.3g} {unit}"
    return f"{sign}{int(n)} B"


def repeated_allocations(
    lines: np.ndarray, ops: np.ndarray, sizes: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> pd.DataFrame:
    """Per (line, op, bytes) of the temporaries given: how often an allocation was made again after
    the previous one of the same site and size was freed (``remade``), and how many were made
    (``count``); sites re-made at least :data:`REMADE_AT_LEAST` times with blocks of
    :data:`REMADE_MIN_BYTES` or more, most bytes re-made first. Only temporaries: activations and
    gradients are made again every step by design."""
    cols = ["line", "op", "bytes", "count", "remade"]
    if not len(starts):
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame({"line": lines, "op": ops, "bytes": sizes, "start": starts, "end": ends})
    df = df[(df["line"] != "") & (df["bytes"] >= REMADE_MIN_BYTES)].sort_values(
        ["line", "op", "bytes", "start"], kind="stable"
    )
    prev_end = df.groupby(["line", "op", "bytes"], sort=False)["end"].shift()
    df["remade"] = (df["start"] > prev_end).astype(np.int64)
    g = df.groupby(["line", "op", "bytes"], sort=False).agg(
        count=("start", "size"), remade=("remade", "sum")
    )
    g = g[g["remade"] >= REMADE_AT_LEAST].reset_index()
    g = g.assign(_w=g["bytes"] * g["remade"]).sort_values("_w", ascending=False, kind="stable")
    return g.drop(columns="_w").reset_index(drop=True)[cols]


def _top(live: pd.DataFrame | None) -> str:
    if live is None or live.empty:
        return ""
    g = live.groupby("line", sort=False)["bytes"].sum().sort_values(ascending=False, kind="stable")
    return f"{g.index[0]} ({format_bytes(int(g.iloc[0]))})"


def findings_of(m: MemoryFacts) -> list[Finding]:
    """The findings of one :class:`~gpumagic.analysis.memory.MemoryAnalysis` (its figures:
    :class:`MemoryFacts`), in the module docstring's order: one step each, a step that has nothing
    to say gives none."""
    steps = (_oom, _peak, _gap, _largest_category, _remade, _empty_cache)
    return [finding for step in steps for finding in step(m)]


def _oom(m: MemoryFacts) -> list[Finding]:
    """The out-of-memory failure, what was alive then, and whether a cap on the process refused a
    request the device had room for."""
    if not m.oom:
        return []
    b, o = format_bytes, m.oom
    top = _top(m.live_at_oom)
    return [
        Finding(
            "memory_oom",
            "error",
            f"Out of memory at {o['time_ms']:.1f} ms: a request for {b(o['bytes'])} "
            f"failed with "
            f"{b(o['device_free'])} free on the device; {b(o['allocated'])} allocated and "
            f"{b(o['reserved'])} "
            f"reserved then"
            + (f"; the most alive then came from {top}" if top else "")
            + (
                ". The device had room: a cap on this process "
                "(torch.cuda.set_per_process_memory_fraction) "
                "refused it."
                if o["device_free"] > o["bytes"]
                else "."
            ),
            dict(o),
        )
    ]


def _peak(m: MemoryFacts) -> list[Finding]:
    """The peak, against the device's memory where the caller gave it (a warning above 90%)."""
    b = format_bytes
    when = f" at {m.peak_time_ms:.1f} ms" if m.has_times else ""
    if not m.device_memory:
        return [
            Finding(
                "memory_peak",
                "info",
                f"Peak {b(m.peak_bytes)} allocated{when} ({b(m.peak_reserved)} reserved "
                f"then); the snapshot does "
                "not say how much memory the device has (device_memory=).",
                {"peak_bytes": m.peak_bytes},
            )
        ]
    share = m.peak_bytes / m.device_memory
    return [
        Finding(
            "memory_peak",
            "warn" if share > 0.9 else "info",
            f"Peak {b(m.peak_bytes)} allocated{when}: {share:.1%} of the device's "
            f"{b(m.device_memory)} "
            f"({b(m.peak_reserved)} reserved then).",
            {"peak_bytes": m.peak_bytes, "device_memory": m.device_memory, "share": share},
        )
    ]


def _gap(m: MemoryFacts) -> list[Finding]:
    """Reserved but not allocated at the peak, from :data:`GAP_NOTED` of reserved (or 1 GiB) on;
    above :data:`GAP_SHARE` a warning that names fragmentation and its remedy."""
    gap = m.peak_reserved - m.peak_bytes
    if not (gap > 0 and m.peak_reserved and (gap / m.peak_reserved >= GAP_NOTED or gap >= 1 << 30)):
        return []
    b, share = format_bytes, gap / m.peak_reserved
    return [
        Finding(
            "memory_gap",
            "warn" if share > GAP_SHARE else "info",
            f"At the peak {b(gap)} ({share:.0%} of reserved) was reserved but not "
            f"allocated: cached blocks the "
            "allocator could not use for the request"
            + (
                " (fragmentation; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets "
                "segments grow instead)."
                if share > GAP_SHARE
                else "."
            ),
            {"gap_bytes": gap, "share_of_reserved": share},
        )
    ]


def _largest_category(m: MemoryFacts) -> list[Finding]:
    """The category that holds the most at the peak."""
    if not m.peak_bytes:
        return []
    name, size = max(m.category_at_peak.items(), key=lambda kv: kv[1])
    if not size:
        return []
    b = format_bytes
    return [
        Finding(
            "memory_category",
            "info",
            f"The largest part at the peak is {name}: {b(size)} of {b(m.peak_bytes)} "
            f"({size / m.peak_bytes:.0%}).",
            {"category": name, "bytes": size},
        )
    ]


def _remade(m: MemoryFacts) -> list[Finding]:
    """The site that re-made the most bytes of temporaries (:func:`repeated_allocations`)."""
    if not len(m.repeats):
        return []
    r = m.repeats.iloc[0]
    more = f" ({len(m.repeats) - 1} more sites in .repeats)" if len(m.repeats) > 1 else ""
    return [
        Finding(
            "memory_remade",
            "info",
            f"{r['line']} freed and made a {format_bytes(int(r['bytes']))} block again "
            f"{int(r['remade'])} times "
            f"({r['op']}): a temporary re-made each time round a loop; made once and "
            f"reused (out=, or kept), "
            f"it saves the churn{more}.",
            {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()},
        )
    ]


def _empty_cache(m: MemoryFacts) -> list[Finding]:
    """What ``torch.cuda.empty_cache()`` would hand back at the end, and what that costs."""
    if not m.empty_cache_bytes:
        return []
    b = format_bytes
    return [
        Finding(
            "memory_empty_cache",
            "info",
            f"torch.cuda.empty_cache() would return {b(m.empty_cache_bytes)} of the "
            f"{b(m.at_end['reserved'])} "
            "reserved at the end (segments with no block in use); other processes could "
            "use it, this one "
            "would pay cudaMalloc again to get it back.",
            {"bytes": m.empty_cache_bytes, "reserved": m.at_end["reserved"]},
        )
    ]
