"""Every error gpumagic raises on purpose: one base, fields that say what happened, a message that
says what to do.

A caller catches :class:`GpuMagicError` alone (the magics layer turns it into one red ``UsageError``
line) and can still read the facts an error carries (the path, the command, the exit code, the
tool's own text) without parsing its message. Each class writes its message from a template over its
fields, so the wording lives in one place.

The core speaks to scripts: where a setting would help, a message names it as a keyword
(``nsys_path='...'``) and lists it in ``hints``; the magics layer, and only it, respells a hint as
notebook advice (``%config GpuMagics...``). Several classes also derive from the built-in type that
the condition has always raised (``ValueError`` for bad input, ``RuntimeError`` for a failed tool),
so ``except ValueError`` in existing code keeps working.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "CellError",
    "ExportFormatError",
    "FileMissingError",
    "GpuMagicError",
    "Hint",
    "InvalidOptionError",
    "JobRankError",
    "JobReadError",
    "NcuCellError",
    "NcuError",
    "NcuFailedError",
    "NcuNotFoundError",
    "NcuPermissionError",
    "NcuReplayError",
    "NcuTimeoutError",
    "NestedProfilerError",
    "NewerReportError",
    "NoCudaDataError",
    "NoKernelsProfiledError",
    "NoReportError",
    "NotEnoughGpusError",
    "NsysError",
    "NsysExportError",
    "NsysFailedError",
    "NsysNotFoundError",
    "NsysTimeoutError",
    "RankError",
    "ShippingError",
    "TimingInterrupted",
    "TorchrunMissingError",
    "TraceFormatError",
    "UnwritablePathError",
    "tail",
]


@dataclass(frozen=True)
class Hint:
    """A setting that would help, named once so that each front end can spell it its own way.

    ``setting`` is a field of the options the core takes (and a trait of ``GpuMagics`` of the same
    name); ``value`` is written as Python source. The core's text contains :meth:`script` verbatim,
    which the magics layer replaces.
    """

    setting: str
    value: str

    def script(self) -> str:
        return f"{self.setting}={self.value}"


def tail(text: str, lines: int = 15) -> str:
    """The last ``lines`` lines a terminal would show (progress bars repaint with ``\\r``; blank
    lines dropped)."""
    clean = [ln.split("\r")[-1] for ln in text.split("\n") if ln.split("\r")[-1].strip()]
    return "\n".join(clean[-lines:])


class GpuMagicError(Exception):
    """Base of every gpumagic error. ``str(err)`` is the message; the fields stay readable as
    attributes."""

    #: The message, formatted with the instance's fields (and ``extra_fields()``).
    template: ClassVar[str] = "{detail}"

    def __init__(self, hints: Iterable[Hint] = (), **fields: Any) -> None:
        self.__dict__.update(fields)
        self.hints: tuple[Hint, ...] = tuple(hints)
        super().__init__(self.template.format(**fields, **self.extra_fields()))

    def extra_fields(self) -> dict[str, Any]:
        """Values computed from the fields for the template (a joined list, an optional
        sentence)."""
        return {}

    @property
    def message(self) -> str:
        return str(self)


class InvalidOptionError(GpuMagicError, ValueError):
    """An option's value cannot be used: ``option``, ``value`` and ``reason``."""

    template = "{option} {reason}, got {value!r}"


class TooManyReportsError(GpuMagicError, ValueError):
    """A job of more reports than one Trace should hold (``detail``: how many, and what to do)."""


class TraceFormatError(GpuMagicError, ValueError):
    """A file is not a torch.profiler Chrome trace gpumagic can read: ``path`` and ``reason``."""

    template = "{path}: not a readable Chrome-trace JSON ({reason})"


# --- Nsight Systems
# ----------------------------------------------------------------------------------------------


class NsysError(GpuMagicError, RuntimeError):
    """Something about an nsys run; the message says what happened and what to do."""


