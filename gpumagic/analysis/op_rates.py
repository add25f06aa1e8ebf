"""How close to the silicon each row of a profile ran: the work of the torch ops that launched its
kernels, counted from the shapes and types torch.profiler recorded (``record_shapes``), over the
kernels' time, as TFLOP/s or GB/s and a share of the device's peak.

What is counted, per op (the innermost op around each kernel's launch,
``trace.launching_ops``):
- GEMMs (``aten::mm``, ``addmm``, ``bmm``, ``baddbmm``, ``_scaled_mm``): 2·M·N·K FLOPs (times the
  batch), and their operands' and result's bytes; the rate is FLOP/s against the tensor-core (or
  SIMT, for an fp32 kernel without TF32) peak of the precision the kernel's name says, else its
  inputs' type;
- elementwise ops, normalizations, softmax and reductions: the bytes of their tensor inputs and of
  their output (the broadcast shape of the inputs; a reduction's output is not counted), against
  the memory bandwidth: the least traffic the op can make, as ``%gputime`` counts it.
Anything else (convolutions, whose output size needs the strides and padding the trace does not
hold; attention, whose mask it does not say; Inductor's fused kernels; optimizers' multi-tensor
kernels) is left blank, never guessed. An op that launched several kernels shares its work among
them by their time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..device_peaks.table import lookup
from ..kernels import decode
from ..trace import Trace
from ..trace.launching_ops import PRECISION_OF_TYPE, launching_ops
from ..units import format_si

__all__ = ["GEMMS", "code_rates", "kernel_rates", "op_work", "parse_shapes", "rate_text"]

GEMMS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm"}
_ELEMENTWISE = (
    "add add_ sub sub_ mul mul_ div div_ neg exp log sqrt rsqrt pow tanh sigmoid relu relu_ gelu "
    "silu silu_ where clamp clamp_ abs copy_ fill_ zero_ masked_fill masked_fill_ "
    "threshold_backward gelu_backward silu_backward sigmoid_backward tanh_backward "
    "native_layer_norm native_layer_norm_backward _fused_rms_norm _softmax _log_softmax "
    "_softmax_backward_data _log_softmax_backward_data"
)
_BYTES_ONLY = {f"aten::{n}" for n in _ELEMENTWISE.split()}
_REDUCTIONS = {"aten::sum", "aten::mean", "aten::amax", "aten::max", "aten::min", "aten::norm"}
_SIZE = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "fp8e4m3": 1, "fp8e5m2": 1, "int8": 1}
_SHAPE = re.compile(r"\[([0-9,\s]*)\]")


def parse_shapes(text: object) -> list[list[int]] | None:
    """kineto's "[8, 512, 768], [], [768]" as lists of sizes ([] for a scalar or a non-tensor);
    None where the op recorded no shapes."""
    if not isinstance(text, str) or "[" not in text:
        return None
    return [[int(d) for d in m.split(",") if d.strip()] for m in _SHAPE.findall(text)]


def _types(text: object) -> list[str]:
    return [t.strip() for t in text.split(",")] if isinstance(text, str) else []


def _numel(shape: list[int]) -> int:
    return math.prod(shape) if shape else 0


def _broadcast(shapes: list[list[int]]) -> list[int]:
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s[::-1]):
            j = rank - 1 - i
            out[j] = d if out[j] == 1 else out[j]
    return out


def op_work(name: str, shapes: object, types: object) -> tuple[float | None, float | None]:
    """(FLOPs, bytes) one call of op ``name`` does, from its recorded shapes and types (kineto
    lists a type per tensor argument, in order); None for what cannot be counted."""
    sizes = parse_shapes(shapes)
    kinds = _types(types)
    if sizes is None or not kinds:
        return None, None
    tensors = [s for s in sizes if s]
    widths = [_SIZE.get(PRECISION_OF_TYPE.get(t, ""), 0) for t in kinds]
    width = next((w for w in widths if w), 0)
    if not width or not tensors:
        return None, None
    widths = [w or width for w in widths] + [width] * (len(tensors) - len(widths))
    if name in GEMMS:
        a, b = (tensors[1], tensors[2]) if name in ("aten::addmm", "aten::baddbmm") else tensors[:2]
        if len(a) != len(b) or len(a) not in (2, 3) or a[-1] != b[-2]:
            return None, None
        batch = a[0] if len(a) == 3 else 1
        m, k, n = a[-2], a[-1], b[-1]
        moved = (_numel(a) + _numel(b)) * width + batch * m * n * width
        return 2.0 * batch * m * n * k, float(moved)
    read = [_numel(t) * w for t, w in zip(tensors, widths)]
    if name in ("aten::fill_", "aten::zero_"):
        return None, float(read[0])  # written, not read
    if name == "aten::copy_":
        return None, float(sum(read[:2]))  # the source read, the destination written
    if name in _BYTES_ONLY:
        written = read[0] if name.endswith("_") else _numel(_broadcast(tensors)) * width
        return None, float(sum(read) + written)
    if name in _REDUCTIONS:
        return None, float(read[0])
    return None, None


def _peak_class(precision: str) -> str:
    """A decoded precision as the peaks table keys it: every FP8 (plain or MX) is ``fp8``, every
    FP4 (NVFP4, MXFP4) ``fp4``."""
    p = precision.lower()
    if "fp8" in p:
        return "fp8"
    return "fp4" if "fp4" in p else p


def _precision(kernel: str, op_types: object) -> str | None:
    """The peak's precision class: the kernel name's (``tf32``, ``bf16``...), else its inputs'."""
    said = decode(kernel).precision
    if said:
        return _peak_class(said)
    for t in _types(op_types):
        p = PRECISION_OF_TYPE.get(t)
        if p:
            return "fp8" if p.startswith("fp8") else p
    return None


