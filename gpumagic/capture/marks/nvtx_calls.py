"""NVTX push and pop, and a device synchronization, as every capture that runs under nsys needs
them: torch's binding where torch has CUDA (what the user's own ranges use), else the ``nvtx``
package (a CPU torch's ``torch.cuda.nvtx`` raises "NVTX functions not installed"; nsys still
records the package's ranges). One definition for the runner, the warm child, the in-place kernel
and the by-code ranges."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

__all__ = ["push_pop", "synchronize"]


@cache
def push_pop() -> tuple[Callable[[str], Any], Callable[[], Any]]:
    """(push, pop) of NVTX ranges on the calling thread."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    except Exception:  # noqa: BLE001 - torch missing or broken: the nvtx package still labels the range
        pass
    import nvtx

    return (lambda msg: nvtx.push_range(msg)), (lambda: nvtx.pop_range())


def synchronize() -> Callable[[], None]:
    """The device's synchronization where torch has CUDA; a no-op elsewhere."""
    try:
        import torch
    except ImportError:
        return lambda: None
    return torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
