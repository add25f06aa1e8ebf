"""What the kernels are: fp32 GEMMs on CUDA cores, compatibility kernels for an older SM,
device-to-device copies, and which kernels hold the time."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..trace import Trace
from ..trace.device_caps import compute_capability, has_tensor_cores, has_tf32, is_amd
from .communication import LIST_RANKS
from .finding import Finding, KernelFacts, kernel_facts, kernel_labels, pct, t
from .rank_kernels import kernel_ranks, waits_by_rank, work_durations
from .ranks import is_multi

__all__ = ["compat_kernels", "copies", "ffma_gemms", "top_kernels"]

_GEMM_LIKE = ("gemm", "conv_fprop", "conv_dgrad", "conv_wgrad")
#: The share of kernel time below which a kind of kernel gets no finding (nor a remedy): 8 µs of
#: fp32 GEMM in a 10 ms cell is not worth a precision switch.
KERNEL_SHARE = 0.05
#: The tensor-core instruction family of each SM: Ampere's mma.sync serves sm80 to sm89 (cuBLAS and
#: cuDNN ship sm80 kernels for Ada and the sm86 GPUs), Hopper has wgmma, Blackwell tcgen05. An sm80
#: kernel on an sm89 GPU is its native family, not a fallback; on an sm90 GPU it is.
_FAMILY = {70: 70, 72: 70, 75: 75, 80: 80, 86: 80, 87: 80, 88: 80, 89: 80, 90: 90}
_FAMILY.update({100: 100, 101: 100, 103: 100, 110: 100, 120: 80, 121: 80})
_FAMILY_NAME = {75: "Turing's", 80: "Ampere's mma.sync", 90: "Hopper's wgmma", 100: "tcgen05"}
_TF32_ADVICE = (
    "torch.backends.cuda.matmul.allow_tf32 = True (or "
    "torch.set_float32_matmul_precision('high')) lets them use "
    "TF32 tensor cores."
)


_AMD_ADVICE = (
    "bf16 or fp16 autocast (torch.autocast('cuda', dtype=torch.bfloat16)) runs GEMMs on the "
    "GPU's matrix cores (MFMA)."
)


def _fp32_advice(trace: Trace) -> str | None:
    """What to do about fp32 GEMMs on CUDA cores on this GPU: TF32 where it has TF32 (compute
    capability 8.0 and newer); fp16 autocast where it has tensor cores but no TF32 (a V100, 7.0; an
    RTX 2080 Ti, 7.5); conditional where the capability is not known; None where no switch helps (no
    tensor cores, as a GP100's 6.0; an AMD GPU, where PyTorch's TF32 switches are not the ones that
    apply): there the finding is not made."""
    meta = trace.meta
    if is_amd(meta):  # PyTorch's TF32 switches are NVIDIA's; AMD's matrix cores take bf16 and fp16
        return _AMD_ADVICE
    tf32 = has_tf32(meta)
    if tf32:
        return _TF32_ADVICE
    if tf32 is None:
        return "On a GPU of compute capability 8.0 or newer (Ampere and later), " + _TF32_ADVICE
    cc = compute_capability(meta)
    if cc is not None and has_tensor_cores(meta):
        return (
            f"This {meta.get('device') or 'GPU'} (compute capability {cc[0]}.{cc[1]}) has no "
            f"TF32; fp16 autocast "
            "(torch.autocast('cuda', dtype=torch.float16)) runs GEMMs on its tensor cores."
        )
    return None


def _waits_left_out(trace: Trace, ranks: list[str]) -> str:
    """How the per-rank shares of ``ranks`` treat NCCL waiting, where they waited ("" where not)."""
    per = [
        f"{label} {t(ns)}"
        for label, ns in waits_by_rank(trace).items()
        if label in ranks and ns > 0
    ]
    if not per:
        return ""
    return (
        f" (time NCCL kernels spent waiting for other ranks is not work and is left out: "
        f"{', '.join(per)})"
    )


def _ffma_per_rank(trace: Trace, facts: KernelFacts, ffma: np.ndarray) -> list[Finding]:
    places, labels = kernel_ranks(trace)
    work = work_durations(trace)
    parts: list[str] = []
    numbers: dict[str, list[Any]] = {"ranks": [], "ffma_ns": [], "share": []}
    for i, label in enumerate(labels):
        mine = places == i
        hit = ffma & mine
        if not hit.any():
            continue
        ns, total = int(facts.durations[hit].sum()), max(int(work[mine].sum()), 1)
        if ns < KERNEL_SHARE * total:
            continue
        examples = "; ".join(
            f"{name} {pct(v / total)}" for name, v in facts.ns_by_label(hit).nlargest(2).items()
        )
        parts.append(f"{label}: {t(ns)}, {pct(ns / total)} of its kernel time ({examples})")
        numbers["ranks"].append(label)
        numbers["ffma_ns"].append(ns)
        numbers["share"].append(ns / total)
    if not parts:
        return []
    if len(parts) > LIST_RANKS:
        parts = [*parts[:3], f"… {len(parts) - 3} more ranks"]
    msg = (
        f"{_off_matrix_units(trace)}, on {len(numbers['ranks'])} of {len(labels)} ranks: "
        f"{'; '.join(parts)}{_waits_left_out(trace, numbers['ranks'][:LIST_RANKS])}. "
        f"{_fp32_advice(trace)}"
    )
    return [Finding("ffma_gemm", "warn", msg, numbers)]


def _off_matrix_units(trace: Trace) -> str:
    """Where the fp32 GEMMs ran, in the GPU maker's words."""
    if is_amd(trace.meta):
        return "fp32 GEMMs run on the vector ALUs, not matrix cores (no MFMA in their kernels)"
    return "fp32 GEMMs run on CUDA cores (FFMA/SIMT), not tensor cores"


