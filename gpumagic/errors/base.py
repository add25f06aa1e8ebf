"""The family's base: :class:`GpuMagicError` (fields in, a message from one template out), the
:class:`Hint` each front end spells its own way, an option that cannot be used, and the interrupt
that keeps what was measured."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar


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
        super().__init__(self.message_template().format(**fields, **self.extra_fields()))

    def message_template(self) -> str:
        """The template of this instance's message: the class's, or one a subclass chooses by the
        fields (a tool named in the settings or not, a report missing or never begun)."""
        return self.template

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


#: The partial result an interrupt carries (a class of ``gpumagic.timing``, a layer above).
_Partial = TypeVar("_Partial")


class TimingInterrupted(KeyboardInterrupt, Generic[_Partial]):
    """Ctrl-C while a measurement was sampling: ``result`` is the partial ``TimingResult`` (marked
    ``interrupted``); its subclasses carry a partial ``Comparison`` or ``Sweep``. The result's
    class is a type parameter because the results live in ``gpumagic.timing``, above the errors.

    Not a :class:`GpuMagicError` on purpose: it is a ``KeyboardInterrupt``, so that no ``except
    Exception`` (nor the magics' ``except GpuMagicError``) swallows it and IPython stops the cells
    queued after the interrupted one. A front end prints ``result`` and raises it again; a script
    reads ``err.result``.
    """

    def __init__(self, result: _Partial) -> None:
        self.result = result
        n = len(getattr(result, "samples", ()))  # a TimingResult's; the subclasses say their own
        super().__init__(
            f"timing interrupted after {n} sample{'s' if n != 1 else ''}; "
            "the partial TimingResult is this exception's .result"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.result,))
