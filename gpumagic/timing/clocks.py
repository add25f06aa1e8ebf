"""Which clock times a statement: CUDA events where its work runs on a GPU, the host clock
otherwise.

Why decide from the namespace: the statement's tensors (and modules) say where its work runs before
anything is run, so a CPU statement on a GPU host is timed on the host clock instead of reading as
"0 % GPU busy". When the namespace says nothing (``torch.randn(...)`` built inside the statement),
the first call's value settles it (:func:`confirm_clock`). torch is optional here: without it every
statement is timed on the host clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any

from ..edges import TorchValue
from .options import TimingOptions
from .samplers import CudaSampler, HostSampler, Sampler

__all__ = ["choose_sampler", "confirm_clock", "tensor_devices"]


def _torch() -> Any | None:  # Any: the torch module, where it is installed
    try:
        import torch
    except ImportError:
        return None
    return torch


def tensor_devices(values: Iterable[object], depth: int = 2) -> set[str]:
    """Device types ('cuda', 'cpu', ...) of the tensors and modules among ``values`` (and one level
    inside lists, tuples and dicts). Used to decide whether a statement runs on the GPU."""
    torch = _torch()
    if torch is None:
        return set()
    found: set[str] = set()

    def visit(v: object, d: int) -> None:
        if isinstance(v, torch.Tensor):
            found.add(v.device.type)
        elif isinstance(v, torch.nn.Module):
            for p in v.parameters():
                found.add(p.device.type)
                break
            else:
                for b in v.buffers():
                    found.add(b.device.type)
                    break
        elif d > 0 and isinstance(v, (list, tuple)):
            for item in v[:16]:
                visit(item, d - 1)
        elif d > 0 and isinstance(v, dict):
            for item in list(v.values())[:16]:
                visit(item, d - 1)

    for value in values:
        visit(value, depth)
    return found


def _cuda_device_of(torch: ModuleType, values: Iterable[object]) -> TorchValue:
    """The device of the first CUDA tensor or module among ``values``; else the current CUDA
    device."""
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_cuda:
            return v.device
        if isinstance(v, torch.nn.Module):
            for p in v.parameters():
                if p.is_cuda:
                    return p.device
    return torch.device("cuda", torch.cuda.current_device())


def choose_sampler(
    options: TimingOptions, namespace_values: Sequence[object]
) -> tuple[Sampler, list[str]]:
    """The clock for this statement, and notes that explain a host-clock choice."""
    torch = _torch()
    if options.cpu:
        return HostSampler("--cpu"), []
    if torch is None:
        return HostSampler("PyTorch is not installed"), [
            "PyTorch is not installed: timed on the host clock."
        ]
    if not torch.cuda.is_available():
        return HostSampler("CUDA is not available"), []
    devices = tensor_devices(namespace_values)
    if devices and "cuda" not in devices:
        return HostSampler("the statement's tensors are on the CPU"), [
            "The statement's tensors are on the CPU: timed on the host clock (move them with "
            ".cuda() to time the GPU)."
        ]
    device = _cuda_device_of(torch, namespace_values)
    return CudaSampler(device, options.flush_l2, options.graph), []


def confirm_clock(
    sampler: Sampler, value: object, namespace_values: Sequence[object], options: TimingOptions
) -> tuple[Sampler, list[str]]:
    """After the first call: the clock to keep, and a note when it changed.

    A device clock chosen because nothing in the namespace said where the statement runs is swapped
    for its host fallback when the statement returned CPU tensors only: it is a CPU statement, and
    CUDA events around it would time an idle GPU.
    """
    if options.cpu or not sampler.on_device:
        return sampler, []
    devices = tensor_devices([value])
    if devices and "cuda" not in devices and not tensor_devices(namespace_values):
        fallback = sampler.host_fallback("the statement returns CPU tensors")
        if fallback is not None:
            return fallback, ["The statement returns CPU tensors: timed on the host clock."]
    return sampler, []