def ffma_gemms(trace: Trace) -> list[Finding]:
    """fp32 GEMMs and convolutions on the FFMA/SIMT path, where TF32 (or, without TF32, fp16) would
    use tensor cores; nothing on a GPU where no switch would (``_fp32_advice``)."""
    if trace.kernels.empty or _fp32_advice(trace) is None:
        return []
    facts = kernel_facts(trace)
    ffma = facts.where(
        lambda d: d.op in _GEMM_LIKE and d.tensor_cores is False and d.precision == "fp32"
    )
    if not ffma.any():
        return []
    if is_multi(trace):
        return _ffma_per_rank(trace, facts, ffma)
    t_ffma = int(facts.durations[ffma].sum())
    if t_ffma < KERNEL_SHARE * facts.total_ns:
        return []
    by_name = facts.ns_by_label(ffma)
    examples = "; ".join(
        f"{name} {pct(ns / facts.total_ns)}" for name, ns in by_name.nlargest(2).items()
    )
    return [
        Finding(
            "ffma_gemm",
            "warn",
            f"{_off_matrix_units(trace)}: {t(t_ffma)}, "
            f"{pct(t_ffma / facts.total_ns)} of kernel time ({examples}). {_fp32_advice(trace)}",
            {"ffma_ns": t_ffma, "share": t_ffma / facts.total_ns},
        )
    ]


def _sm_num(sm: str) -> int:
    digits = "".join(ch for ch in sm if ch.isdigit())
    return int(digits) if digits else 0


def _family(sm: int) -> int | None:
    """The tensor-core instruction family of SM ``sm`` (:data:`_FAMILY`); None where not known."""
    return _FAMILY.get(sm)


def compat_kernels(trace: Trace) -> list[Finding]:
    """Tensor-core kernels of an older instruction family than the device's (an sm80 kernel on an
    sm90 GPU: a Hopper variant with its newer instructions exists), taking at least
    :data:`KERNEL_SHARE` of kernel time. The SM in a name is the instruction family the library
    built it for: an sm80 or sm86 kernel that cuBLAS or cuDNN chose for an Ada or Ampere GPU is its
    native kind, and nothing is said."""
    cc = compute_capability(trace.meta)  # None on an AMD GPU: its gfx numbers are not SM numbers
    if trace.kernels.empty or cc is None:
        return []
    dev_sm = cc[0] * 10 + cc[1]
    device_family = _family(dev_sm)
    if device_family is None:
        return []
    facts = kernel_facts(trace)
    older = facts.where(
        lambda d: (
            d.arch is not None
            and d.family in ("cublas_xmma", "cublas_legacy", "cutlass2", "cudnn")
            and (_family(_sm_num(d.arch)) or device_family) < device_family
            and d.tensor_cores is not False
        )
    )
    t_old = int(facts.durations[older].sum())
    if not older.any() or t_old < KERNEL_SHARE * facts.total_ns:
        return []
    present = np.unique(facts.codes[older])
    archs = sorted({str(facts.decoded[i].arch) for i in present})
    return [
        Finding(
            "compat_kernel",
            "info",
            f"{int(older.sum())} kernel(s) built for an older GPU's tensor-core instructions "
            f"({', '.join(archs)}) ran on this sm{dev_sm} GPU ({t(t_old)}, "
            f"{pct(t_old / facts.total_ns)} of kernel time), which has newer ones "
            f"({_FAMILY_NAME[device_family]}): variants built for them exist, and a newer "
            "cuBLAS/cuDNN (a newer PyTorch build) may choose them.",
            {"ns": t_old},
        )
    ]


