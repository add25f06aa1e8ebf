"""From a row of a profile to a measured fix: :func:`replay` re-creates the op that launched a
kernel row's work, with the shapes and types torch.profiler recorded, and times it as ``%gputime``
does; with ``compare=True`` it times, interleaved, the alternatives a user would try for that op.

Why the op and not the kernel: a kernel cannot be launched alone, but its launching op (the
innermost torch op around its launch) can, on fresh tensors of the recorded shapes and types: the
same library picks the same kernel for the same problem, so the replay's time is the row's time
measured with ``%gputime``'s care (warm-up, device events, repeats until stable). Only the tensor
arguments are recorded, not scalars or strides, so an op is replayed where its tensors alone say
what it does: GEMMs and elementwise ops; an op that needs a dim, a size or a scalar it did not
record (softmax, reductions, views) is refused with its reason, never replayed wrongly.

The alternatives, per kind: an fp32 GEMM against itself with TF32 and in bf16; a bf16 or fp16
GEMM against the other half precision; an elementwise op in fp32 against bf16. Each alternative's
flags are set around its own call and put back (the user's TF32 setting is left as found).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import numpy as np

from ..analysis.op_rates import GEMMS, parse_shapes
from ..edges import TorchValue
from ..trace import Trace
from ..trace.launching_ops import PRECISION_OF_TYPE, launching_ops

if TYPE_CHECKING:
    from ..render.report import ProfileReport
    from ..timing import TimingResult
    from ..timing.compare_result import Comparison

__all__ = ["REPLAYABLE", "ReplayError", "replay", "replayed_op"]

#: Elementwise ops whose tensors alone say what they do.
_UNARY_BINARY = "add sub mul div add_ sub_ mul_ div_ relu gelu silu sigmoid tanh exp neg abs"
_ELEMENTWISE = {f"aten::{n}" for n in _UNARY_BINARY.split()}
REPLAYABLE = GEMMS - {"aten::_scaled_mm"} | _ELEMENTWISE
_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64"}


class ReplayError(ValueError):
    """A row that cannot be replayed: the reason and what to do."""


def replayed_op(trace: Trace, row: int | str) -> dict[str, Any]:
    """The op a kernel row's work came from: the launching op (name, shapes, types) that launched
    most of that kernel's time. ``row``: the row's place in ``trace.kernel_summary()`` (0: the
    heaviest) or the kernel's name."""
    table = trace.kernel_summary()
    if isinstance(row, str):
        name = row
    elif 0 <= int(row) < len(table):
        name = str(table["Name"].iloc[int(row)])
    else:
        raise ReplayError(f"row {row!r} is not in the kernel table (it has {len(table)} rows)")
    kernels = trace.kernels
    mine = np.flatnonzero(kernels["name"].astype(str).to_numpy() == name)
    if not len(mine):
        raise ReplayError(f"no kernel named {name!r} in this profile")
    ops = trace.ops
    if ops.empty or "shapes" not in ops:
        raise ReplayError(
            "this profile recorded no op shapes: profile with %%gpuprofile (it records them), or "
            "torch.profiler.profile(record_shapes=True)"
        )
    launched = launching_ops(trace)[mine]
    dur = (kernels["end"] - kernels["start"]).to_numpy()[mine]
    held = launched >= 0
    if not held.any():
        raise ReplayError(f"no torch op launched {name!r} in this profile (a library's own work)")
    keys = [
        (str(ops["name"].iat[i]), str(ops["shapes"].iat[i]), str(ops["dtypes"].iat[i]))
        for i in launched[held]
    ]
    weight: dict[tuple[str, str, str], float] = {}
    for key, d in zip(keys, dur[held]):
        weight[key] = weight.get(key, 0.0) + float(d)
    op, shapes, types = max(weight, key=lambda k: weight[k])
    calls = int(held.sum())
    return {
        "kernel": name,
        "op": op,
        "shapes": shapes,
        "types": types,
        "kernel_ns": float(dur[held].sum()) / calls,
        "calls": calls,
    }


