"""What the host did in a window besides launching kernels: compiling, allocator and set-up calls,
loading data.

A GPU idle while the host is busy reads as "overhead-bound" only where the host was busy launching.
A trace of a first call spends seconds in torch.compile (dynamo and Inductor record their phases as
``... (dynamo_timed)`` ranges), a CUDA-graph capture spends a second in two ``cudaFree`` calls, a
training loop waits for its DataLoader: none of that is per-launch overhead, and no CUDA graph or
bigger batch removes it. :func:`host_work` finds that time in a window, so the pace verdict can
take it out before it judges what is left.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..trace import Trace, union_ns
from ..trace.intervals import stretches as merged
from .finding import api_names, t

__all__ = [
    "COMPILE_RANGE",
    "SETUP_APIS",
    "HostWork",
    "covered",
    "host_work",
    "merged",
    "overlap_ns",
]

#: A range torch.compile records while it compiles: dynamo_timed's ``<phase> (dynamo_timed)``, and
#: the phases' own names (newer torch versions drop the suffix on some).
COMPILE_RANGE = re.compile(
    r"\(dynamo_timed\)$|^(?:entire_frame_compile|_compile\.compile_inner|compile_fx|"
    r"inductor_compile|backend_compile|OutputGraph\.call_user_compiler|GraphLowering\.compile|"
    r"Scheduler\.codegen|CachingAutotuner|async_compile|TritonBundler)"
)
#: One-time set-up calls of CUDA and HIP: the allocator growing or shrinking, modules and graphs
#: loaded or built, lazy loading of a kernel's code on its first launch.
SETUP_APIS = re.compile(
    r"^(?:cuda|cu|hip)(?:Malloc|Free|MemAlloc|MemFree|MemCreate|MemMap|MemUnmap|MemRelease|"
    r"MemAddress|HostAlloc|HostMalloc|HostFree|MallocHost|FreeHost|HostRegister|HostUnregister|"
    r"ExtMalloc|ModuleLoad|LibraryLoad|GraphInstantiate|StreamCreate)|^Lazy Function Loading$"
)
#: What torch.profiler records around a DataLoader's ``next``.
_LOADING = re.compile(r"^enumerate\(DataLoader\)")


@dataclass(frozen=True)
class HostWork:
    """Host time in a window that is not launching: per kind ("compile", "setup", "loading") its
    covered time (overlaps once), and the covered stretches of them all, as sorted (starts, ends);
    ``setup_calls``: each set-up call's name and count."""

    ns: dict[str, int]
    starts: np.ndarray
    ends: np.ndarray
    setup_calls: Counter[str] = field(default_factory=Counter)

    @property
    def total_ns(self) -> int:
        return int((self.ends - self.starts).sum())

    def covered(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """How much of each interval (starts[i], ends[i]) this work covers."""
        return covered((self.starts, self.ends), starts, ends)

    def words(self) -> list[str]:
        """Each kind in words, largest first: "1.53 s compiling (torch.compile's dynamo/Inductor
        ranges)", "1.3 s in allocator and set-up calls (cudaFree ×2)"."""
        calls = ", ".join(f"{n} ×{c}" for n, c in self.setup_calls.most_common(3))
        text = {
            "compile": "compiling (torch.compile's dynamo/Inductor ranges)",
            "setup": f"in allocator and set-up calls ({calls})",
            "loading": "loading data (DataLoader)",
        }
        order = sorted((k for k, ns in self.ns.items() if ns), key=lambda k: -self.ns[k])
        return [f"{t(self.ns[k])} {text[k]}" for k in order]


def covered(
    stretches: tuple[np.ndarray, np.ndarray], starts: np.ndarray, ends: np.ndarray
) -> np.ndarray:
    """How much of each interval (starts[i], ends[i]) the disjoint sorted ``stretches`` cover
    (:func:`merged`), from their running total: no interval is compared with every stretch."""
    a, b = stretches
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    if not len(a):
        return np.zeros(len(starts), dtype=np.int64)
    cum = np.r_[0, np.cumsum(b - a)]

    def upto(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(a, x, side="right") - 1
        j = np.maximum(i, 0)
        return np.where(i < 0, 0, cum[j] + np.clip(x - a[j], 0, b[j] - a[j]))

    inside: np.ndarray = upto(ends) - upto(starts)
    return inside


def overlap_ns(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """How long some interval of ``a`` and some of ``b`` ran at once (each side's overlaps once)."""
    if not len(a[0]) or not len(b[0]):
        return 0
    both = union_ns(np.r_[a[0], b[0]], np.r_[a[1], b[1]])
    return union_ns(*a) + union_ns(*b) - both


def _clipped(df: pd.DataFrame, hit: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    s = np.clip(df["start"].to_numpy(dtype="int64")[hit], lo, hi)
    e = np.clip(df["end"].to_numpy(dtype="int64")[hit], lo, hi)
    keep = e > s
    return s[keep], e[keep]


def _named(names: pd.Series, pattern: re.Pattern[str]) -> np.ndarray:
    """Which of ``names`` match ``pattern``, asked once per distinct name. A categorical (a big
    export's API names) is asked per category and read through its codes: turning a million codes
    into strings first cost 0.3 s."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        cats = names.cat.categories
        hit = np.fromiter((bool(pattern.search(str(c))) for c in cats), dtype=bool, count=len(cats))
        codes = names.cat.codes.to_numpy()
        named: np.ndarray = np.append(hit, False)[codes]  # code -1 (no name): the appended False
        return named
    names = names.astype(str)
    hits = {n for n in pd.unique(names) if pattern.search(n)}
    return names.isin(hits).to_numpy() if hits else np.zeros(len(names), dtype=bool)


def host_work(trace: Trace, start: int, end: int) -> HostWork:
    """The host's compile, set-up and data-loading time inside [start, end] (module doc)."""
    parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    ranges = [(df, col) for df, col in ((trace.nvtx, "text"), (trace.ops, "name")) if not df.empty]
    for kind, pattern in (("compile", COMPILE_RANGE), ("loading", _LOADING)):
        spans = [_clipped(df, _named(df[col], pattern), start, end) for df, col in ranges]
        parts[kind] = (
            np.concatenate([s for s, _ in spans]) if spans else np.zeros(0, np.int64),
            np.concatenate([e for _, e in spans]) if spans else np.zeros(0, np.int64),
        )
    calls: Counter[str] = Counter()
    if trace.api.empty:
        parts["setup"] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    else:
        names = api_names(trace)
        hit = _named(names, SETUP_APIS)
        parts["setup"] = _clipped(trace.api, hit, start, end)
        inside = hit & (trace.api["end"] > start).to_numpy() & (trace.api["start"] < end).to_numpy()
        calls.update(names[inside].astype(str))
    ns = {kind: union_ns(*se) for kind, se in parts.items()}
    starts = np.concatenate([s for s, _ in parts.values()])
    ends = np.concatenate([e for _, e in parts.values()])
    stretches = merged(starts, ends)
    return HostWork(ns, stretches[0], stretches[1], calls)
