"""The work one call of a statement does: FLOPs, bytes moved, the precision in use, and the memory it needs.

A time per call says how long; it takes the work to say how fast. :func:`count_work` runs the statement once more,
outside any timed window, under one ``TorchDispatchMode`` that sees every ATen op it runs:

- FLOPs of matmuls, convolutions and attention (SDPA, the CPU flash kernel included) come from PyTorch's own
  formulas, the ones ``torch.utils.flop_counter.FlopCounterMode`` uses (an op without one that decomposes is counted
  as its parts, as there); elementwise ops, reductions and softmax count no FLOPs, which is right for a roofline
  (their cost is the bytes they move). FlopCounterMode itself is not used: like any mode torch wraps, its first use
  imports ``torch._dynamo`` (1-5 s), which this mode leaves out where the process has not imported it.
- The same mode sees every ATen op the call runs and sums the bytes of its tensor inputs (read) and outputs
  (written), each tensor once per op, views and fresh allocations left out. That is the traffic the ops need if each
  reads its inputs and writes its outputs exactly once: a **lower bound** on the memory traffic of those kernels
  (a tiled GEMM re-reads its operands), not a measurement of DRAM traffic. Data small enough to stay in L2 across
  back-to-back calls may never reach DRAM, so for a working set well under the L2 size the GB/s figure can exceed
  the DRAM bandwidth; Nsight Compute (``--ncu``) measures the real traffic.

The dtype of each FLOP-counted op picks the peak it is compared against: fp32 runs on the FFMA units unless TF32 is
allowed for that op (``torch.backends.cuda.matmul.allow_tf32`` / ``torch.set_float32_matmul_precision`` for
matmuls, ``torch.backends.cudnn.allow_tf32`` for convolutions), bf16/fp16 and fp8 on the tensor cores.

Peak memory is ``torch.cuda.max_memory_allocated`` after ``torch.cuda.reset_peak_memory_stats`` around the call,
less what was allocated before it: the extra memory one call needs at its peak. Resetting the allocator's peak
counter is the one visible effect on the process (``max_memory_allocated`` then reads the peak since this call).

Counting never raises into the timer: a statement that fails under the modes (a custom op without a fake kernel,
a compiled region that refuses a dispatch mode) gives a :class:`Work` whose figures are None and whose ``note``
says why. The statement's value is dropped; the user's namespace is not touched beyond what the statement itself
does when it runs (it has already run many times while being timed).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["Work", "count_work", "precision_class", "tf32_enabled"]

#: dtype name -> precision class, the key of a peak in the peaks table (``gpumagic.device_peaks``).
_CLASS_OF_DTYPE = {
    "float64": "fp64",
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "float8_e4m3fnuz": "fp8",
    "float8_e5m2fnuz": "fp8",
    "float8_e8m0fnu": "fp8",
    "float4_e2m1fn_x2": "fp4",
    "int8": "int8",
}

#: Ops that allocate or relabel memory without reading or writing it: no traffic of their own.
_NO_TRAFFIC = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "_unsafe_view",
    "_reshape_alias",
    "lift_fresh",
    "set_",
    "resize_",
    "_local_scalar_dense",
    "record_stream",
}


def tf32_enabled(kind: str = "matmul") -> bool:
    """Whether fp32 ``kind`` ops ("matmul" or "conv") may run in TF32 on tensor cores under the current settings.

    Reads the newer per-backend ``fp32_precision`` where it is set ("tf32" or "ieee"), else the older switches
    (``allow_tf32``, which ``torch.set_float32_matmul_precision('high')`` turns on for matmuls). The environment
    variable ``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1`` (set in NVIDIA's PyTorch containers) makes every fp32 cuBLAS
    GEMM TF32 whatever the switches say.
    """
    import torch

    backend = torch.backends.cuda.matmul if kind == "matmul" else torch.backends.cudnn
    sub = backend if kind == "matmul" else getattr(backend, "conv", backend)
    if kind == "matmul" and os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE") == "1":
        return True  # NVIDIA's PyTorch containers set it: every fp32 cuBLAS GEMM runs in TF32, whatever the switches
    precision = getattr(sub, "fp32_precision", None)
    if precision == "tf32":
        return True
    if precision == "ieee":
        return False
    with warnings.catch_warnings():  # the old switch is deprecated in favour of fp32_precision in newer PyTorch
        warnings.simplefilter("ignore")
        if kind == "matmul":
            return bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"
        return bool(torch.backends.cudnn.allow_tf32)


def precision_class(dtype: str, device_type: str = "cuda", op_kind: str = "matmul", tf32: bool = False) -> str | None:
    """The peak a FLOP-counted op of ``dtype`` is held against: fp64, fp32 (FFMA), tf32, bf16, fp16, fp8, fp4, int8.

    ``dtype`` is a torch dtype's name without ``torch.`` ("float32"). fp32 is "tf32" only on CUDA with TF32
    allowed for that kind of op (``tf32``); other dtypes map one to one; None for a dtype with no peak.
    """
    cls = _CLASS_OF_DTYPE.get(dtype.removeprefix("torch."))
    if cls == "fp32" and device_type == "cuda" and tf32 and op_kind in ("matmul", "conv"):
        return "tf32"
    return cls


@dataclass(frozen=True)
class Work:
    """What one call of a statement does. Figures are per call; None where they could not be counted.

    ``flops``: FLOPs counted by ``FlopCounterMode`` (matmul, conv, attention; 0 when the call runs none).
    ``bytes``: ``bytes_read + bytes_written``, each tensor once per op: a lower bound on memory traffic.
    ``dtype``: the dtype of most of the FLOPs (of most of the bytes when there are none), e.g. "bfloat16".
    ``precision_class``: the peak that applies: "fp32" (FFMA), "tf32", "bf16", "fp16", "fp8", "fp64", ...
    ``flops_by_precision``: the FLOPs split by precision class, when a call mixes them.
    ``peak_memory``: bytes allocated at the call's peak above what was allocated before it (None on the CPU).
    ``device_type``: "cuda" or "cpu", where the ops ran. ``ops``: ATen ops seen. ``note``: why a figure is missing,
    or what to keep in mind ("" when there is nothing to say).
    """

    flops: int | None = None
    bytes: int | None = None
    bytes_read: int | None = None
    bytes_written: int | None = None
    dtype: str | None = None
    precision_class: str | None = None
    flops_by_precision: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    peak_memory: int | None = None
    device_type: str | None = None
    ops: int = 0
    note: str = ""

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with a plain dict where the read-only view is (a mappingproxy does not pickle): a result that
        holds a Work saves, and ships to a subprocess, like any other value."""
        return {**self.__dict__, "flops_by_precision": dict(self.flops_by_precision)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, flops_by_precision=MappingProxyType(dict(state["flops_by_precision"])))

    @property
    def counted(self) -> bool:
        return self.flops is not None and self.bytes is not None

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOPs per byte (None without bytes)."""
        if not self.counted or not self.bytes:
            return None
        return self.flops / self.bytes

    def summary(self) -> dict[str, Any]:
        return {
            "flops": self.flops,
            "bytes": self.bytes,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "dtype": self.dtype,
            "precision_class": self.precision_class,
            "peak_memory": self.peak_memory,
            "device_type": self.device_type,
            "ops": self.ops,
            "note": self.note,
        }


def _footprint(t: Any) -> int:
    """Bytes a tensor's elements occupy: an expanded (stride-0) tensor reads its storage once, not once per view."""
    n = t.numel()
    if n == 0:
        return 0
    try:
        span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()) if s > 0)
    except (RuntimeError, TypeError):  # sparse or other layouts without strides
        span = n
    return min(n, span) * t.element_size()


