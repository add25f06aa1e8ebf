"""Findings computed from a Trace: each a sentence with the numbers behind it. No rendering, no torch.

What no other notebook tool says for you: is the GPU busy or waiting on the host, are the kernels too small to
amortise their launch, is an fp32 GEMM running on CUDA cores when TF32 tensor cores would do, are there copies
nobody asked for, where does the time go, and do the numbers check out (kernels seen vs launches issued).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .kernels import decode
from .trace import Trace, union_ns
from .units import format_time

__all__ = ["Finding", "cell_figures", "findings"]

#: A kernel shorter than this is "tiny": its launch (a few µs of host time) costs as much as its work.
TINY_KERNEL_NS = 10_000
_LAUNCH_APIS = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cudaLaunchCooperativeKernel",
    "cudaGraphLaunch",
    "cuGraphLaunch",
)


@dataclass
class Finding:
    kind: str
    severity: str  # "info", "warn", "error"
    message: str
    numbers: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


def _t(ns: float) -> str:
    return format_time(ns * 1e-9)


def cell_figures(trace: Trace) -> dict[str, Any]:
    """The figures the summary line and the findings share: wall, GPU busy, utilisation, CPU time."""
    w0, w1 = trace.cell_window()
    wall = max(0, w1 - w0)
    gpu = trace.gpu_intervals()
    busy = union_ns(gpu["start"].to_numpy(), gpu["end"].to_numpy())
    ops = trace.ops
    cpu_top = 0
    if not ops.empty:
        top = ops[ops["depth"] == 0]
        cpu_top = union_ns(top["start"].to_numpy(), top["end"].to_numpy())
    return {
        "wall_ns": wall,
        "gpu_busy_ns": busy,
        "gpu_util": busy / wall if wall else None,
        "cpu_ops_ns": cpu_top,
        "kernels": len(trace.kernels),
        "memops": len(trace.memops),
    }


def findings(trace: Trace, top: int = 3) -> list[Finding]:
    out: list[Finding] = []
    fig = cell_figures(trace)
    k = trace.kernels
    launches = (
        trace.api[trace.api["name"].str.replace(r"_v\d+$", "", regex=True).isin(_LAUNCH_APIS)]
        if not trace.api.empty
        else trace.api
    )

    # --- self-checks first: numbers that do not add up are the most important thing to say ---------------------
    if k.empty and trace.memops.empty:
        if not launches.empty:
            out.append(
                Finding(
                    "kernels_dropped",
                    "error",
                    f"{len(launches)} kernel launches were recorded but no kernel ran in the capture: the "
                    "profiler dropped them (a known CUPTI start-up issue); run the cell again.",
                    {"launches": len(launches)},
                )
            )
        elif trace.meta.get("cuda_available") is False or trace.meta.get("device") == "CPU":
            out.append(
                Finding(
                    "no_gpu",
                    "info",
                    "No GPU activity was captured: CUDA is not available here, so only CPU ops are shown.",
                )
            )
        else:
            out.append(Finding("no_gpu_work", "info", "The cell launched no GPU work (its tensors may be on the CPU)."))
        return out
    if not launches.empty and not k.empty:
        launched = set(launches["correlation"].dropna().astype(int)) - {-1}
        seen = set(k["correlation"].dropna().astype(int)) - {-1}
        graph_launches = launches["name"].str.contains("Graph").sum()
        missing = launched - seen
        if missing and not graph_launches:
            out.append(
                Finding(
                    "kernels_missing",
                    "warn",
                    f"{len(missing)} of {len(launched)} kernel launches have no kernel in the capture: the "
                    "profiler lost them, so GPU time is under-reported.",
                    {"missing": len(missing), "launches": len(launched)},
                )
            )

    # --- where the time goes ------------------------------------------------------------------------------------
    wall, busy = fig["wall_ns"], fig["gpu_busy_ns"]
    if wall and busy / wall < 0.5:
        idle = 1 - busy / wall
        cpu = fig["cpu_ops_ns"]
        sev = "warn"
        msg = f"The GPU is idle {idle:.0%} of the cell's {_t(wall)}: it is busy for {_t(busy)}"
        if cpu and cpu >= 3 * busy:
            msg += (
                f", while the CPU spends {_t(cpu)} in torch ops. Overhead-bound: the host, not the GPU, sets the "
                "pace (bigger batches, CUDA graphs or torch.compile help)."
            )
        else:
            msg += "."
        out.append(Finding("gpu_idle", sev, msg, {"idle": idle, "wall_ns": wall, "busy_ns": busy, "cpu_ns": cpu}))

    if not k.empty:
        durs = (k["end"] - k["start"]).astype("int64")
        tiny = durs < TINY_KERNEL_NS
        if len(k) >= 20 and tiny.mean() >= 0.5:
            out.append(
                Finding(
                    "tiny_kernels",
                    "warn",
                    f"{int(tiny.sum())} of {len(k)} kernels ran for less than {_t(TINY_KERNEL_NS)} (median "
                    f"{_t(float(durs.median()))}): each costs a launch of a few µs of host time. Launch-bound: "
                    "CUDA graphs or torch.compile (fusion) remove launches.",
                    {"tiny": int(tiny.sum()), "kernels": len(k), "median_ns": float(durs.median())},
                )
            )

        decoded = k["name"].map(decode)
        total = int(durs.sum())
        ffma = decoded.map(
            lambda d: (
                d.op in ("gemm", "conv_fprop", "conv_dgrad", "conv_wgrad")
                and d.tensor_cores is False
                and d.precision == "fp32"
            )
        )
        if ffma.any():
            t_ffma = int(durs[ffma].sum())
            names = sorted({d.short for d in decoded[ffma]})
            out.append(
                Finding(
                    "ffma_gemm",
                    "warn",
                    f"fp32 GEMMs run on CUDA cores (FFMA/SIMT), not tensor cores: {_t(t_ffma)}, "
                    f"{t_ffma / total:.0%} of GPU time ({'; '.join(names[:2])}). "
                    "torch.backends.cuda.matmul.allow_tf32 = True (or "
                    "torch.set_float32_matmul_precision('high')) lets them use TF32 tensor cores.",
                    {"ffma_ns": t_ffma, "share": t_ffma / total},
                )
            )
        cc = trace.meta.get("compute_capability")
        if cc:
            dev_sm = "sm" + cc.replace(".", "")
            older = decoded.map(
                lambda d: (
                    d.arch is not None
                    and d.family in ("cublas_xmma", "cutlass2", "cudnn")
                    and _sm_num(d.arch) < _sm_num(dev_sm)
                    and d.tensor_cores is not False
                )
            )
            if older.any():
                t_old = int(durs[older].sum())
                out.append(
                    Finding(
                        "compat_kernel",
                        "info",
                        f"{int(older.sum())} kernel(s) built for an older SM than this {dev_sm} GPU run "
                        f"({_t(t_old)}, {t_old / total:.0%} of GPU time): compatibility kernels, which may "
                        "miss this GPU's newer instructions.",
                        {"ns": t_old},
                    )
                )
        copies = decoded.map(lambda d: d.op == "copy")
        dtod = trace.memops[trace.memops["kind"] == "DtoD"] if not trace.memops.empty else trace.memops
        t_copy = int(durs[copies].sum()) + int((dtod["end"] - dtod["start"]).sum() if not dtod.empty else 0)
        n_copy = int(copies.sum()) + len(dtod)
        if n_copy and t_copy / max(total, 1) >= 0.05:
            out.append(
                Finding(
                    "copies",
                    "info",
                    f"{n_copy} device-to-device copies ({_t(t_copy)}, {t_copy / max(total, 1):.0%} of GPU time): "
                    "often .contiguous(), dtype casts or non-contiguous views feeding a GEMM.",
                    {"copies": n_copy, "ns": t_copy},
                )
            )
        summ = trace.kernel_summary()
        head = summ.head(top)
        share = head["Time (%)"].sum()
        parts = [f"{decode(n).short} {p:.0f}%" for n, p in zip(head["Name"], head["Time (%)"])]
        out.append(
            Finding(
                "top_kernels",
                "info",
                f"Top {len(head)} of {len(summ)} kernels take {share:.0f}% of GPU time: {'; '.join(parts)}.",
                {"share": share},
            )
        )
    return out


def _sm_num(sm: str) -> int:
    digits = "".join(ch for ch in sm if ch.isdigit())
    return int(digits) if digits else 0


def op_table(trace: Trace) -> pd.DataFrame:
    """Torch ops aggregated by name: calls, CPU total, self CPU (minus children), and the GPU time of the kernels
    they launched (kernel -> launching API call by correlation -> innermost op enclosing that call). Sorted by self
    CPU, the column that shows host overhead. One sweep per thread: O(n log n)."""
    ops = trace.ops
    cols = ["Name", "Calls", "CPU total (ns)", "Self CPU (ns)", "GPU (ns)", "Input shapes"]
    if ops.empty:
        return pd.DataFrame(columns=cols)
    ops = ops.sort_values(["thread", "start", "end"], ascending=[True, True, False]).reset_index(drop=True)
    start = ops["start"].to_numpy(dtype="int64")
    end = ops["end"].to_numpy(dtype="int64")
    dur = end - start
    child = np.zeros(len(ops), dtype="int64")
    gpu = np.zeros(len(ops), dtype="int64")
    kdur: dict[int, int] = {}
    if not trace.kernels.empty:
        kd = trace.kernels.assign(d=trace.kernels["end"] - trace.kernels["start"]).groupby("correlation")["d"].sum()
        kdur = {int(c): int(v) for c, v in kd.items()}
    api = trace.api[trace.api["correlation"].isin(list(kdur))] if kdur and not trace.api.empty else trace.api.iloc[0:0]
    api_by_thread = {th: g.sort_values("start") for th, g in api.groupby("thread")} if not api.empty else {}
    threads = ops["thread"].to_numpy()
    bounds = np.flatnonzero(np.r_[True, threads[1:] != threads[:-1], True])
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        a = api_by_thread.get(threads[lo])
        a_start = a["start"].to_numpy(dtype="int64") if a is not None else np.empty(0, dtype="int64")
        a_corr = a["correlation"].to_numpy(dtype="int64") if a is not None else np.empty(0, dtype="int64")
        j = 0
        stack: list[int] = []
        for i in range(lo, hi):
            s = start[i]
            while j < len(a_start) and a_start[j] < s:  # API calls before this op starts: attribute to the stack
                while stack and end[stack[-1]] <= a_start[j]:
                    stack.pop()
                if stack:
                    gpu[stack[-1]] += kdur.get(int(a_corr[j]), 0)
                j += 1
            while stack and end[stack[-1]] <= s:
                stack.pop()
            if stack:
                child[stack[-1]] += dur[i]
            stack.append(i)
        while j < len(a_start):
            while stack and end[stack[-1]] <= a_start[j]:
                stack.pop()
            if stack:
                gpu[stack[-1]] += kdur.get(int(a_corr[j]), 0)
            j += 1
    df = pd.DataFrame({"Name": ops["name"], "dur": dur, "self": dur - child, "gpu": gpu, "shapes": ops["shapes"]})
    g = df.groupby("Name", sort=False)
    out = pd.DataFrame(
        {
            "Calls": g.size(),
            "CPU total (ns)": g["dur"].sum(),
            "Self CPU (ns)": g["self"].sum(),
            "GPU (ns)": g["gpu"].sum(),
            "Input shapes": g["shapes"].first(),
        }
    )
    out["Name"] = out.index
    out.index.name = None
    return out.sort_values("Self CPU (ns)", ascending=False).reset_index(drop=True)[cols]
