"""What any tool gpumagic runs (nsys, ncu) can fail with, worded once: no binary, a non-zero exit,
a run stopped at its time limit. A tool's own classes (:mod:`.nsys`, :mod:`.ncu`) name the tool and
its advice and derive from these and from the tool's base."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from .base import GpuMagicError, Hint, tail


class ToolNotFound(GpuMagicError):
    """No binary of a tool gpumagic runs: ``configured`` (the path asked for, or None) and
    ``looked`` (where the search went). A subclass names the ``tool``, its ``setting``, the
    ``product`` and how to ``install`` it; the wording of both cases lives here, once."""

    looked: list[str]
    configured: str | None
    tool: ClassVar[str]
    setting: ClassVar[str]
    product: ClassVar[str]
    install: ClassVar[str]
    template = (
        "{tool} ({product}) was not found. Looked in: {places}. {install}, or point to it: {hint}"
    )
    #: The message where the settings named a path and nothing is there.
    template_configured = (
        "{tool} not found at the configured path {configured!r}. Set the right one: {hint}"
    )

    def __init__(
        self, looked: Sequence[str], configured: str | None = None, setting: str | None = None
    ) -> None:
        # setting: the caller's own keyword where it is not the options' (load_nsys takes nsys=)
        hints = [Hint(setting or self.setting, f"'/path/to/{self.tool}'")]
        super().__init__(hints=hints, looked=list(looked), configured=configured)

    def message_template(self) -> str:
        return self.template_configured if self.configured else self.template

    def extra_fields(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "product": self.product,
            "install": self.install,
            "places": ", ".join(self.looked),
            "hint": self.hints[0].script(),
        }


class ToolFailed(GpuMagicError):
    """A tool gpumagic runs exited non-zero: ``command``, ``returncode``, ``output`` (its text) and
    the ``files`` it left; a subclass names the ``tool``."""

    command: list[str]
    returncode: int
    output: str
    files: list[str]
    tool: ClassVar[str]
    template = (
        "{tool} exited with status {returncode}. Its output ends with:\n{output_tail}{files_line}"
    )

    def __init__(
        self, command: Sequence[str], returncode: int, output: str, files: Sequence[str] = ()
    ) -> None:
        super().__init__(
            command=list(command), returncode=returncode, output=output, files=list(files)
        )

    def extra_fields(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "output_tail": tail(self.output),
            "files_line": f"\nFiles: {', '.join(self.files)}" if self.files else "",
        }


class ToolTimedOut(GpuMagicError):
    """A tool's run did not finish in ``timeout`` seconds and was stopped; ``partial_files`` were
    kept. A subclass names the ``tool`` and the ``advice``."""

    timeout: float
    partial_files: list[str]
    tool: ClassVar[str]
    advice: ClassVar[str]
    template = "The {tool} run did not finish within {timeout:g} s and was stopped. {kept}{advice}"

    def __init__(self, timeout: float, partial_files: Sequence[str] = ()) -> None:
        super().__init__(timeout=timeout, partial_files=list(partial_files))

    def extra_fields(self) -> dict[str, Any]:
        kept = ", ".join(self.partial_files)
        kept = f"Partial files kept: {kept}. " if kept else "No partial files were written. "
        return {"tool": self.tool, "kept": kept, "advice": self.advice}
