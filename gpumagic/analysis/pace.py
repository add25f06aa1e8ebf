"""Who sets the pace: a GPU idle most of the cell (and a host busy in torch ops), or kernels too
small to amortise their launch."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import WINDOW_TEXT, Trace, union_ns
from .finding import Finding, kernel_facts, pct, t
from .host_work import HostWork, host_work, overlap_ns
from .launch_remedies import graph_kernels, join_and, join_or, launch_remedies
from .rank_lists import SHOWN_AT_SCALE, between, listed, on_ranks, others_range
from .ranks import is_multi, rank_figures

__all__ = ["TINY_KERNEL_NS", "gpu_idle", "tiny_kernels"]

#: A kernel shorter than this is "tiny": its launch (a few µs of host time) costs as much as its
#: work.
TINY_KERNEL_NS = 10_000
#: Host time in torch ops per kernel above which a busy host is not launch overhead: a launch costs
#: a few µs, an eager torch op that launches a kernel some 10-50 µs with its Python.
HOST_NS_PER_KERNEL = 100_000
#: The share of the GPU's idle time the host's compile, set-up and data-loading time must cover
#: before the verdict takes it out of the window and says so.
HOST_WORK_SHARE = 0.25


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
    w0, w1, _ = trace.analysis_window()
    work = host_work(trace, w0, w1)
    msg = (
        f"The GPU is idle {pct(idle)} of {fig['window_text']} ({t(wall)}): it is busy for {t(busy)}"
    )
    numbers = {"idle": idle, "wall_ns": wall, "busy_ns": busy, "cpu_ns": fig["cpu_ops_ns"]}
    numbers["host_work_ns"] = work.total_ns
    if work.total_ns < HOST_WORK_SHARE * (wall - busy):
        work = HostWork({}, np.zeros(0, np.int64), np.zeros(0, np.int64))
        verdict, more = _verdict(trace, work, w0, w1)
        msg += (", while " + verdict) if verdict else "."
        return [Finding("gpu_idle", "warn", msg, {**numbers, **more})]
    one_time = {"compile", "setup"} & {k for k, ns in work.ns.items() if ns}
    msg += f". The host spent {join_and(work.words())}"
    msg += ": one-time work, not per-launch overhead" if one_time else ""
    if work.ns.get("loading"):
        msg += (
            "; DataLoader workers (num_workers, pin_memory=True) load the next batch while the GPU "
            "works"
        )
    msg += "."
    rest = wall - work.total_ns
    if rest >= 0.05 * wall:
        verdict, more = _verdict(trace, work, w0, w1)
        numbers.update(more)
        rest_busy = more["rest_busy_ns"]
        msg += f" Over the other {t(rest)} the GPU is busy {pct(rest_busy / rest)}" + (
            f", and {verdict}" if verdict else "."
        )
    return [Finding("gpu_idle", "warn", msg, numbers)]


def _verdict(trace: Trace, work: HostWork, w0: int, w1: int) -> tuple[str, dict[str, float]]:
    """Who sets the pace in the window [w0, w1] outside ``work`` (the host's compile, set-up and
    data-loading time): overhead-bound only where the host's torch ops are 3x the GPU's busy time
    and cost no more per kernel than launching it does (:data:`HOST_NS_PER_KERNEL`); host work of
    its own where they cost more (with the op that takes most of it); "" where the host is not the
    one."""
    gpu = trace.gpu_intervals()
    g = (
        np.clip(gpu["start"].to_numpy("int64"), w0, w1),
        np.clip(gpu["end"].to_numpy("int64"), w0, w1),
    )
    busy = union_ns(*g) - overlap_ns(g, (work.starts, work.ends))
    ops = trace.ops
    top = ops[ops["depth"] == 0] if not ops.empty else ops
    s = np.clip(top["start"].to_numpy("int64"), w0, w1)
    e = np.clip(top["end"].to_numpy("int64"), w0, w1)
    cpu = union_ns(s, e) - overlap_ns((s, e), (work.starts, work.ends))
    k = trace.kernels
    at = k["start"].to_numpy("int64") if not k.empty else np.zeros(0, np.int64)
    at = at[(at >= w0) & (at <= w1)]
    n = int((work.covered(at, at + 1) == 0).sum())
    numbers: dict[str, float] = {"rest_busy_ns": busy, "rest_cpu_ns": cpu, "kernels": n}
    if not cpu or cpu < 3 * busy or not n:
        return "", numbers
    per = cpu / n
    numbers["host_ns_per_kernel"] = per
    spent = f"the CPU spends {t(cpu)} in torch ops for {n} kernels ({t(per)} per kernel)"
    if per <= HOST_NS_PER_KERNEL:
        unused, already = launch_remedies(trace)
        return (
            f"{spent}. Overhead-bound: the host, not the GPU, sets the pace "
            f"({join_or(['bigger batches', *unused])} help{f'; {already}' if already else ''}).",
            numbers,
        )
    own = pd.Series(e - s - work.covered(s, e), index=top["name"].astype(str).to_numpy())
    by_name = own.groupby(level=0).sum()
    name, ns = by_name.idxmax(), int(by_name.max())
    return (
        f"{spent}, far more than launching a kernel costs: the host sets the pace with work of "
        f"its own, not launch overhead ({name} takes {t(ns)} of it; the ops table shows the rest).",
        numbers,
    )


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


#: The GPU idle share of the window under which launches cannot be what paces it.
BUSY_IDLE = 0.10
#: The share of the GPU's idle time the tiny kernels' launch calls must take to be its cause.
LAUNCH_SHARE = 0.25
#: Host calls that wait for the GPU: time the host spends in them leaves the GPU without work next.
SYNC_APIS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def tiny_kernels(trace: Trace) -> list[Finding]:
    """At least 20 kernels launched one by one, half of them shorter than a launch costs (the
    kernels of a CUDA graph replay cost no launch of their own: they are left out, and said to
    be). Launch-bound only where the GPU idled and the tiny kernels' launch calls took a fair
    share (:data:`LAUNCH_SHARE`) of that idle time; a busy GPU hid them, and where their launches
    cannot explain the idle, what does (host synchronizations, compilation) is named instead."""
    k = trace.kernels
    graphed = graph_kernels(trace).notna().to_numpy()
    launched = ~graphed
    if int(launched.sum()) < 20:
        return []
    durs = kernel_facts(trace).durations[launched]
    k = k[launched]
    tiny = durs < TINY_KERNEL_NS
    if tiny.mean() < 0.5:
        return []
    median = float(np.median(durs))
    numbers = {"tiny": int(tiny.sum()), "kernels": len(k), "median_ns": median}
    counted = f"{int(tiny.sum())} of the {len(k)} kernels launched one by one"
    if graphed.any():
        counted += f" ({int(graphed.sum())} more ran in CUDA graph replays, launched as graphs)"
    head = f"{counted} ran for less than {t(TINY_KERNEL_NS)} (median {t(median)})"
    fig = trace.figures()
    wall, busy = fig["wall_ns"], fig["gpu_busy_ns"]
    idle = max(wall - busy, 0)
    numbers.update(wall_ns=wall, busy_ns=busy)
    if wall and idle < BUSY_IDLE * wall:
        text = (
            f"{head}, but the GPU was busy {pct(busy / wall)} of {fig['window_text']}: their "
            "launches overlapped its work, so they do not pace it (fusing them would still save "
            "each kernel's start-up)."
        )
        return [Finding("tiny_kernels", "info", text, numbers)]
    launch_ns = _launch_host_ns(trace, k[tiny])
    if launch_ns is None:
        text = (
            f"{head}: whether their launches pace the GPU needs the CUDA API calls, which this "
            "trace does not hold."
        )
        return [Finding("tiny_kernels", "info", text, numbers)]
    numbers["launch_ns"] = launch_ns
    if launch_ns >= LAUNCH_SHARE * idle:
        unused, already = launch_remedies(trace)
        remedies = [r + " (fusion)" * (r == "torch.compile") for r in unused]
        remedies = remedies or ["fusing kernels"]
        text = (
            f"{head}: issuing them took {t(launch_ns)} of host time while the GPU idled "
            f"{t(idle)}. Launch-bound: {join_or(remedies)} "
            f"remove launches{f' ({already})' if already else ''}."
        )
        return [Finding("tiny_kernels", "warn", text, numbers)]
    pacer = _pacer(trace, idle)
    text = (
        f"{head}, but issuing them took only {t(launch_ns)} of host time against {t(idle)} of "
        f"GPU idle: they do not explain it" + (f"; {pacer} does" if pacer else "") + "."
    )
    return [Finding("tiny_kernels", "info", text, numbers)]


def _launch_host_ns(trace: Trace, kernels: pd.DataFrame) -> int | None:
    """The host time spent issuing ``kernels``: their launch calls (by correlation) and the torch
    ops around those calls (an eager op's Python and dispatch come before its launch), overlaps
    counted once; None where the trace holds no API calls for them."""
    api = trace.api
    if api.empty or "correlation" not in api:
        return None
    calls = api[api["correlation"].isin(set(kernels["correlation"].dropna()))]
    if calls.empty:
        return None
    starts, ends = [calls["start"].to_numpy()], [calls["end"].to_numpy()]
    ops = trace.ops
    if not ops.empty:
        from ..trace.launching_ops import launching_ops

        rows = launching_ops(trace)[trace.kernels.index.get_indexer(kernels.index)]
        rows = np.unique(rows[rows >= 0])
        if len(rows):
            starts.append(ops["start"].to_numpy()[rows])
            ends.append(ops["end"].to_numpy()[rows])
    return int(union_ns(np.concatenate(starts), np.concatenate(ends)))


def _pacer(trace: Trace, idle: int) -> str | None:
    """What else the GPU waited on, where it covers a fair share of its idle time: the host's
    synchronizations, or compilation named by an NVTX range."""
    api = trace.api
    if not api.empty:
        syncs = api[api["name"].astype(str).isin(SYNC_APIS)]
        sync_ns = int((syncs["end"] - syncs["start"]).clip(lower=0).sum())
        if len(syncs) and sync_ns >= LAUNCH_SHARE * idle:
            return (
                f"the host's synchronizations ({len(syncs)} calls, {t(sync_ns)}) between the GPU's "
                "work"
            )
    nvtx = trace.nvtx
    if not nvtx.empty:
        text = nvtx["text"].astype(str)
        compiling = nvtx[text.str.contains(r"compil|fusion_compile|FusionExecutor", case=False)]
        compile_ns = int(union_ns(compiling["start"], compiling["end"])) if len(compiling) else 0
        if compile_ns >= LAUNCH_SHARE * idle:
            first = compiling["text"].iat[0]
            return f"compilation ({t(compile_ns)} in NVTX ranges such as {first!r})"
    return None