def kernel_rates(trace: Trace) -> pd.DataFrame:
    """Per kernel name: the counted calls, FLOPs and bytes, the time of those calls, the FLOP and
    byte rates, the peak they are set against and the share of it (``flop_share`` for GEMMs,
    ``byte_share`` for the rest). Empty where no op recorded shapes."""
    cols = ["Name", "counted", "flops", "bytes", "time_ns", "flop_rate", "byte_rate"]
    cols += ["precision", "flop_share", "byte_share"]
    return trace.memo("op_rates.kernel_rates", lambda: _kernel_rates(trace, cols))


def kernel_work(trace: Trace) -> pd.DataFrame | None:
    """Per kernel (``trace.kernels``' order): Name, dur (ns), flops and bytes (its launching op's
    share; NaN where uncounted), types (its op's input types); None where no op recorded shapes."""
    return trace.memo("op_rates.kernel_work", lambda: _kernel_work(trace))


def _kernel_work(trace: Trace) -> pd.DataFrame | None:
    kernels, ops = trace.kernels, trace.ops
    if kernels.empty or ops.empty or "shapes" not in ops:
        return None
    launched = launching_ops(trace)
    dur = (kernels["end"] - kernels["start"]).clip(lower=0).to_numpy(dtype="float64")
    held = launched >= 0
    if not held.any():
        return None
    # each launching op's work once, then shared among its kernels by their time, in numpy
    names, shapes = ops["name"].to_numpy(dtype=object), ops["shapes"].to_numpy(dtype=object)
    dtypes = ops["dtypes"].to_numpy(dtype=object) if "dtypes" in ops else [None] * len(ops)
    op_flops, op_bytes = np.full(len(ops), np.nan), np.full(len(ops), np.nan)
    for i in np.unique(launched[held]).tolist():
        f, b = op_work(str(names[i]), shapes[i], dtypes[i])
        op_flops[i] = np.nan if f is None else f
        op_bytes[i] = np.nan if b is None else b
    rows = launched[held]
    op_dur = np.bincount(rows, weights=dur[held], minlength=len(ops))
    share = np.divide(dur[held], op_dur[rows], out=np.zeros(len(rows)), where=op_dur[rows] > 0)
    flops = np.full(len(kernels), np.nan)
    moved = np.full(len(kernels), np.nan)
    flops[held] = op_flops[rows] * share
    moved[held] = op_bytes[rows] * share
    types = np.full(len(kernels), None, dtype=object)
    if "dtypes" in ops:
        types[held] = ops["dtypes"].to_numpy(dtype=object)[launched[held]]
    return pd.DataFrame(
        {"Name": kernels["name"].astype(str).to_numpy(), "dur": dur, "flops": flops}
    ).assign(bytes=moved, types=types)


