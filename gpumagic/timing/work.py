"""The work one call of a statement does: FLOPs, bytes moved, the precision in use, and the memory
it needs.

A time per call says how long; it takes the work to say how fast. :func:`count_work` runs the
statement once more, outside any timed window, under one ``TorchDispatchMode`` that sees every ATen
op it runs:

- FLOPs of matmuls, convolutions and attention (SDPA, the CPU flash kernel included) come from
  PyTorch's own formulas, the ones ``torch.utils.flop_counter.FlopCounterMode`` uses (an op without
  one that decomposes is counted as its parts, as there); elementwise ops, reductions and softmax
  count no FLOPs, which is right for a roofline (their cost is the bytes they move). FlopCounterMode
  itself is not used: like any mode torch wraps, its first use imports ``torch._dynamo`` (1-5 s),
  which this mode leaves out where the process has not imported it.
- The same mode sees every ATen op the call runs and sums the bytes of its tensor inputs (read) and
  outputs (written), each tensor once per op, views and fresh allocations left out. That is the
  traffic the ops need if each reads its inputs and writes its outputs exactly once: a **lower
  bound** on the memory traffic of those kernels (a tiled GEMM re-reads its operands), not a
  measurement of DRAM traffic. Data small enough to stay in L2 across back-to-back calls may never
  reach DRAM, so for a working set well under the L2 size the GB/s figure can exceed the DRAM
  bandwidth; Nsight Compute (``--ncu``) measures the real traffic.

The dtype of each FLOP-counted op picks the peak it is compared against: fp32 runs on the FFMA units
unless TF32 is allowed for that op (``torch.backends.cuda.matmul.allow_tf32`` /
``torch.set_float32_matmul_precision`` for matmuls, ``torch.backends.cudnn.allow_tf32`` for
convolutions), bf16/fp16 and fp8 on the tensor cores.

A second mode, a ``TorchFunctionMode``, sees the statement's outermost torch calls and counts each
call's inputs and outputs once: where the kernel pass saw far fewer kernels per call than ATen ops
were counted (a composite op such as ``F.rms_norm`` whose GPU path is one fused kernel),
:func:`reconcile` takes those bytes instead. Attention FLOPs count the (query, key) pairs the kernel
computes (causal, masks, windows, GQA: :mod:`.attention_work`). A rate above its peak is never
printed (``gpumagic.device_peaks.achieved.OVER_PEAK``).

Peak memory is the extra memory one call needs at its peak above what was allocated before it,
measured by :func:`~.peak_memory.call_peak` without resetting the user's own counters
(``max_memory_allocated`` reads after a ``%gputime`` what it read before, where the call stayed
under the earlier peak).

Compiled code (``torch.compile``) is never run under the modes: dynamo would skip its frame for good
and the user's model would run eager from then on. :func:`~.compiled_calls.outside_dynamo` sets
dynamo aside for the one call, so the compiled code and its caches are not touched, and counts each
compiled call's bytes at its own level (its inputs, parameters and outputs), as its fused kernels
move them.

Counting never raises into the timer: a statement that fails under the modes (a custom op without a
fake kernel) gives a :class:`Work` whose figures are None and whose ``note`` says why. The
statement's value is dropped; the user's namespace is not touched beyond what the statement itself
does when it runs (it has already run many times while being timed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from .attention_work import AttentionCount
from .compiled_calls import CompiledCalls, DynamoCannotStandAside, outside_dynamo
from .peak_memory import CallPeak, call_peak
from .work_counters import (
    ByteTally,
    CallTally,
    flop_formulas,
    make_byte_counter,
    make_call_counter,
    precision_class,
    tf32_enabled,
)

__all__ = ["Work", "count_work", "precision_class", "reconcile", "tf32_enabled"]

#: More ATen ops counted than kernels ran by at least this factor (and by :data:`EXCESS_OPS` ops)
#: means the counter saw a decomposition that did not run: a composite op (``F.rms_norm``) whose GPU
#: path is one fused kernel.
EXCESS_FACTOR = 2
EXCESS_OPS = 3


@dataclass(frozen=True)
class Work:
    """What one call of a statement does. Figures are per call; None where they could not be
    counted.

    ``flops``: FLOPs counted by ``FlopCounterMode`` (matmul, conv, attention; 0 when the call runs
    none). ``bytes``: ``bytes_read + bytes_written``, each tensor once per op: a lower bound on
    memory traffic. ``dtype``: the dtype of most of the FLOPs (of most of the bytes when there are
    none), e.g. "bfloat16". ``precision_class``: the peak that applies: "fp32" (FFMA), "tf32",
    "bf16", "fp16", "fp8", "fp64", ... ``flops_by_precision``: the FLOPs split by precision class,
    when a call mixes them. ``peak_memory``: bytes allocated at the call's peak above what was
    allocated before it (None on the CPU). ``device_type``: "cuda" or "cpu", where the ops ran.
    ``ops``: ATen ops seen. ``note``: why a figure is missing, or what to keep in mind ("" when
    there is nothing to say).
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
    #: the outermost torch calls the statement made (``F.rms_norm``, ``torch.matmul``, a tensor
    #: method) that read or wrote tensors, and the bytes counted at that level: each call's inputs
    #: once, its outputs once
    calls: int = 0
    call_bytes: int | None = None
    call_names: tuple[str, ...] = ()
    #: "ops" (every ATen op's inputs and outputs) or "calls" (the user's calls: see
    #: :func:`reconcile`)
    counted_at: str = "ops"

    def __getstate__(self) -> dict[str, object]:
        """Pickled with a plain dict where the read-only view is (a mappingproxy does not pickle): a
        result that holds a Work saves, and ships to a subprocess, like any other value."""
        return {**self.__dict__, "flops_by_precision": dict(self.flops_by_precision)}

    def __setstate__(self, state: dict[str, Any]) -> None:  # Any: what pickle hands back
        self.__dict__.update(
            state, flops_by_precision=MappingProxyType(dict(state["flops_by_precision"]))
        )

    @property
    def counted(self) -> bool:
        return self.flops is not None and self.bytes is not None

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOPs per byte (None without bytes)."""
        if self.flops is None or not self.bytes:
            return None
        return self.flops / self.bytes

    def summary(self) -> dict[str, Any]:  # Any: figures of several types, for JSON
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
            "calls": self.calls,
            "counted_at": self.counted_at,
            "note": self.note,
        }


def _dominant(counts: Mapping[str, int]) -> str | None:
    return max(counts, key=lambda k: counts[k]) if counts and any(counts.values()) else None


def count_work(call: Callable[[], object], kernels_per_call: float | None = None) -> Work:
    """Run ``call()`` once under the FLOP and byte counters and return the :class:`Work` of that one
    call.

    ``call`` is what the timer runs once (``CompiledStatement.once``). Never raises for a failing
    statement or a counter that cannot run it: the :class:`Work` then has None figures and a
    ``note`` that says why (``KeyboardInterrupt`` still propagates). Peak memory is taken on the
    current CUDA device when CUDA is initialised and the call ran CUDA ops; None on the CPU.
    ``kernels_per_call`` (the kernel pass's count, where there was one) lets :func:`reconcile`
    notice a decomposition that did not run.
    """
    try:
        import torch  # noqa: F401 - the counters need it; a missing torch is a reason, not an error
    except ImportError:
        return Work(note="work not counted: PyTorch is not installed")
    try:
        byte_mode = make_byte_counter(flop_formulas())
        call_mode = make_call_counter()
    except Exception as exc:  # noqa: BLE001 - a PyTorch without these modes: say so
        return Work(note=f"work not counted: this PyTorch cannot count it ({_reason(exc)})")
    try:
        with (
            call_peak() as measured,
            outside_dynamo(lambda: (byte_mode.read, byte_mode.written)) as compiled,
            byte_mode,
            call_mode,
        ):
            value = call()
            del value
    except DynamoCannotStandAside as exc:
        return Work(peak_memory=_peak_without_modes(call), note=str(exc))
    except Exception as exc:  # noqa: BLE001 - never into the timer
        return Work(
            peak_memory=_peak_without_modes(call),
            note=f"FLOPs and bytes not counted: the statement raised under the counters "
            f"({_reason(exc)})",
        )
    work = _counted_work(byte_mode, call_mode, compiled, measured)
    if compiled.calls:
        return _at_compiled_calls(work, byte_mode, compiled)
    return reconcile(work, kernels_per_call)


def _counted_work(
    byte_mode: ByteTally, call_mode: CallTally, compiled: CompiledCalls, measured: CallPeak
) -> Work:
    """What the counters summed over the call, as a :class:`Work` counted at the ATen ops, with
    the notes that qualify it; its bytes before a compiled call or a fused kernel recounts them."""
    device_types = byte_mode.device_types
    device_type = "cuda" if "cuda" in device_types else ("cpu" if device_types else None)
    peak = measured.bytes if device_type == "cuda" else None
    by_class = dict(byte_mode.flops_by_class)
    total = sum(by_class.values())
    dtype = _dominant(byte_mode.flops_by_dtype) if total else _dominant(byte_mode.bytes_by_dtype)
    cls = _dominant(by_class) if total else (precision_class(dtype) if dtype else None)
    notes = _counting_notes(byte_mode, compiled, cls)
    if device_type == "cuda" and peak is None and measured.note:
        notes.append(measured.note)
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
        note="; ".join(notes),
        calls=call_mode.calls,
        call_bytes=call_mode.bytes,
        call_names=tuple(call_mode.names),
    )


def _counting_notes(byte_mode: ByteTally, compiled: CompiledCalls, cls: str | None) -> list[str]:
    """What to keep in mind about the counts: compiled calls counted at their level, or no tensor
    op seen, or FLOPs in several precisions (``cls`` the one the shares are against); then what
    the attention FLOPs assume."""
    notes = []
    by_class = byte_mode.flops_by_class
    if compiled.calls:
        notes.append(_compiled_note(compiled))
    elif byte_mode.ops == 0:
        notes.append(
            "no tensor operations seen: work that runs outside PyTorch's dispatcher (a CUDA "
            "graph replay, a custom "
            "or compiled kernel) is not counted"
        )
    elif len([v for v in by_class.values() if v]) > 1:
        total = sum(by_class.values())
        parts = ", ".join(
            f"{k} {v / total:.0%}" for k, v in sorted(by_class.items(), key=lambda kv: -kv[1]) if v
        )
        notes.append(f"FLOPs in several precisions ({parts}): shares are against the {cls} peak")
    attention = _attention_note(byte_mode.attention)
    if attention:
        notes.append(attention)
    return notes


def _at_compiled_calls(work: Work, byte_mode: ByteTally, compiled: CompiledCalls) -> Work:
    """The bytes of a statement that calls torch.compile'd code: the eager ops outside the
    compiled calls as counted, the compiled calls at their own level (their inputs, parameters
    and outputs)."""
    read = byte_mode.read - compiled.inside[0] + compiled.bytes_read
    written = byte_mode.written - compiled.inside[1] + compiled.bytes_written
    return replace(
        work,
        bytes=read + written,
        bytes_read=read,
        bytes_written=written,
        counted_at="compiled calls",
    )


def _compiled_note(compiled: CompiledCalls) -> str:
    """How the work of a statement that calls torch.compile'd code was counted, in the line's
    notes."""
    names = sorted(set(compiled.names))
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return (
        f"work of the compiled call{'s' if compiled.calls != 1 else ''} ({shown}) counted at "
        f"its level: bytes are its "
        "inputs, parameters and outputs, read or written once as its fused kernels move "
        "them; FLOPs from its matmuls, "
        "convolutions and attention, run once from source with torch.compile standing aside "
        "(its compiled code and "
        "caches are not touched)"
    )


def _attention_note(counts: list[AttentionCount]) -> str:
    """What a line's attention FLOPs are, in words: "" for dense attention without GQA (the formula
    as printed)."""
    if not counts:
        return ""
    parts = []
    hows = sorted({c.how for c in counts if c.how != "dense"})
    for how in hows:
        kept = [c.kept for c in counts if c.how == how]
        if how.startswith("dense ("):
            parts.append(
                "attention FLOPs assume dense attention: the mask's sparsity could not be read"
            )
        else:
            parts.append(
                f"attention counted over the (query, key) pairs its kernel computes ({how}: "
                f"{min(kept):.1%} of all pairs)"
                if len(set(kept)) == 1
                else f"attention counted over the (query, key) pairs its kernels compute ({how}: "
                f"{min(kept):.1%}-{max(kept):.1%} of all pairs)"
            )
    groups = sorted({c.gqa for c in counts if c.gqa > 1})
    if groups:
        parts.append(
            f"grouped-query attention counted per query head ({'/'.join(map(str, groups))} "
            f"per key head)"
        )
    return "; ".join(parts)


def reconcile(work: Work, kernels_per_call: float | None) -> Work:
    """The same work counted at the level of the user's calls where the ATen ops counted cannot be
    what ran.

    The dispatch mode sees the ops PyTorch dispatches *under the mode*. For a composite op with a
    fused GPU kernel that can be its decomposition: ``F.rms_norm`` on bf16 8192x4096 showed 8 ops
    and 7-10x the bytes of its input and output, while the GPU ran one kernel that read and wrote
    each once ("454% of HBM bandwidth"). Where the kernel pass saw far fewer kernels per call than
    ops were counted (:data:`EXCESS_FACTOR` times, and :data:`EXCESS_OPS` more) and no more calls
    than kernels, the bytes are the calls' own (each call's inputs read once, its outputs written
    once) and the note says so. FLOPs stay as counted: a decomposition does the same math as the
    fused kernel.
    """
    if (
        kernels_per_call is None
        or kernels_per_call <= 0
        or work.bytes is None
        or not work.call_bytes
        or not work.calls
        or work.call_bytes >= work.bytes
    ):
        return work
    kernels = kernels_per_call
    if work.ops < max(EXCESS_FACTOR * kernels, kernels + EXCESS_OPS) or work.calls > math.ceil(
        kernels
    ):
        return work
    names = ", ".join(work.call_names[:3]) + (", ..." if len(work.call_names) > 3 else "")
    why = (
        f"bytes counted at the level of the call ({names}: inputs read once, outputs written "
        f"once): the GPU ran "
        f"{kernels:.3g} kernel{'s' if kernels != 1 else ''} per call, not the {work.ops} ops "
        f"of the decomposition "
        "PyTorch showed the counter"
    )
    note = "; ".join(n for n in (work.note, why) if n)
    return replace(
        work,
        bytes=work.call_bytes,
        bytes_read=None,
        bytes_written=None,
        counted_at="calls",
        note=note,
    )


def _peak_without_modes(call: Callable[[], object]) -> int | None:
    """Peak memory from a plain call, for a statement the counters could not run; None if that fails
    too."""
    try:
        with call_peak() as measured:
            value = call()
            del value
        return measured.bytes
    except Exception:  # noqa: BLE001 - the first failure's reason is the one reported
        return None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