class ToolNotFound:
    """No binary of a tool gpumagic runs; a subclass names ``tool``, its ``setting`` and ``missing``
    (the message)."""

    tool: ClassVar[str]
    setting: ClassVar[str]
    missing: ClassVar[str]

    def __init__(
        self, looked: Sequence[str], configured: str | None = None, setting: str | None = None
    ) -> None:
        # setting: the caller's own keyword where it is not the options' (load_nsys takes nsys=)
        hints = [Hint(setting or self.setting, f"'/path/to/{self.tool}'")]
        super().__init__(hints=hints, looked=list(looked), configured=configured)  # type: ignore[call-arg]

    @property
    def template(self) -> str:
        if self.configured:  # type: ignore[attr-defined]
            return (
                self.tool
                + " not found at the configured path {configured!r}. Set the right one: {hint}"
            )
        return self.missing

    def extra_fields(self) -> dict[str, Any]:
        return {"places": ", ".join(self.looked), "hint": self.hints[0].script()}  # type: ignore[attr-defined]


class NsysNotFoundError(ToolNotFound, NsysError):
    """No nsys binary: ``configured`` (the path asked for, or None) and ``looked`` (where the search
    went)."""

    tool, setting = "nsys", "nsys_path"
    missing = (
        "nsys (Nsight Systems) was not found. Looked in: {places}. Install Nsight Systems in "
        "the same container "
        "as this kernel (NVIDIA's PyTorch containers ship it), or point to it: {hint}"
    )


class ToolFailed:
    """A tool gpumagic runs exited non-zero: ``command``, ``returncode``, ``output`` (its text) and
    the ``files`` it left; a subclass names the ``tool``."""

    tool: ClassVar[str]

    def __init__(
        self, command: Sequence[str], returncode: int, output: str, files: Sequence[str] = ()
    ) -> None:
        super().__init__(  # type: ignore[call-arg]
            command=list(command), returncode=returncode, output=output, files=list(files)
        )

    @property
    def template(self) -> str:
        ended = " exited with status {returncode}. Its output ends with:\n{output_tail}{files_line}"
        return self.tool + ended

    def extra_fields(self) -> dict[str, Any]:
        files = self.files  # type: ignore[attr-defined]
        return {
            "output_tail": tail(self.output),  # type: ignore[attr-defined]
            "files_line": f"\nFiles: {', '.join(files)}" if files else "",
        }


class ToolTimedOut:
    """A tool's run did not finish in ``timeout`` seconds and was stopped; ``partial_files`` were
    kept. A subclass names the ``tool`` and the ``advice``."""

    tool: ClassVar[str]
    advice: ClassVar[str]

    def __init__(self, timeout: float, partial_files: Sequence[str] = ()) -> None:
        super().__init__(timeout=timeout, partial_files=list(partial_files))  # type: ignore[call-arg]

    @property
    def template(self) -> str:
        ran = " run did not finish within {timeout:g} s and was stopped. {kept}{advice}"
        return "The " + self.tool + ran

    def extra_fields(self) -> dict[str, Any]:
        kept = ", ".join(self.partial_files)  # type: ignore[attr-defined]
        kept = f"Partial files kept: {kept}. " if kept else "No partial files were written. "
        return {"kept": kept, "advice": self.advice}


class NsysFailedError(ToolFailed, NsysError):
    """nsys exited non-zero (:class:`ToolFailed`)."""

    tool = "nsys"


class NoReportError(NsysError):
    """nsys wrote no report: ``output`` (its text); ``stem`` when it finished without writing the
    files."""

    def __init__(self, output: str, stem: str | None = None) -> None:
        super().__init__(output=output, stem=stem)

    @property
    def template(self) -> str:  # type: ignore[override]
        if self.stem:
            return (
                "nsys finished but wrote neither {stem}.nsys-rep nor .sqlite. It "
                "said:\n{output_tail}"
            )
        return (
            "nsys generated no report: the capture range (the NVTX range around the cell) "
            "never opened. "
            "Check that the cell ran (an exception in warm-up?) and that NVTX is traced (-t "
            "must include nvtx); "
            "nsys said:\n{output_tail}"
        )

    def extra_fields(self) -> dict[str, Any]:
        return {"output_tail": tail(self.output)}


