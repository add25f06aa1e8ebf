"""The counters behind :func:`gpumagic.timing.work.count_work`: what each op and each call reads and
writes.

Two modes watch one call of a statement. A ``TorchDispatchMode`` sees every ATen op it runs: the
bytes of each op's tensor inputs (read) and outputs (written), each tensor once per op, and the
FLOPs of matmuls, convolutions and attention (PyTorch's formulas; fused attention through
:mod:`.attention_work`). A ``TorchFunctionMode`` sees only the statement's outermost torch calls
(inside a mode's handler the mode is off): their inputs and outputs once each, the traffic of each
call as one kernel, which is what ran where a composite op has a fused GPU kernel.

The dtype of each FLOP-counted op picks the peak it is compared against: fp32 runs on the FFMA units
unless TF32 is allowed for that op (``torch.backends.cuda.matmul.allow_tf32`` /
``torch.set_float32_matmul_precision`` for matmuls, ``torch.backends.cudnn.allow_tf32`` for
convolutions), bf16/fp16 and fp8 on the tensor cores.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from ..edges import TorchValue
from .attention_work import AttentionCount

__all__ = [
    "flop_formulas",
    "make_byte_counter",
    "make_call_counter",
    "precision_class",
    "tf32_enabled",
]

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
    """Whether fp32 ``kind`` ops ("matmul" or "conv") may run in TF32 on tensor cores under the
    current settings.

    Reads the newer per-backend ``fp32_precision`` where it is set ("tf32" or "ieee"), else the
    older switches (``allow_tf32``, which ``torch.set_float32_matmul_precision('high')`` turns on
    for matmuls). The environment variable ``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1`` (set in NVIDIA's
    PyTorch containers) makes every fp32 cuBLAS GEMM TF32 whatever the switches say.
    """
    import torch

    backend = torch.backends.cuda.matmul if kind == "matmul" else torch.backends.cudnn
    sub = backend if kind == "matmul" else getattr(backend, "conv", backend)
    if kind == "matmul" and os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE") == "1":
        # NVIDIA's PyTorch containers set it: every fp32 cuBLAS GEMM runs in TF32, whatever the
        # switches
        return True
    precision = getattr(sub, "fp32_precision", None)
    if precision == "tf32":
        return True
    if precision == "ieee":
        return False
    with (
        warnings.catch_warnings()
    ):  # the old switch is deprecated in favour of fp32_precision in newer PyTorch
        warnings.simplefilter("ignore")
        if kind == "matmul":
            return (
                bool(torch.backends.cuda.matmul.allow_tf32)
                or torch.get_float32_matmul_precision() != "highest"
            )
        return bool(torch.backends.cudnn.allow_tf32)


def precision_class(
    dtype: str, device_type: str = "cuda", op_kind: str = "matmul", tf32: bool = False
) -> str | None:
    """The peak a FLOP-counted op of ``dtype`` is held against: fp64, fp32 (FFMA), tf32, bf16, fp16,
    fp8, fp4, int8.

    ``dtype`` is a torch dtype's name without ``torch.`` ("float32"). fp32 is "tf32" only on CUDA
    with TF32 allowed for that kind of op (``tf32``); other dtypes map one to one; None for a dtype
    with no peak.
    """
    cls = _CLASS_OF_DTYPE.get(dtype.removeprefix("torch."))
    if cls == "fp32" and device_type == "cuda" and tf32 and op_kind in ("matmul", "conv"):
        return "tf32"
    return cls


def _footprint(t: TorchValue) -> int:  # a torch tensor
    """Bytes a tensor's elements occupy: an expanded (stride-0) tensor reads its storage once, not
    once per view."""
    n = t.numel()
    if n == 0:
        return 0
    try:
        span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()) if s > 0)
    except (RuntimeError, TypeError):  # sparse or other layouts without strides
        span = n
    return int(min(n, span) * t.element_size())


def _tensors(obj: TorchValue) -> list[TorchValue]:  # torch values in, torch tensors out
    import torch
    from torch.utils._pytree import tree_leaves

    return [x for x in tree_leaves(obj) if isinstance(x, torch.Tensor)]


def _op_kind(name: str) -> str:
    if "conv" in name:
        return "conv"
    if "attention" in name:
        return "attention"
    return "matmul"


def _traffic(
    ins: list[TorchValue], outs: list[TorchValue]
) -> tuple[int, int, dict[str, int], set[str]]:  # torch tensors
    """(bytes read, bytes written, bytes by dtype, device types) of one op: each distinct tensor
    once per side."""
    read = written = 0
    by_dtype: dict[str, int] = {}
    devices: set[str] = set()
    for group, is_input in ((ins, True), (outs, False)):
        seen: set[tuple[int, int]] = set()
        for t in group:
            size = _footprint(t)
            key = (t.data_ptr(), size) if t.device.type != "meta" else (id(t), 0)
            if key in seen:
                continue
            seen.add(key)
            if is_input:
                read += size
            else:
                written += size
            dt = str(t.dtype).removeprefix("torch.")
            by_dtype[dt] = by_dtype.get(dt, 0) + size
            devices.add(t.device.type)
    return read, written, by_dtype, devices


class ByteTally:
    """The sums of the byte counter: bytes read and written, ops, bytes and FLOPs by dtype and by
    precision class, the attention ops' counts. Kept apart from the dispatch mode, which can only be
    built once torch is imported (:func:`make_byte_counter`), so that the sums are plain typed
    attributes that :func:`~.work.count_work` reads."""

    def __init__(self) -> None:
        super().__init__()  # first in the mode's bases: the torch mode's own set-up runs next
        self.read = 0
        self.written = 0
        self.ops = 0
        self.bytes_by_dtype: dict[str, int] = {}
        self.flops_by_class: dict[str, int] = {}
        self.flops_by_dtype: dict[str, int] = {}
        self.device_types: set[str] = set()
        self.tf32 = {"matmul": tf32_enabled("matmul"), "conv": tf32_enabled("conv")}
        self.attention: list[AttentionCount] = []  # one per attention op

    def _add(self, ins: list[TorchValue], outs: list[TorchValue]) -> None:  # torch tensors
        read, written, by_dtype, devices = _traffic(ins, outs)
        self.ops += 1
        self.read += read
        self.written += written
        for dt, size in by_dtype.items():
            self.bytes_by_dtype[dt] = self.bytes_by_dtype.get(dt, 0) + size
        self.device_types |= devices

    def _add_flops(self, flops: int, a: TorchValue, kind: str) -> None:  # the op's first tensor
        dt = str(a.dtype).removeprefix("torch.")
        cls = precision_class(dt, a.device.type, kind, self.tf32.get(kind, False)) or dt
        self.flops_by_class[cls] = self.flops_by_class.get(cls, 0) + flops
        self.flops_by_dtype[dt] = self.flops_by_dtype.get(dt, 0) + flops


def make_byte_counter(flop_formulas: Mapping[TorchValue, Callable[..., int]]) -> TorchValue:
    """A TorchDispatchMode that sums bytes per op and FLOPs per precision class (built here: torch
    loads lazily). Its sums are those of :class:`ByteTally`.

    The keys are torch op packets, and the mode is a torch class made on first use.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    from .attention_work import attention_count, bind

    class _ByteCounter(ByteTally, TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # torch wraps a mode's __torch_dispatch__ in "dynamo disabled", which imports
            # torch._dynamo on first use: 1-5 s, the largest part of a first %gputime. Only a
            # process that has imported it can be compiling, so the wrap is kept there and left out
            # elsewhere (decided as each counter is made).
            return "torch._dynamo" in sys.modules

        def __torch_dispatch__(
            self,
            func: TorchValue,
            types: tuple[type, ...],
            args: tuple[TorchValue, ...] = (),
            kwargs: dict[str, TorchValue] | None = None,
        ) -> TorchValue:  # torch's op, its arguments and its result
            kwargs = kwargs or {}
            if func._overloadpacket not in flop_formulas and not getattr(func, "is_view", False):
                # an op without a formula that decomposes is counted as its parts (as
                # FlopCounterMode)
                with self:
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
            self._add(ins, outs)
            counted = (
                attention_count(name, bind(func._schema, args, kwargs))
                if "attention" in name
                else None
            )
            if counted is not None and ins:
                self.attention.append(counted)
                self._add_flops(counted.flops, ins[0], "attention")
                return out
            formula = flop_formulas.get(func._overloadpacket)
            if formula is not None and ins:
                try:
                    flops = int(formula(*args, **kwargs, out_val=out))
                except Exception:  # noqa: BLE001 - a formula that cannot read these arguments counts nothing
                    flops = 0
                self._add_flops(flops, ins[0], _op_kind(name))
            return out

    return _ByteCounter()


#: Calls that read no tensor's elements: attribute reads, shape queries.
_SHAPE_ONLY = {
    "__get__",
    "dim",
    "size",
    "stride",
    "numel",
    "shape",
    "data_ptr",
    "is_contiguous",
    "element_size",
}


class CallTally:
    """The sums of the call counter (:func:`make_call_counter`), apart from its torch mode as
    :class:`ByteTally` is: the calls that moved data, their bytes, their names in order."""

    def __init__(self) -> None:
        super().__init__()  # as in ByteTally
        self.calls = 0
        self.bytes = 0
        self.names: list[str] = []


def make_call_counter() -> TorchValue:
    """A TorchFunctionMode that counts the statement's outermost torch calls at their own level:
    each call's inputs read once and its outputs written once, the traffic of the call as one
    kernel. (Inside a mode's handler the mode is off, so only the outermost calls are seen:
    ``F.rms_norm``, not the ops it is made of.) A torch class made on first use."""
    from torch.overrides import TorchFunctionMode

    class _CallCounter(CallTally, TorchFunctionMode):
        def __torch_function__(
            self,
            func: TorchValue,
            types: tuple[type, ...],
            args: tuple[TorchValue, ...] = (),
            kwargs: dict[str, TorchValue] | None = None,
        ) -> TorchValue:  # torch's function, its arguments and its result
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = getattr(func, "__name__", str(func))
            if name in _SHAPE_ONLY:
                return out
            try:
                ins, outs = _tensors((args, kwargs)), _tensors(out)
                in_place = name.endswith("_") and not name.startswith("_")
                ids = {id(t) for t in ins}
                storages = {t.untyped_storage().data_ptr() for t in ins if t.device.type != "meta"}
                fresh = [
                    t
                    for t in outs
                    if (in_place and id(t) in ids)
                    or (
                        id(t) not in ids
                        and (
                            t.device.type == "meta"
                            or t.untyped_storage().data_ptr() not in storages
                        )
                    )
                ]
            except (
                RuntimeError,
                TypeError,
                NotImplementedError,
            ):  # a tensor subclass without storage: not counted
                return out
            if not fresh:  # a view, a tensor handed back as it was: no traffic of its own
                return out
            read, written, _, _ = _traffic(ins, fresh)
            self.calls += 1
            self.bytes += read + written
            if name not in self.names:
                self.names.append(name)
            return out

    return _CallCounter()


def _int_mm_ops(
    a: TorchValue, b: TorchValue, *args: Any, out_val: TorchValue = None, **kwargs: Any
) -> int:  # the op's torch arguments, as the registry passes them
    """``torch._int_mm``: an int8 GEMM's 2*M*N*K integer ops (counted as its precision's
    "FLOPs")."""
    return 2 * int(a.shape[0]) * int(a.shape[1]) * int(b.shape[1])


def flop_formulas() -> dict[TorchValue, Callable[..., int]]:  # keys: torch op packets
    """PyTorch's FLOP formulas (``torch.utils.flop_counter``), also taught the CPU flash-attention
    kernels SDPA dispatches to on the CPU, and the int8 GEMM ``torch._int_mm`` (its integer ops,
    held against the int8 peak)."""
    import torch
    from torch.utils import flop_counter as fc

    formulas = dict(fc.flop_registry)
    aten = torch.ops.aten
    for op, formula in (
        ("_scaled_dot_product_flash_attention_for_cpu", fc.sdpa_flop),
        ("_scaled_dot_product_flash_attention_for_cpu_backward", fc.sdpa_backward_flop),
        ("_scaled_dot_product_fused_attention_overrideable", fc.sdpa_flop),
        ("_int_mm", _int_mm_ops),
    ):
        packet = getattr(aten, op, None)
        if packet is not None and packet not in formulas:
            formulas[packet] = (
                formula  # registered formulas come shape-wrapped: called as the registry's are
            )
    return formulas
