"""Whether hardware counters can be sampled in this process (CUPTI's PM sampling), and the one line
that says what was found where they cannot.

PM sampling (``cupti.pm_sampling``: counters read periodically while kernels run, no replay) needs
cupti-python 13.3 or later *and* a libcupti of 13.3 or later in the process: torch loads its own
libcupti, so the torch must be built for CUDA 13.4 or later (a 13.0 torch's libcupti lacks
``cuptiProfilerHostGetSinglePassSets``: seen on an H100 host with torch 2.11, 2026-11-26). gpumagic
reads counters through Nsight Systems today (``%%gpuprofile --nsys --counters``); this module names
the versions found so the line says which part is missing, without importing the binding's
profiler modules (which would load libcupti).
"""

from __future__ import annotations

import sys

from .cupti_direct import _binding_version

__all__ = ["MIN_BINDING", "MIN_CUDA", "in_process_counters_line"]

#: The oldest cupti-python with PM sampling.
MIN_BINDING = (13, 3)
#: The oldest CUDA (a torch built for it) whose libcupti has PM sampling's host API.
MIN_CUDA = (13, 4)
ROUTE = "%%gpuprofile --nsys --counters samples them under Nsight Systems in the same capture"


def _version(text: str | None) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in str(text).split(".")[:2])
    except ValueError:
        return None


def in_process_counters_line(binding: str | None = None, cuda: str | None = None) -> str:
    """Why ``--counters`` is not read in this process, naming the versions found (``binding``:
    cupti-python's, ``cuda``: torch's CUDA; looked up where not given) and the route that works."""
    if binding is None:
        binding = _binding_version()
    if cuda is None:
        torch = sys.modules.get("torch")
        cuda = getattr(getattr(torch, "version", None), "cuda", None)
    found = f"cupti-python {binding or 'not installed'}, torch's CUDA {cuda or 'none (CPU build)'}"
    need = (
        f"cupti-python {MIN_BINDING[0]}.{MIN_BINDING[1]}+ and a torch built for CUDA "
        f"{MIN_CUDA[0]}.{MIN_CUDA[1]}+ (its libcupti)"
    )
    have_binding = (_version(binding) or (0,)) >= MIN_BINDING
    have_cuda = (_version(cuda) or (0,)) >= MIN_CUDA
    if have_binding and have_cuda:
        why = (
            f"hardware counters in this process would come from CUPTI's PM sampling ({found}: "
            "enough), which this gpumagic does not read yet"
        )
    else:
        why = f"hardware counters in this process need CUPTI's PM sampling: {need}; found {found}"
    return f"--counters: {why}. Profiled without them; {ROUTE}."
