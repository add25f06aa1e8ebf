"""Nsight Compute: no binary, the counters' permission, no kernel profiled, a failed replay, a
failed or stopped run, and the cell's own error in the ``--ncu`` subprocess."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import GpuMagicError, tail
from .nsys import CellError
from .tools import ToolFailed, ToolNotFound, ToolTimedOut


class NcuError(GpuMagicError, RuntimeError):
    """Something about an Nsight Compute (ncu) run; the message says what happened and what to
    do."""


class NcuNotFoundError(ToolNotFound, NcuError):
    """No ncu binary (:class:`ToolNotFound`)."""

    tool, setting, product = "ncu", "ncu_path", "Nsight Compute"
    install = (
        "It comes with the CUDA toolkit (/usr/local/cuda/bin/ncu), NVIDIA's PyTorch containers and "
        "https://developer.nvidia.com/nsight-compute; install it where this kernel runs"
    )


class NcuPermissionError(NcuError):
    """ncu may not read the GPU's performance counters (``ERR_NVGPUCTRPERM``): ``output`` is ncu's
    text."""

    output: str
    template = (
        "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): the driver restricts "
        "them to administrators. Fix, one of: run as root; allow all users (a file in "
        "/etc/modprobe.d/ with `options nvidia NVreg_RestrictProfilingToAdminUsers=0`, then "
        "reload the driver or reboot); in a container, start it with `--cap-add SYS_ADMIN`. See "
        "https://developer.nvidia.com/ERR_NVGPUCTRPERM. ncu said:\n{output_tail}"
    )

    def __init__(self, output: str) -> None:
        super().__init__(output=output)

    def extra_fields(self) -> dict[str, Any]:
        return {"output_tail": tail(self.output, 6)}


class NoKernelsProfiledError(NcuError):
    """ncu profiled no kernel: ``kernel_filter`` (the ``--kernel-name`` given, or None), ``label``
    (the NVTX range) and ``output`` (ncu's text)."""

    output: str
    kernel_filter: str | None
    label: str | None
    template = (
        "No kernels were profiled: {why} Check the kernel filter (ncu's --kernel-name syntax: a "
        "name, or regex:PATTERN), and that the cell launches CUDA kernels when it runs (not only "
        "in warm-up). ncu said:\n{output_tail}"
    )

    def __init__(
        self, output: str, kernel_filter: str | None = None, label: str | None = None
    ) -> None:
        super().__init__(output=output, kernel_filter=kernel_filter, label=label)

    def extra_fields(self) -> dict[str, Any]:
        if self.kernel_filter:
            why = (
                f"no kernel inside the NVTX range {self.label!r} matched the filter "
                f"{self.kernel_filter!r}."
            )
        else:
            why = f"no kernel ran inside the NVTX range {self.label!r}."
        return {"why": why, "output_tail": tail(self.output, 8)}


class NcuReplayError(NcuError):
    """ncu could not replay a kernel to collect its counters: ``output`` (ncu's text), ``files`` it
    left."""

    output: str
    files: list[str]
    template = (
        "ncu could not profile a kernel (its replay failed). Kernel replay saves and restores the "
        "memory a kernel writes, once per pass: try application replay (the whole cell re-run per "
        'pass), with --ncu-args "--replay-mode application", fewer sections, or a narrower kernel '
        "filter. ncu said:\n{output_tail}{files_line}"
    )

    def __init__(self, output: str, files: Sequence[str] = ()) -> None:
        super().__init__(output=output, files=list(files))

    def extra_fields(self) -> dict[str, Any]:
        return {
            "output_tail": tail(self.output, 10),
            "files_line": f"\nFiles kept: {', '.join(self.files)}" if self.files else "",
        }


class NcuFailedError(ToolFailed, NcuError):
    """ncu exited non-zero (:class:`ToolFailed`)."""

    tool = "ncu"


class NcuTimeoutError(ToolTimedOut, NcuError):
    """The ncu run did not finish in time (:class:`ToolTimedOut`)."""

    tool = "ncu"
    advice = (
        "Raise the limit with --timeout S, or profile fewer kernels (--top K, --kernels REGEX) or "
        "fewer sections."
    )


class NcuCellError(CellError):
    """The cell raised in the ``--ncu`` subprocess; ``traceback`` is its traceback text."""

    template = "The cell raised in the ncu subprocess: {last}\n\n{traceback}"
