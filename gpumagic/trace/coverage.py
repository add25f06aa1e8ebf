"""What a capture recorded, and what to say where it did not: one definition for every loader and
every view.

An empty table of a Trace is either a fact (the capture recorded kernels and none ran: an idle GPU
is a fine thing to report) or unknown (it did not record them: nsys run without cuda in its trace
list, torch.profiler without ProfilerActivity.CUDA). The loaders put the kinds the capture recorded
in ``meta["recorded"]`` with :func:`recorded_kinds`; ``Trace.recorded(kind)`` reads it, and
``Trace.not_recorded(kind)`` gives the sentence a user reads instead of a number: that the capture
did not record it, how that shows, and how to record it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd

from .device_caps import is_amd

__all__ = [
    "KINDS",
    "LAUNCH_APIS",
    "RECORDS",
    "device_not_read",
    "made_by_api",
    "names_passing",
    "not_recorded",
    "not_recorded_in",
    "range_profiled",
    "recordable",
    "recorded_kinds",
]

#: The kinds of record, named and ordered as the Trace's tables (``trace.COLUMNS``).
KINDS = ("kernels", "memops", "api", "ops", "nvtx", "osrt")

#: The CUDA API calls that launch kernels (names without their ``_vNNNN`` version suffix).
LAUNCH_APIS = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cudaLaunchCooperativeKernel",
    "cudaGraphLaunch",
    "cuGraphLaunch",
    # ROCm's, in a Kineto trace of an AMD GPU (its category is cuda_runtime there too)
    "hipLaunchKernel",
    "hipExtLaunchKernel",
    "hipModuleLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipGraphLaunch",
)
_MEMOP_API = re.compile(r"^(?:cu(?:da)?|hip)Mem(?:cpy|set)")

#: Per backend, each kind of record it can record: what it is called, how a capture without it
#: shows, and what records it. The one source of every "not recorded" sentence
#: (:meth:`Trace.not_recorded`).
_NSYS = "nsys profile -t cuda,nvtx,osrt <command>"
_NSYS_CUDA = f"cuda in nsys' trace list: {_NSYS}"
_TORCH_CUDA = "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])"
_TORCH_CPU = f"ProfilerActivity.CPU among torch.profiler's activities: {_TORCH_CUDA}"
_ROCPROF = "rocprofv3 --kernel-trace --hip-runtime-trace --memory-copy-trace"
RECORDS: dict[str, dict[str, tuple[str, str, str]]] = {
    "nsys": {
        "kernels": (
            "CUDA kernels",
            "the export has no CUPTI_ACTIVITY_KIND_KERNEL table",
            _NSYS_CUDA,
        ),
        "memops": (
            "memory operations",
            "the export has no CUPTI_ACTIVITY_KIND_MEMCPY or CUPTI_ACTIVITY_KIND_MEMSET table",
            _NSYS_CUDA,
        ),
        "api": (
            "CUDA API calls",
            "the export has no CUPTI_ACTIVITY_KIND_RUNTIME table",
            _NSYS_CUDA,
        ),
        "nvtx": (
            "NVTX ranges",
            "the export has no NVTX_EVENTS table",
            f"nvtx in nsys' trace list: {_NSYS}",
        ),
        "osrt": (
            "OS runtime calls",
            "the export has no OSRT_API table",
            f"osrt in nsys' trace list: {_NSYS}",
        ),
    },
    "rocprof": {  # a rocprof kernel list written as Chrome JSON: its dispatches, nothing else
        "kernels": ("HIP kernels", "the file has no GPU dispatch events", _ROCPROF),
        "memops": ("memory copies", "the file has no copy events", _ROCPROF),
        "api": ("HIP API calls", "the file has no HIP API events", _ROCPROF),
    },
    "torch.profiler": {
        "kernels": ("CUDA kernels", "the trace has no 'kernel' events", _TORCH_CUDA),
        "memops": (
            "memory operations",
            "the trace has no 'gpu_memcpy' or 'gpu_memset' events",
            _TORCH_CUDA,
        ),
        "api": (
            "CUDA API calls",
            "the trace has no 'cuda_runtime' or 'cuda_driver' events",
            _TORCH_CUDA,
        ),
        "ops": ("torch ops", "the trace has no 'cpu_op' events", _TORCH_CPU),
        "nvtx": ("record_function ranges", "the trace has no 'user_annotation' events", _TORCH_CPU),
    },
}
#: What each kind is called where the backend never records it (or is not known).
_NOUNS = {
    "kernels": "CUDA kernels",
    "memops": "memory operations",
    "api": "CUDA API calls",
    "ops": "torch ops",
    "nvtx": "NVTX ranges",
    "osrt": "OS runtime calls",
}
_ELSEWHERE = {
    (
        "nsys",
        "ops",
    ): "nsys records no torch ops: record them with torch.profiler (%%gpuprofile without --nsys).",
    (
        "torch.profiler",
        "osrt",
    ): f"torch.profiler records no OS runtime calls: record them with nsys ({_NSYS}).",
}


def made_by_api(name: object) -> str | None:
    """The GPU record a CUDA API call makes: "kernels" for a kernel or graph launch, "memops" for a
    memcpy or memset, else None (``cudaLaunchKernel_v7000`` is ``cudaLaunchKernel``)."""
    base = re.sub(r"_v\d+$", "", str(name))
    if base in LAUNCH_APIS:
        return "kernels"
    return "memops" if _MEMOP_API.match(base) else None


def recorded_kinds(held: Iterable[str], made: Iterable[str | None] = ()) -> list[str]:
    """The kinds of record (:data:`KINDS`) a capture recorded, from the kinds it holds (an nsys
    export's tables, a Chrome trace's event categories) and those its recorded CUDA API calls would
    have made (:func:`made_by_api` of each call, or of each distinct name).

    A capture that recorded CUDA API calls and holds no kernels (or no memory operations) recorded
    them all the same where none of its calls would have made one: nsys leaves a table out of its
    export when it has no row for it (a capture without copies has no memcpy table), and a genuinely
    idle GPU is a fine thing to report. Where its calls launched kernels (copied memory) and it
    holds none, it did not record them: the GPU was not idle."""
    held = set(held)
    out = set(held)
    if "api" in held:
        made = set(made)
        out.update(kind for kind in ("kernels", "memops") if kind not in made)
    return [k for k in KINDS if k in out]


def not_recorded(backend: str, kind: str, detail: str = "") -> str:
    """The sentence for a capture of ``backend`` that did not record ``kind``: that it did not, how
    that shows, and how to record it; ``detail`` (what follows from it) goes before the how."""
    known = RECORDS.get(backend, {}).get(kind)
    if known is None:
        how = _ELSEWHERE.get((backend, kind), "")
        return f"This capture did not record {_NOUNS[kind]}{detail}." + (f" {how}" if how else "")
    noun, where, how = known
    return f"This capture did not record {noun} ({where}){detail}. Record {noun} with {how}."


def not_recorded_in(meta: dict[str, Any], kind: str, detail: str = "") -> str:
    """The sentence for the capture ``meta`` describes, which did not record ``kind``: for a device
    gpumagic does not read (MTIA), that it is named and left out, with no CUDA advice; for CUPTI's
    range profiler's kernels, that they hold counters and no times; for gpumagic's own ``--nsys``
    capture (``meta["nsys_trace"]``: what it traced) without OS runtime calls, the setting that
    records them; else :func:`not_recorded` of its backend."""
    unread = meta.get("unread_devices")
    if unread and kind in ("kernels", "memops", "api"):
        return device_not_read(unread, meta.get("device"))
    if kind == "kernels" and meta.get("range_profiler"):
        return range_profiled(meta["range_profiler"])
    unplaced = (meta.get("unplaced_events") or {}).get(kind)
    if unplaced and kind in ("kernels", "memops"):  # all dropped, not "no 'kernel' events"
        events = f"{unplaced:,} events have" if unplaced != 1 else "one event has"
        return (
            f"None of the trace's {_NOUNS[kind]} could be placed in time: its {events} a "
            "negative or NaN dur, or a ts that is no number, and were left out."
        )
    traced = str(meta.get("nsys_trace") or "")  # what gpumagic's own --nsys asked nsys for
    if kind == "osrt" and traced and "osrt" not in traced.split(","):
        return (
            f"This capture did not record OS runtime calls (--nsys traced {traced}){detail}. "
            "gpumagic's --nsys leaves osrt out, since nsys' "
            "processing of it adds ~3 s to each capture: GpuMagics.nsys_trace (NsysOptions.trace "
            f'in a script) = "{traced},osrt" records them.'
        )
    said = not_recorded(str(meta.get("backend", "")), kind, detail)
    return on_rocm(said) if is_amd(meta) else said


#: ROCm's names for what a CUDA capture records: PyTorch's ROCm build keeps the CUDA spellings in
#: its API (``ProfilerActivity.CUDA``), but its kernels and calls are HIP's.
_ROCM_NOUNS = {"CUDA kernels": "HIP kernels", "CUDA API calls": "HIP API calls"}


def on_rocm(sentence: str) -> str:
    """A not-recorded sentence said for an AMD GPU: HIP's nouns, and the advice's CUDA activity
    said to be the one that records HIP on a ROCm build of PyTorch."""
    for cuda, hip in _ROCM_NOUNS.items():
        sentence = sentence.replace(cuda, hip)
    if "ProfilerActivity.CUDA" in sentence:
        sentence = sentence.rstrip(".") + ": on a ROCm build of PyTorch, ProfilerActivity.CUDA "
        sentence += "records HIP's activity."
    return sentence


def recordable(backend: str, kind: str) -> bool:
    """Whether ``backend`` records ``kind`` at all (nsys records no torch ops, torch.profiler no OS
    runtime calls); True where the backend is not one gpumagic knows."""
    known = RECORDS.get(backend)
    return known is None or kind in known


def device_not_read(unread: dict[str, dict[str, int]], device: str | None = None) -> str:
    """The sentence for a trace of a device gpumagic does not read (``meta["unread_devices"]``:
    device kind -> category -> events, e.g. MTIA): named and left out, and no CUDA advice, since
    CUDA is not what it ran."""
    if "uncategorised" in unread:
        n = sum(unread["uncategorised"].values())
        return (
            f"This file's {n:,} events have no category ('cat'): it is a Chrome trace, not a "
            "torch.profiler (Kineto) one, whose events say what they are (kernel, gpu_memcpy, "
            "cuda_runtime, cpu_op), so nothing in it can be told apart as GPU work: no kernel "
            "table, GPU time or advice is made from it. Export the profile with torch.profiler "
            "(prof.export_chrome_trace) to read it here."
        )
    kinds = " and ".join(unread)
    counts = ", ".join(f"{n:,} {cat} events" for per in unread.values() for cat, n in per.items())
    named = f" ({device})" if device else ""
    return (
        f"This trace holds {kinds} device activity{named}: {counts}. gpumagic reads NVIDIA "
        f"and AMD GPU activity only, "
        f"so the {kinds} activity is left out: no kernel table, GPU time or advice is made "
        f"from it; the CPU side "
        "(torch ops, ranges) is shown."
    )


def range_profiled(info: dict[str, Any]) -> str:
    """The sentence for a trace of CUPTI's range profiler (``meta["range_profiler"]``): its kernels
    ran and were profiled, one counter record each; none was dropped, but no run time was recorded
    for them."""
    n, names = int(info.get("kernels", 0)), int(info.get("names", 0))
    counters = list(info.get("counters") or [])
    which = (
        f" ({', '.join(counters[:2])}{', ...' if len(counters) > 2 else ''})" if counters else ""
    )
    return (
        f"This trace is from CUPTI's range profiler: it holds hardware counters{which} for "
        f"{n:,} kernel"
        f"{'s' if n != 1 else ''} ({names} distinct), not their run times (the profiler "
        f"replays each kernel under "
        "its counters), so there is no kernel table or GPU time figure. To time the kernels, "
        "profile without "
        f"profiler metrics: {_TORCH_CUDA}."
    )


def names_passing(names: pd.Series, test: Callable[[str], bool]) -> np.ndarray:
    """Which rows' names pass ``test``, asked once per distinct name: a million-row column is not
    turned into strings row by row (a categorical's codes pick from its categories' answers)."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        answers = np.array([bool(test(str(c))) for c in names.cat.categories] + [False])
        return np.asarray(
            answers[names.cat.codes.to_numpy()]
        )  # code -1 (missing) picks the last, False
    uniques = pd.unique(names)
    passing = [u for u in uniques if test(str(u))]
    return np.asarray(names.isin(passing).to_numpy())