class NewerReportError(NsysError):
    """The report was written by a newer nsys than the one exporting it: ``output`` (nsys' text)."""

    template = (
        "The report was written by a newer Nsight Systems than the nsys exporting it. Export "
        "with the nsys that "
        "recorded it (gpumagic uses one binary for both: check {hint}).\n{output_tail}"
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
        "{supported}.x. "
        "Export with an nsys whose schema is {supported}.x."
    )


class NoCudaDataError(NsysExportError):
    """The report holds no CUDA trace data: ``path``."""

    template = (
        "{path} does not contain CUDA trace data. Either the program ran no CUDA work, or "
        "nsys traced it from outside "
        "its container (a host nsys wrapping `docker run` sees only the OS layer): run nsys "
        "inside the container that "
        "runs the CUDA process, with -t cuda."
    )


# --- several ranks (--nproc N inside nsys)
# -------------------------------------------------------------


class TorchrunMissingError(NsysError):
    """The ranks cannot run in ``python``: torch or torch.distributed is missing there
    (``reason``: what the rank said)."""

    template = (
        "--nproc runs the cell's ranks in `{python}`, which has no torch.distributed "
        "({reason}). "
        "Install a PyTorch with torch.distributed in that Python (the pytorch.org wheels have it)."
    )


class NotEnoughGpusError(NsysError):
    """``nproc`` ranks need one GPU each; ``where`` (this process, or a rank) sees ``available``."""

    template = (
        "--nproc {nproc} runs one rank per GPU, but {where} sees {available} GPU(s) "
        "(CUDA_VISIBLE_DEVICES={visible}). "
        "Use --nproc {available} or fewer, or make more GPUs visible."
    )


class RankError(CellError):
    """Rank ``rank`` of ``world_size`` raised (the launcher stopped the others); ``traceback`` is
    its traceback."""

    template = "Rank {rank} of {world_size} raised in the nsys subprocess: {last}\n\n{traceback}"

    def __init__(self, traceback: str, rank: int = 0, world_size: int = 1) -> None:
        NsysError.__init__(self, traceback=traceback, rank=rank, world_size=world_size)


# --- Nsight Compute
# ----------------------------------------------------------------------------------------------


class NcuError(GpuMagicError, RuntimeError):
    """Something about an Nsight Compute (ncu) run; the message says what happened and what to
    do."""


class NcuNotFoundError(ToolNotFound, NcuError):
    """No ncu binary: ``configured`` (the path asked for, or None) and ``looked`` (where the search
    went)."""

    tool, setting = "ncu", "ncu_path"
    missing = (
        "ncu (Nsight Compute) was not found. Looked in: {places}. It comes with the CUDA toolkit "
        "(/usr/local/cuda/bin/ncu), NVIDIA's PyTorch containers and "
        "https://developer.nvidia.com/nsight-compute; "
        "install it where this kernel runs, or point to it: {hint}"
    )


class NcuPermissionError(NcuError):
    """ncu may not read the GPU's performance counters (``ERR_NVGPUCTRPERM``): ``output`` is ncu's
    text."""

    template = (
        "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): the driver "
        "restricts them to "
        "administrators. Fix, one of: run as root; allow all users (a file in "
        "/etc/modprobe.d/ with "
        "`options nvidia NVreg_RestrictProfilingToAdminUsers=0`, then reload the driver or "
        "reboot); in a container, "
        "start it with `--cap-add SYS_ADMIN`. See "
        "https://developer.nvidia.com/ERR_NVGPUCTRPERM. ncu said:\n"
        "{output_tail}"
    )

    def __init__(self, output: str) -> None:
        super().__init__(output=output)

    def extra_fields(self) -> dict[str, Any]:
        return {"output_tail": tail(self.output, 6)}


