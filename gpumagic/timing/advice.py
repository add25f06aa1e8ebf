"""How a result words its advice where it is shown: the core writes a setting as the keyword a
script passes (``time_budget=2``); a front end that hands the result back (``-o``, ``Out[n]``) words
it its own way (a notebook's ``%config GpuMagics.time_budget = 2``) without the core knowing that
front end."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["Advised"]

_Result = TypeVar("_Result", bound="Advised")


class Advised:
    """Mixin: :meth:`advise_as` sets the rewrite; the result's display methods pass their text
    through :meth:`_advised`. ``str()`` keeps the core's words, for scripts and logs."""

    _advice: Callable[[str], str] | None = None

    def advise_as(self: _Result, rewrite: Callable[[str], str]) -> _Result:
        """Word the advice in the notes the front end's way wherever this result is displayed;
        returns the result."""
        self._advice = rewrite
        return self

    def _advised(self, text: str) -> str:
        return self._advice(text) if self._advice is not None else text

    def __getstate__(self) -> dict[str, object]:
        """Pickled without the rewrite (a closure over a front end): a result saved or shipped keeps
        its figures."""
        return {k: v for k, v in self.__dict__.items() if k != "_advice"}