def _inputs(op: dict[str, Any], device: str, precision: str | None = None) -> list[Any]:
    import torch

    sizes = [s for s in (parse_shapes(op["shapes"]) or []) if s]
    kinds = [PRECISION_OF_TYPE.get(t.strip()) for t in op["types"].split(",")]
    if not sizes or len(kinds) < len(sizes) or not all(kinds[: len(sizes)]):
        raise ReplayError(f"{op['op']}: its inputs' shapes and types are not all recorded")
    out = []
    for size, kind in zip(sizes, kinds):
        dtype = getattr(torch, _DTYPES.get(precision or kind or "", "float32"))
        out.append(torch.randn(size, device=device, dtype=dtype))
    return out


def _statements(op: dict[str, Any], device: str, compare: bool) -> dict[str, Callable[[], Any]]:
    import torch

    name = op["op"]
    if name not in REPLAYABLE:
        raise ReplayError(
            f"{name} cannot be replayed from this profile: it needs arguments the profiler does "
            "not record (a dim, a size, a scalar); replay a GEMM or elementwise row, or time the "
            "line with %gputime"
        )
    fn = getattr(torch.ops.aten, name.split("::", 1)[1])
    recorded = PRECISION_OF_TYPE.get(op["types"].split(",")[0].strip())
    args = _inputs(op, device)
    out: dict[str, Callable[[], Any]] = {f"as recorded ({recorded})": lambda: fn(*args)}
    if not compare:
        return out
    gemm = name in GEMMS
    if gemm and recorded == "fp32":
        out["tf32"] = _with_tf32(lambda: fn(*args))
        half = _inputs(op, device, "bf16")
        out["bf16"] = lambda: fn(*half)
    elif gemm and recorded in ("bf16", "fp16"):
        other = "fp16" if recorded == "bf16" else "bf16"
        half = _inputs(op, device, other)
        out[other] = lambda: fn(*half)
    elif recorded == "fp32":
        half = _inputs(op, device, "bf16")
        out["bf16"] = lambda: fn(*half)
    return out


def _with_tf32(call: Callable[[], TorchValue]) -> Callable[[], TorchValue]:
    """``call`` with TF32 matmuls allowed around it, the setting put back after each call."""
    import torch

    flags = torch.backends.cuda.matmul

    def run() -> TorchValue:
        before = flags.allow_tf32
        flags.allow_tf32 = True
        try:
            return call()
        finally:
            flags.allow_tf32 = before

    return run


@overload
def replay(
    report: ProfileReport | Trace,
    row: int | str = 0,
    *,
    compare: Literal[False] = False,
    **options: Any,
) -> TimingResult: ...


@overload
def replay(
    report: ProfileReport | Trace, row: int | str = 0, *, compare: Literal[True], **options: Any
) -> Comparison: ...


@overload
def replay(
    report: ProfileReport | Trace, row: int | str = 0, *, compare: bool, **options: Any
) -> TimingResult | Comparison: ...


def replay(
    report: ProfileReport | Trace, row: int | str = 0, *, compare: bool = False, **options: Any
) -> TimingResult | Comparison:  # options: TimingOptions fields
    """Re-create the op behind kernel row ``row`` of ``report`` (a ProfileReport or a Trace;
    ``row``: its place in the kernel table, 0 the heaviest, or the kernel's name) and time it as
    ``%gputime`` does: a :class:`~gpumagic.timing.TimingResult` whose notes say what was replayed
    and the row's own time per call; with ``compare=True`` a
    :class:`~gpumagic.timing.compare_result.Comparison` of the alternatives (module doc).
    ``options``: :class:`~gpumagic.timing.TimingOptions` fields. Raises :class:`ReplayError` for
    a row that cannot be replayed, with the reason."""
    import torch

    from ..timing import gputime
    from ..timing.compare import compare as compare_statements
    from ..units import format_ns

    trace = cast("Trace", getattr(report, "trace", report))  # a report's trace, or the trace
    op = replayed_op(trace, row)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    stmts = _statements(op, device, compare)
    said = (
        f"replayed {op['op']} ({op['shapes']}; {op['types']}), the op behind {op['kernel'][:80]}: "
        f"the row's own kernel time {format_ns(op['kernel_ns'])} per call over {op['calls']} calls"
    )
    if not compare:
        result = gputime(next(iter(stmts.values())), globals={}, **options)
        result.notes.append(said)
        return result
    found = compare_statements(stmts, globals={}, **options)
    for result in found.results.values():
        result.notes.append(said)
    return found
