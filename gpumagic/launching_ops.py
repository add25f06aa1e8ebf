"""Which torch op launched each kernel, and the precision its inputs say the kernel ran in.

A kernel name does not always say its precision: cuDNN's fused attention kernels for bf16 and fp16 share one name
("..._flash_fprop_wgmma_f16_..."), and helper kernels ("cudnn::fusion::compute_dot_do_o_specialized") say none.
The op that launched the kernel does: torch.profiler records each op's input types ("c10::BFloat16") where shapes
are recorded. The link is the one ``summaries.op_summary`` follows: kernel -> launching CUDA API call (by
correlation id) -> the innermost op enclosing that call on the same thread. An nsys export has no torch ops, so
there the name is all there is.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import numpy as np

from .trace import Trace

__all__ = ["PRECISION_OF_TYPE", "kernel_op_precisions", "launching_ops", "precision_of_types"]

#: kineto's names of the tensor element types -> the precision words the kernel table uses.
PRECISION_OF_TYPE = {
    "c10::BFloat16": "bf16",
    "c10::Half": "fp16",
    "float": "fp32",
    "double": "fp64",
    "c10::Float8_e4m3fn": "fp8e4m3",
    "c10::Float8_e5m2": "fp8e5m2",
    "signed char": "int8",
}


def precision_of_types(types: str | None) -> str | None:
    """The precision of an op's inputs: the first floating (or int8) type among them ("c10::BFloat16, float" ->
    "bf16"); None where none has one."""
    for name in (types or "").split(", "):
        found = PRECISION_OF_TYPE.get(name.strip())
        if found:
            return found
    return None


def launching_ops(trace: Trace) -> np.ndarray:
    """Per kernel row, the row of ``trace.ops`` (in its order) of the innermost op that enclosed its launch; -1
    where there is none (no ops recorded, a launch outside every op, no launch record)."""
    k, api, ops = trace.kernels, trace.api, trace.ops
    out = np.full(len(k), -1, dtype=np.int64)
    if k.empty or api.empty or ops.empty:
        return out
    launch = api.dropna(subset=["correlation"]).drop_duplicates("correlation").set_index("correlation")
    order = ops.assign(_row=np.arange(len(ops))).sort_values(["thread", "start", "end"], ascending=[1, 1, 0])
    op_of_corr: dict[int, int] = {}
    threads = order["thread"].to_numpy()
    bounds = np.flatnonzero(np.r_[True, threads[1:] != threads[:-1], True])
    for lo, hi in pairwise(bounds):
        part = order.iloc[lo:hi]
        calls = launch[launch["thread"] == threads[lo]].sort_values("start")
        starts, ends, rows = (part[c].to_numpy() for c in ("start", "end", "_row"))
        stack: list[int] = []
        i = 0
        for corr, t in zip(calls.index.to_numpy(), calls["start"].to_numpy()):
            while i < len(starts) and starts[i] <= t:
                while stack and ends[stack[-1]] < starts[i]:
                    stack.pop()
                stack.append(i)
                i += 1
            while stack and ends[stack[-1]] < t:
                stack.pop()
            if stack:
                op_of_corr[int(corr)] = int(rows[stack[-1]])
    corr = k["correlation"].to_numpy()
    for j, c in enumerate(corr):
        if c == c:  # not NaN
            out[j] = op_of_corr.get(int(c), -1)
    return out


def kernel_op_precisions(trace: Trace) -> dict[str, str]:
    """Kernel name -> the precision of the inputs of the ops that launched it (the most common, where they differ);
    names whose launching ops recorded no types are left out."""

    def compute() -> dict[str, str]:
        if trace.ops.empty or "dtypes" not in trace.ops or trace.ops["dtypes"].isna().all():
            return {}
        rows = launching_ops(trace)
        precisions = [precision_of_types(t) for t in trace.ops["dtypes"]]
        votes: dict[str, Counter] = {}
        for name, row in zip(trace.kernels["name"], rows):
            if row >= 0 and precisions[row]:
                votes.setdefault(str(name), Counter())[precisions[row]] += 1
        return {name: c.most_common(1)[0][0] for name, c in votes.items()}

    return trace.memo("launching_ops.precisions", compute)
