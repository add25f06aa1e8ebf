"""What a capture already does against launch overhead: CUDA graph replays and torch.compile'd
regions.

A launch-bound finding names the remedies, CUDA graphs and torch.compile. Told to a cell that
already replays a graph or runs compiled code, that advice is noise at best. The kernels a graph
replay runs carry the correlation id of its ``cudaGraphLaunch`` (CUPTI and Kineto give every node of
the replay the launch's id), so they are told apart by it; torch.compile'd code shows as
"Torch-Compiled Region" ops (a capture of CPU ops only: nsys records none).
"""

from __future__ import annotations

import pandas as pd

from ..trace import Trace
from ..trace.coverage import LAUNCH_APIS
from .finding import api_names

__all__ = [
    "GRAPH_LAUNCH_APIS",
    "compiled_regions",
    "graph_kernels",
    "join_and",
    "join_or",
    "launch_remedies",
]

#: The launch calls of a CUDA (or HIP) graph, among the calls that launch kernels.
GRAPH_LAUNCH_APIS = tuple(name for name in LAUNCH_APIS if name.endswith("GraphLaunch"))


def graph_kernels(trace: Trace) -> pd.Series:
    """For each kernel, the correlation id of the graph launch that ran it (the replay it belongs
    to), else <NA>."""

    def compute() -> pd.Series:
        api, k = trace.api, trace.kernels
        launches = api.loc[api_names(trace).isin(GRAPH_LAUNCH_APIS), "correlation"]
        inside = k["correlation"].isin(set(launches))
        return k["correlation"].where(inside).astype("Int64")

    return trace.memo("analysis.graph_kernels", compute)


def compiled_regions(trace: Trace) -> int:
    """How many torch.compile'd regions ran in the capture (0 where it recorded no torch ops)."""
    ops = trace.ops
    if ops.empty:
        return 0
    return int(ops["name"].astype(str).str.startswith("Torch-Compiled Region").sum())


def join_or(words: list[str], word: str = "or") -> str:
    """ "a", "a or b", "a, b or c" (``word``: "and" for "a, b and c")."""
    tail = f" {word} " if len(words) > 1 else ""
    return ", ".join(words[:-1]) + tail + (words[-1] if words else "")


def join_and(words: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return join_or(words, "and")


def launch_remedies(trace: Trace) -> tuple[list[str], str]:
    """The remedies for launch overhead this capture does not use yet (of CUDA graphs and
    torch.compile), and what it already uses, in words ("12 of 14 kernels already ran in 2 CUDA
    graph replays", or "")."""
    replay = graph_kernels(trace)
    graphed, compiled = int(replay.notna().sum()), compiled_regions(trace)
    unused = [r for r, used in (("CUDA graphs", graphed), ("torch.compile", compiled)) if not used]
    already = []
    if graphed:
        replays = int(replay.dropna().nunique())
        already.append(
            f"{graphed} of {len(replay)} kernels already ran in {replays} CUDA graph replay"
            + "s" * (replays != 1)
        )
    if compiled:
        already.append(f"{compiled} torch.compile'd region{'s' if compiled != 1 else ''} ran")
    return unused, "; ".join(already)
