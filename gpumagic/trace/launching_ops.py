"""Which torch op launched each kernel, and the precision its inputs say the kernel ran in.

A kernel name does not always say its precision: cuDNN's fused attention kernels for bf16 and fp16
share one name ("..._flash_fprop_wgmma_f16_..."), and helper kernels
("cudnn::fusion::compute_dot_do_o_specialized") say none. The op that launched the kernel does:
torch.profiler records each op's input types ("c10::BFloat16") where shapes are recorded. The link
is the one ``summaries.op_summary`` follows (:func:`gpumagic.trace.summaries.launching_op_rows`):
kernel -> launching CUDA API call (by correlation id) -> the innermost op enclosing that call on the
same thread. An nsys export has no torch ops, so there the name is all there is.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from ..kernels.libraries import is_driver_launch
from .coverage import names_passing
from .model import Trace
from .summaries import launching_op_rows

__all__ = [
    "PRECISION_OF_TYPE",
    "kernel_op_precisions",
    "launching_ops",
    "precision_of_types",
]

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


def precision_of_types(types: object) -> str | None:
    """The precision of an op's inputs: the first floating (or int8) type among them
    ("c10::BFloat16, float" -> "bf16"); None where none has one, and where the op recorded no types:
    a missing value (None, or the NaN that pandas 3's string columns hold for it: a training step's
    ``autograd::engine`` ops have no "Input type") is missing, not text."""
    if not isinstance(types, str):
        return None
    for name in types.split(", "):
        found = PRECISION_OF_TYPE.get(name.strip())
        if found:
            return found
    return None


def launching_ops(trace: Trace) -> np.ndarray:
    """Per kernel row, the row of ``trace.ops`` (in its order) of the innermost op that enclosed its
    launch; -1 where there is none (no ops recorded, a launch outside every op, no launch
    record)."""
    return launching_op_rows(trace.ops, trace.kernels, trace.api)


def kernel_op_precisions(trace: Trace) -> dict[str, str]:
    """Kernel name -> the precision of the inputs of the ops that launched it (the most common,
    where they differ); names whose launching ops recorded no types are left out."""

    def compute() -> dict[str, str]:
        if trace.ops.empty or "dtypes" not in trace.ops or trace.ops["dtypes"].isna().all():
            return {}
        rows = launching_ops(trace)
        precisions = [precision_of_types(t) for t in trace.ops["dtypes"]]
        votes: dict[str, Counter[str]] = {}
        for name, row in zip(trace.kernels["name"], rows):
            if row >= 0 and precisions[row]:
                votes.setdefault(str(name), Counter())[precisions[row]] += 1
        return {name: c.most_common(1)[0][0] for name, c in votes.items()}

    return trace.memo("launching_ops.precisions", compute)


def kernel_launch_apis(trace: Trace) -> dict[str, str]:
    """Kernel name -> the driver-API call that launched it (by correlation id), for the kernels a
    driver API launched (the decoder's own test, ``kernels.libraries.is_driver_launch``): the
    decoder reads a bare name launched so as a user ``@triton.jit`` kernel (vLLM's, SGLang's,
    flash-linear-attention's own), which its name alone cannot say."""

    def compute() -> dict[str, str]:
        k, api = trace.kernels, trace.api
        if k.empty or api.empty or "correlation" not in k or "correlation" not in api:
            return {}
        driver = api[names_passing(api["name"], is_driver_launch)]  # asked once per distinct name
        if driver.empty:
            return {}
        by_id = dict(zip(driver["correlation"], driver["name"].astype(str)))
        calls = pd.Series(k["correlation"].to_numpy()).map(by_id)
        hit = calls.notna().to_numpy()
        first = pd.DataFrame({"name": k["name"][hit].astype(str).to_numpy(), "call": calls[hit]})
        first = first.drop_duplicates("name")
        return dict(zip(first["name"], first["call"]))

    return trace.memo("launching_ops.launch_apis", compute)