def _kernel_rates(trace: Trace, cols: list[str]) -> pd.DataFrame:
    frame = kernel_work(trace)
    if frame is None:
        return pd.DataFrame(columns=cols)
    types = dict(zip(frame["Name"][::-1], frame["types"][::-1]))  # each name's first op's
    counted = frame[frame["flops"].notna() | frame["bytes"].notna()]
    if counted.empty:
        return pd.DataFrame(columns=cols)
    peaks = lookup(trace.meta.get("device"))
    rows = []
    for name, g in counted.groupby("Name", sort=False):
        time_ns = float(g["dur"].sum())
        f = float(g["flops"].sum()) if g["flops"].notna().all() else None
        b = float(g["bytes"].sum()) if g["bytes"].notna().all() else None
        precision = _precision(str(name), types.get(name))
        flop_rate = f / time_ns * 1e9 if f and time_ns else None
        byte_rate = b / time_ns * 1e9 if b and time_ns else None
        peak = peaks.peak(precision) if peaks and flop_rate else None
        rows.append(
            {
                "Name": name,
                "counted": len(g),
                "flops": f,
                "bytes": b,
                "time_ns": time_ns,
                "flop_rate": flop_rate,
                "byte_rate": byte_rate,
                "precision": precision,
                "flop_share": flop_rate / peak if flop_rate and peak else None,
                "byte_share": byte_rate / peaks.bandwidth
                if byte_rate and peaks and not flop_rate
                else None,
            }
        )
    return pd.DataFrame(rows, columns=cols)


def code_rates(trace: Trace, by: str = "module") -> pd.DataFrame:
    """Per module (its children's kernels included) or line of the cell, forward and backward
    apart: the counted FLOPs and bytes over all of its kernels' time (what the row achieved, its
    uncounted kernels' time included) and the share of time whose work was counted. Empty where
    no op recorded shapes or the trace holds no module or line information."""
    from ..trace.by_code import attribution, range_names

    first = "Module" if by == "module" else "Line"
    cols = [first, "Pass", "time_ns", "counted_share", "flop_rate", "byte_rate"]
    work = kernel_work(trace)
    attr = attribution(trace, memops=False)
    items = attr.items.reset_index(drop=True)
    if work is None or len(items) != len(work):
        return pd.DataFrame(columns=cols)
    names = range_names(trace) or trace.meta.get("module_names") or {}
    labels: list[Any] = []
    rows: list[int] = []
    for i, (module, line) in enumerate(zip(items["module"], items["line"])):
        if by == "module" and isinstance(module, str):
            parts = module.split(".")
            for j in range(1, len(parts) + 1):
                path = ".".join(parts[:j])
                labels.append(names.get(path, path))
                rows.append(i)
        elif by == "line" and line is not None and line == line:
            labels.append(line)
            rows.append(i)
    if not rows:
        return pd.DataFrame(columns=cols)
    picked = work.iloc[rows].reset_index(drop=True)
    frame = picked.assign(
        key=labels,
        Pass=np.where(items["backward"].to_numpy(dtype=bool)[rows], "backward", "forward"),
        counted=(picked["flops"].notna() | picked["bytes"].notna()).to_numpy(),
    )
    out = []
    for (key, pass_), g in frame.groupby(["key", "Pass"], sort=False):
        time_ns = float(g["dur"].sum())
        f, b = float(g["flops"].sum(min_count=1) or 0), float(g["bytes"].sum(min_count=1) or 0)
        out.append(
            {
                first: key,
                "Pass": pass_,
                "time_ns": time_ns,
                "counted_share": float(g.loc[g["counted"], "dur"].sum()) / time_ns
                if time_ns
                else 0.0,
                "flop_rate": f / time_ns * 1e9 if f and time_ns else None,
                "byte_rate": b / time_ns * 1e9 if b and time_ns else None,
            }
        )
    table = pd.DataFrame(out, columns=cols)
    return table.sort_values("time_ns", ascending=False, ignore_index=True)


def _number(value: float | None) -> float | None:
    return float(value) if value is not None and value == value else None


def rate_text(row: Mapping[str, Any]) -> str:
    """'671 TFLOP/s bf16, 68% of peak' or '4.1 TB/s, 86% of bandwidth' for one row of
    :func:`kernel_rates`; past the peak, as a multiple of it with what that means ('4.4 TB/s, 1.3×
    DRAM bandwidth: part of its data was in the L2 cache'); '' where nothing was counted."""
    flop_rate, byte_rate = _number(row.get("flop_rate")), _number(row.get("byte_rate"))
    if flop_rate:
        text = format_si(flop_rate, "FLOP/s")
        precision = row.get("precision")
        text += f" {precision}" if isinstance(precision, str) else ""
        share = _number(row.get("flop_share"))
        if share and share > 1:  # no share above 100%: a multiple, and what it means
            return text + f", {share:.2g}× the listed peak (a clock above the datasheet's?)"
        return text + (f", {share:.0%} of peak" if share else "")
    if byte_rate:
        share = _number(row.get("byte_share"))
        if share and share > 1:  # counted bytes faster than DRAM moves them: some from the L2
            return format_si(byte_rate, "B/s") + (
                f", {share:.2g}× DRAM bandwidth: part of its data was in the L2 cache"
            )
        return format_si(byte_rate, "B/s") + (f", {share:.0%} of bandwidth" if share else "")
    return ""