class NoKernelsProfiledError(NcuError):
    """ncu profiled no kernel: ``kernel_filter`` (the ``--kernel-name`` given, or None), ``label``
    (the NVTX range) and ``output`` (ncu's text)."""

    template = (
        "No kernels were profiled: {why} Check the kernel filter (ncu's --kernel-name "
        "syntax: a name, or "
        "regex:PATTERN), and that the cell launches CUDA kernels when it runs (not only in "
        "warm-up). ncu said:\n"
        "{output_tail}"
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

    template = (
        "ncu could not profile a kernel (its replay failed). Kernel replay saves and "
        "restores the memory a kernel "
        "writes, once per pass: try application replay (the whole cell re-run per pass), with "
        '--ncu-args "--replay-mode application", fewer sections, or a narrower kernel '
        "filter. ncu said:\n"
        "{output_tail}{files_line}"
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


# --- shipping a cell's names to a subprocess
# ---------------------------------------------------------------------


class ShippingError(GpuMagicError, ValueError):
    """Some names the cell needs cannot be sent to the subprocess: ``problems`` maps each name to
    why."""

    template = (
        "These names cannot be sent to the subprocess that runs the cell:\n{lines}\n"
        'Each says what to do instead; --setup "..." runs code in the subprocess before the '
        "capture, and nothing has run yet."
    )

    def __init__(self, problems: dict[str, str]) -> None:
        super().__init__(problems=dict(problems))

    def extra_fields(self) -> dict[str, Any]:
        return {"lines": "\n".join(f"  {n}: {why}" for n, why in self.problems.items())}


# --- capture faults: a nested profiler, a missing or unwritable file
# ---------------------------------------------


class NestedProfilerError(GpuMagicError, RuntimeError):
    """A profiler would start inside another one, which crashes the process (torch.profiler / Kineto
    keeps one session): ``found`` says which profiler and where, ``fix`` what to do instead."""

    template = "{found}: a profiler started inside another one crashes the Python process. {fix}"


class FileMissingError(GpuMagicError, FileNotFoundError):
    """A file to read does not exist: ``path``, and ``what`` it should have been (an nsys report, a
    trace)."""

    template = "{what} {path} does not exist. Check the path{relative}."

    def extra_fields(self) -> dict[str, Any]:
        relative = (
            "" if os.path.isabs(self.path) else f" (a relative path is read from {os.getcwd()})"
        )
        return {"relative": relative}


class UnwritablePathError(GpuMagicError, ValueError):
    """A file cannot be written where asked: ``path``, ``option`` (what asked for it) and
    ``reason``."""

    template = (
        "{option}: cannot write {path} ({reason}). Choose a path in an existing, "
        "writable directory."
    )


# --- a job read rank by rank
# -------------------------------------------------------------------


class JobReadError(GpuMagicError):
    """No report of the job could be read, or none of its kind was found (``detail`` says why)."""


class JobRankError(GpuMagicError, KeyError):
    """A rank the job does not have, or whose file cannot be read again (``detail``)."""

    def __str__(self) -> str:  # KeyError's own would quote the message
        return str(self.args[0]) if self.args else ""


# --- an interrupt that keeps what was measured
# -------------------------------------------------------------------


class TimingInterrupted(KeyboardInterrupt):
    """Ctrl-C while a measurement was sampling: ``result`` is the partial ``TimingResult`` (marked
    ``interrupted``).

    Not a :class:`GpuMagicError` on purpose: it is a ``KeyboardInterrupt``, so that no ``except
    Exception`` (nor the magics' ``except GpuMagicError``) swallows it and IPython stops the cells
    queued after the interrupted one. A front end prints ``result`` and raises it again; a script
    reads ``err.result``.
    """

    def __init__(self, result: Any) -> None:
        self.result = result
        n = len(result.samples)
        super().__init__(
            f"timing interrupted after {n} sample{'s' if n != 1 else ''}; "
            "the partial TimingResult is this exception's .result"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.result,))