def _tensors(obj: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [x for x in tree_leaves(obj) if isinstance(x, torch.Tensor)]


def _op_kind(name: str) -> str:
    if "conv" in name:
        return "conv"
    if "attention" in name:
        return "attention"
    return "matmul"


def _make_byte_counter(flop_formulas: Mapping[Any, Callable[..., int]]) -> Any:
    """A TorchDispatchMode that sums bytes per op and FLOPs per precision class (built here: torch loads lazily)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _ByteCounter(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # torch wraps a mode's __torch_dispatch__ in "dynamo disabled", which imports torch._dynamo on first
            # use: 1-5 s, the largest part of a first %gputime. Only a process that has imported it can be
            # compiling, so the wrap is kept there and left out elsewhere (decided as each counter is made).
            return "torch._dynamo" in sys.modules

        def __init__(self) -> None:
            super().__init__()
            self.read = 0
            self.written = 0
            self.ops = 0
            self.bytes_by_dtype: dict[str, int] = {}
            self.flops_by_class: dict[str, int] = {}
            self.flops_by_dtype: dict[str, int] = {}
            self.device_types: set[str] = set()
            self.tf32 = {"matmul": tf32_enabled("matmul"), "conv": tf32_enabled("conv")}

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func._overloadpacket not in flop_formulas and not getattr(func, "is_view", False):
                with self:  # an op without a formula that decomposes is counted as its parts (as FlopCounterMode)
                    parts = func.decompose(*args, **kwargs)
                if parts is not NotImplemented:
                    return parts
            out = func(*args, **kwargs)
            name = func._overloadpacket.__name__
            if getattr(func, "is_view", False) or name in _NO_TRAFFIC:
                return out
            ins, outs = _tensors((args, kwargs)), _tensors(out)
            if not ins and not outs:
                return out
            self.ops += 1
            seen: set[tuple[int, int]] = set()
            for group, is_input in ((ins, True), (outs, False)):
                seen_here: set[tuple[int, int]] = set()
                for t in group:
                    key = (t.data_ptr(), _footprint(t)) if t.device.type != "meta" else (id(t), 0)
                    if key in seen_here:
                        continue
                    seen_here.add(key)
                    size = _footprint(t)
                    if is_input:
                        self.read += size
                    else:
                        self.written += size
                    dt = str(t.dtype).removeprefix("torch.")
                    self.bytes_by_dtype[dt] = self.bytes_by_dtype.get(dt, 0) + size
                    self.device_types.add(t.device.type)
                seen |= seen_here
            formula = flop_formulas.get(func._overloadpacket)
            if formula is not None and ins:
                try:
                    flops = int(formula(*args, **kwargs, out_val=out))
                except Exception:  # noqa: BLE001 - a formula that cannot read these arguments counts nothing
                    flops = 0
                a = ins[0]
                dt = str(a.dtype).removeprefix("torch.")
                kind = _op_kind(name)
                cls = precision_class(dt, a.device.type, kind, self.tf32.get(kind, False)) or dt
                self.flops_by_class[cls] = self.flops_by_class.get(cls, 0) + flops
                self.flops_by_dtype[dt] = self.flops_by_dtype.get(dt, 0) + flops
            return out

    return _ByteCounter()


def _flop_formulas() -> dict[Any, Callable[..., int]]:
    """PyTorch's FLOP formulas (``torch.utils.flop_counter``), also taught the CPU flash-attention kernels SDPA
    dispatches to on the CPU."""
    import torch
    from torch.utils import flop_counter as fc

    formulas = dict(fc.flop_registry)
    aten = torch.ops.aten
    for op, formula in (
        ("_scaled_dot_product_flash_attention_for_cpu", fc.sdpa_flop),
        ("_scaled_dot_product_flash_attention_for_cpu_backward", fc.sdpa_backward_flop),
        ("_scaled_dot_product_fused_attention_overrideable", fc.sdpa_flop),
    ):
        packet = getattr(aten, op, None)
        if packet is not None and packet not in formulas:
            formulas[packet] = formula  # registered formulas come shape-wrapped: called as the registry's are
    return formulas


def _cuda_peak_begin() -> int | None:
    import torch

    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    return before


def _cuda_peak_end(before: int | None) -> int | None:
    import torch

    if before is None:
        return None
    torch.cuda.synchronize()
    return max(0, torch.cuda.max_memory_allocated() - before)


def _dominant(counts: Mapping[str, int]) -> str | None:
    return max(counts, key=lambda k: counts[k]) if counts and any(counts.values()) else None


def count_work(call: Callable[[], Any]) -> Work:
    """Run ``call()`` once under the FLOP and byte counters and return the :class:`Work` of that one call.

    ``call`` is what the timer runs once (``CompiledStatement.once``). Never raises for a failing statement or a
    counter that cannot run it: the :class:`Work` then has None figures and a ``note`` that says why
    (``KeyboardInterrupt`` still propagates). Peak memory is taken on the current CUDA device when CUDA is
    initialised and the call ran CUDA ops; None on the CPU.
    """
    try:
        import torch  # noqa: F401 - the counters need it; a missing torch is a reason, not an error
    except ImportError:
        return Work(note="work not counted: PyTorch is not installed")
    try:
        byte_mode = _make_byte_counter(_flop_formulas())
    except Exception as exc:  # noqa: BLE001 - a PyTorch without these modes: say so
        return Work(note=f"work not counted: this PyTorch cannot count it ({_reason(exc)})")
    before = _cuda_peak_begin()
    try:
        with byte_mode:
            value = call()
            del value
    except Exception as exc:  # noqa: BLE001 - never into the timer
        peak = _peak_without_modes(call)
        return Work(
            peak_memory=peak,
            note=f"FLOPs and bytes not counted: the statement raised under the counters ({_reason(exc)})",
        )
    peak = _cuda_peak_end(before)
    device_type = "cuda" if "cuda" in byte_mode.device_types else ("cpu" if byte_mode.device_types else None)
    if device_type != "cuda":
        peak = None
    by_class = dict(byte_mode.flops_by_class)
    total = sum(by_class.values())
    dtype = _dominant(byte_mode.flops_by_dtype) if total else _dominant(byte_mode.bytes_by_dtype)
    cls = _dominant(by_class) if total else (precision_class(dtype) if dtype else None)
    note = ""
    if byte_mode.ops == 0:
        note = (
            "no tensor operations seen: work that runs outside PyTorch's dispatcher (a CUDA graph replay, a custom "
            "or compiled kernel) is not counted"
        )
    elif len([v for v in by_class.values() if v]) > 1:
        parts = ", ".join(f"{k} {v / total:.0%}" for k, v in sorted(by_class.items(), key=lambda kv: -kv[1]) if v)
        note = f"FLOPs in several precisions ({parts}): shares are against the {cls} peak"
    return Work(
        flops=total,
        bytes=byte_mode.read + byte_mode.written,
        bytes_read=byte_mode.read,
        bytes_written=byte_mode.written,
        dtype=dtype,
        precision_class=cls,
        flops_by_precision=MappingProxyType({k: v for k, v in by_class.items() if v}),
        peak_memory=peak,
        device_type=device_type,
        ops=byte_mode.ops,
        note=note,
    )


def _peak_without_modes(call: Callable[[], Any]) -> int | None:
    """Peak memory from a plain call, for a statement the counters could not run; None if that fails too."""
    try:
        before = _cuda_peak_begin()
        if before is None:
            return None
        value = call()
        del value
        return _cuda_peak_end(before)
    except Exception:  # noqa: BLE001 - the first failure's reason is the one reported
        return None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
