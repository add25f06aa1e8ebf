"""Who sets the pace: a GPU idle most of the cell (and a host busy in torch ops), or kernels too
small to amortise their launch."""

from __future__ import annotations

import numpy as np

from ..trace import WINDOW_TEXT, Trace
from .finding import Finding, kernel_facts, t
from .launch_remedies import graph_kernels, join_or, launch_remedies
from .rank_lists import SHOWN_AT_SCALE, between, listed, on_ranks, others_range
from .ranks import is_multi, rank_figures

__all__ = ["TINY_KERNEL_NS", "gpu_idle", "tiny_kernels"]

#: A kernel shorter than this is "tiny": its launch (a few µs of host time) costs as much as its
#: work.
TINY_KERNEL_NS = 10_000


def gpu_idle(trace: Trace) -> list[Finding]:
    """The GPU busy under half of the cell's window; overhead-bound when the host spends 3x that in
    torch ops. With several processes or GPUs, each GPU over its own process's range. Where the
    capture did not record kernels or memory operations, GPU busy is not known: no idle share, but
    what was not recorded and how to record it (kernels: the self-check's finding already says
    so)."""
    unrecorded = trace.figures()["unrecorded"]
    if unrecorded:
        if "kernels" in unrecorded:
            return []
        detail = (
            ": the GPU's time is known for kernels only, so no share of the window is given for it"
        )
        return [Finding("memops_not_recorded", "warn", str(trace.not_recorded("memops", detail)))]
    if is_multi(trace):
        return _idle_per_rank(trace)
    fig = trace.figures()
    wall, busy = fig["wall_ns"], fig["gpu_busy_ns"]
    if not wall or busy / wall >= 0.5:
        return []
    idle = 1 - busy / wall
    cpu = fig["cpu_ops_ns"]
    msg = (
        f"The GPU is idle {idle:.0%} of {fig['window_text']} ({t(wall)}): it is busy for {t(busy)}"
    )
    if cpu and cpu >= 3 * busy:
        unused, already = launch_remedies(trace)
        msg += (
            f", while the CPU spends {t(cpu)} in torch ops. Overhead-bound: the host, not the "
            f"GPU, sets the "
            f"pace ({join_or(['bigger batches', *unused])} "
            f"help{f'; {already}' if already else ''})."
        )
    else:
        msg += "."
    return [
        Finding(
            "gpu_idle", "warn", msg, {"idle": idle, "wall_ns": wall, "busy_ns": busy, "cpu_ns": cpu}
        )
    ]


def _idle_per_rank(trace: Trace) -> list[Finding]:
    """Each GPU busy under half of its process's range, most idle first, out of how many ranks; and
    how busy the other ranks' GPUs were (a list of the idle ones alone reads as the whole job)."""
    fig = rank_figures(trace)
    fig = fig[fig["span_ns"] > 0]
    busy_share = fig["busy_ns"] / fig["span_ns"].clip(lower=1)
    hit = busy_share < 0.5
    idle = fig[hit].assign(share=busy_share[hit]).sort_values("share", kind="stable")
    if idle.empty:
        return []
    kinds = {WINDOW_TEXT[k] for k in idle["window"]}
    parts = [
        f"{r['label']} (GPU {int(r['device'])}) idle {1 - r['share']:.0%} of "
        f"{t(r['span_ns'])}, busy {t(r['busy_ns'])}"
        for _, r in idle.iterrows()
    ]
    where = f"{kinds.pop()} in each process" if len(kinds) == 1 else "each process's range"
    ranks = fig["label"].nunique()
    text = (
        f"GPUs idle most of {where}, "
        f"{on_ranks(idle['label'].nunique(), ranks, fig['label'].tolist())}: "
    )
    rest = idle["share"].iloc[SHOWN_AT_SCALE:]
    more = f"idle {between(f'{1 - rest.max():.0%}', f'{1 - rest.min():.0%}')}" if len(rest) else ""
    text += listed(parts, more)
    busy = fig[~hit].assign(share=busy_share[~hit]).sort_values("share", kind="stable")
    if not busy.empty:
        text += "; " + others_range(
            busy["label"].tolist(), [f"{x:.0%}" for x in busy["share"]], "busy"
        )
        text += " of its range" if len(busy) == 1 else " of their range"
    return [
        Finding(
            "gpu_idle",
            "warn",
            text + ".",
            {
                "ranks": idle["label"].tolist(),
                "idle": (1 - idle["share"]).tolist(),
                "busy_ns": idle["busy_ns"].tolist(),
                "wall_ns": idle["span_ns"].tolist(),
                "of_ranks": ranks,
            },
        )
    ]


def tiny_kernels(trace: Trace) -> list[Finding]:
    """At least 20 kernels launched one by one, half of them shorter than a launch costs (the
    kernels of a CUDA graph replay cost no launch of their own: they are left out)."""
    k = trace.kernels
    launched = graph_kernels(trace).isna().to_numpy()
    if int(launched.sum()) < 20:
        return []
    durs = kernel_facts(trace).durations[launched]
    k = k[launched]
    tiny = durs < TINY_KERNEL_NS
    if tiny.mean() < 0.5:
        return []
    median = float(np.median(durs))
    unused, already = launch_remedies(trace)
    remedies = [r + " (fusion)" * (r == "torch.compile") for r in unused]
    remedies = remedies or ["fusing kernels"]
    return [
        Finding(
            "tiny_kernels",
            "warn",
            f"{int(tiny.sum())} of {len(k)} kernels ran for less than {t(TINY_KERNEL_NS)} (median "
            f"{t(median)}): each costs a launch of a few µs of host time. Launch-bound: "
            f"{join_or(remedies)} "
            f"remove launches{f' ({already})' if already else ''}.",
            {"tiny": int(tiny.sum()), "kernels": len(k), "median_ns": median},
        )
    ]