def copies(trace: Trace) -> list[Finding]:
    """Device-to-device copies (copy kernels and DtoD memcpys) taking at least 5% of kernel time."""
    if trace.kernels.empty:
        return []
    facts = kernel_facts(trace)
    is_copy = facts.where(lambda d: d.op == "copy")
    memops = trace.memops
    dtod = memops[memops["kind"] == "DtoD"] if not memops.empty else memops
    t_copy = int(facts.durations[is_copy].sum()) + int(
        (dtod["end"] - dtod["start"]).sum() if not dtod.empty else 0
    )
    n_copy = int(is_copy.sum()) + len(dtod)
    recorded = trace.recorded(
        "memops"
    )  # without memory operations, GPU busy time is not known: kernel time is
    busy = max(trace.gpu_busy_ns() if recorded else facts.total_ns, 1)
    if not n_copy or t_copy / busy < 0.05:
        return []
    total = "GPU busy time" if recorded else "kernel time; memory operations were not recorded"
    return [
        Finding(
            "copies",
            "info",
            f"{n_copy} device-to-device copies ({t(t_copy)}, {t_copy / busy:.0%} of {total}): "
            "often .contiguous(), dtype casts or non-contiguous views feeding a GEMM.",
            {"copies": n_copy, "ns": t_copy},
        )
    ]


def top_kernels(trace: Trace, top: int = 3) -> list[Finding]:
    """The ``top`` kernels by total time and their share."""
    if trace.kernels.empty:
        return []
    if is_multi(trace):
        return _top_per_rank(trace, top)
    summ = trace.kernel_summary()
    head = summ.head(top)
    share = head["Time (%)"].sum()
    labels = kernel_labels(trace)
    parts = [f"{labels[n]} {pct(p / 100)}" for n, p in zip(head["Name"], head["Time (%)"])]
    if len(summ) == 1:
        n = int(head["Instances"].iloc[0])
        msg = f"One kernel ran: {labels[head['Name'].iloc[0]]}, {n} time{'s' if n != 1 else ''}."
    elif len(summ) <= top:
        msg = f"The {len(summ)} kernels by share of kernel time: {'; '.join(parts)}."
    else:
        msg = (
            f"Top {len(head)} of {len(summ)} kernels take {share:.0f}% of kernel time: "
            f"{'; '.join(parts)}."
        )
    return [Finding("top_kernels", "info", msg, {"share": share})]


def _top_per_rank(trace: Trace, top: int) -> list[Finding]:
    """Each rank's ``top`` kernels by the time they worked, as shares of that rank's kernel time,
    waits left out."""
    facts = kernel_facts(trace)
    places, labels = kernel_ranks(trace)
    work = work_durations(trace)
    parts, shares = [], {}
    for i, label in enumerate(labels):
        mine = places == i
        if not mine.any():
            continue
        by_label = facts.ns_by_label(mine, work)
        total = max(int(by_label.sum()), 1)
        head = by_label.nlargest(top)
        shares[label] = float(head.sum() / total)
        parts.append(
            f"{label}: " + "; ".join(f"{name} {pct(v / total)}" for name, v in head.items())
        )
    if len(parts) > LIST_RANKS:  # many ranks: the first few (rank order), and how many more
        parts = [*parts[:3], f"… {len(parts) - 3} more ranks (the per-rank kernel table has them)"]
    left_out = _waits_left_out(trace, labels) if len(labels) <= LIST_RANKS else ""
    msg = (
        f"Top kernels per rank, by share of that rank's kernel time{left_out}: {'. '.join(parts)}."
    )
    return [Finding("top_kernels", "info", msg, {"share_by_rank": shares})]
