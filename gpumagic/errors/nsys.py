"""Nsight Systems: its run (no binary, a failed or stopped run, no report, the cell's own error),
its SQLite export, and several ranks under ``--nproc N``."""

from __future__ import annotations

from typing import Any

from .base import GpuMagicError, Hint, tail
from .tools import ToolFailed, ToolNotFound, ToolTimedOut


class NsysError(GpuMagicError, RuntimeError):
    """Something about an nsys run; the message says what happened and what to do."""


class NsysNotFoundError(ToolNotFound, NsysError):
    """No nsys binary (:class:`ToolNotFound`)."""

    tool, setting, product = "nsys", "nsys_path", "Nsight Systems"
    install = (
        "Install Nsight Systems in the same container as this kernel (NVIDIA's PyTorch containers "
        "ship it)"
    )


class NsysFailedError(ToolFailed, NsysError):
    """nsys exited non-zero (:class:`ToolFailed`)."""

    tool = "nsys"


class NoReportError(NsysError):
    """nsys wrote no report: ``output`` (its text); ``stem`` when it finished without writing the
    files."""

    output: str
    stem: str | None

    def __init__(self, output: str, stem: str | None = None) -> None:
        super().__init__(output=output, stem=stem)

    def message_template(self) -> str:
        if self.stem:
            return (
                "nsys finished but wrote neither {stem}.nsys-rep nor .sqlite. It said:\n"
                "{output_tail}"
            )
        return (
            "nsys generated no report: the capture range (the NVTX range around the cell) never "
            "opened. Check that the cell ran (an exception in warm-up?) and that NVTX is traced "
            "(-t must include nvtx); nsys said:\n{output_tail}"
        )

    def extra_fields(self) -> dict[str, Any]:
        return {"output_tail": tail(self.output)}


class NewerReportError(NsysError):
    """The report was written by a newer nsys than the one exporting it: ``output`` (nsys' text)."""

    output: str
    template = (
        "The report was written by a newer Nsight Systems than the nsys exporting it. Export with "
        "the nsys that recorded it (gpumagic uses one binary for both: check {hint}).\n"
        "{output_tail}"
    )

    def __init__(self, output: str) -> None:
        super().__init__(hints=[Hint("nsys_path", "'/path/to/nsys'")], output=output)

    def extra_fields(self) -> dict[str, Any]:
        return {"output_tail": tail(self.output), "hint": self.hints[0].script()}


class NsysTimeoutError(ToolTimedOut, NsysError):
    """The nsys run did not finish in time (:class:`ToolTimedOut`)."""

    tool, advice = "nsys", "Raise the limit with --timeout S, or profile less work."


class CellError(NsysError):
    """The cell raised in the subprocess; ``traceback`` is its traceback text."""

    traceback: str
    template = "The cell raised in the nsys subprocess: {last}\n\n{traceback}"

    def __init__(self, traceback: str) -> None:
        super().__init__(traceback=traceback)

    def extra_fields(self) -> dict[str, Any]:
        text = self.traceback.strip()
        return {"last": text.splitlines()[-1] if text else "error"}


class NsysExportError(GpuMagicError, ValueError):
    """A file is not an nsys SQLite export gpumagic can read: ``path`` and ``reason`` (which says
    what to do)."""

    template = "{path}: {reason}"


class ExportFormatError(NsysExportError):
    """The export's schema is not one gpumagic reads: ``path``, ``schema``, ``nsys_version``,
    ``supported``."""

    template = (
        "{path}: export schema {schema} (nsys {nsys_version}); gpumagic reads schema "
        "{supported}.x. Export with an nsys whose schema is {supported}.x."
    )


class NoCudaDataError(NsysExportError):
    """The report holds no CUDA trace data: ``path``."""

    template = (
        "{path} does not contain CUDA trace data. Either the program ran no CUDA work, or nsys "
        "traced it from outside its container (a host nsys wrapping `docker run` sees only the OS "
        "layer): run nsys inside the container that runs the CUDA process, with -t cuda."
    )


class TorchrunMissingError(NsysError):
    """The ranks cannot run in ``python``: torch or torch.distributed is missing there
    (``reason``: what the rank said)."""

    template = (
        "--nproc runs the cell's ranks in `{python}`, which has no torch.distributed ({reason}). "
        "Install a PyTorch with torch.distributed in that Python (the pytorch.org wheels have it)."
    )


class NotEnoughGpusError(NsysError):
    """``nproc`` ranks need one GPU each; ``where`` (this process, or a rank) sees ``available``."""

    template = (
        "--nproc {nproc} runs one rank per GPU, but {where} sees {available} GPU(s) "
        "(CUDA_VISIBLE_DEVICES={visible}). Use --nproc {available} or fewer, or make more GPUs "
        "visible."
    )


class RankError(CellError):
    """Rank ``rank`` of ``world_size`` raised (the launcher stopped the others); ``traceback`` is
    its traceback."""

    template = "Rank {rank} of {world_size} raised in the nsys subprocess: {last}\n\n{traceback}"

    def __init__(self, traceback: str, rank: int = 0, world_size: int = 1) -> None:
        NsysError.__init__(self, traceback=traceback, rank=rank, world_size=world_size)
