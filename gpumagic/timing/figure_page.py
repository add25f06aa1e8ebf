"""The three faces of a result that carries a Bokeh figure (a comparison, a sweep): the text, the notebook output,
and a page saved to disk. One base, so each result writes only its own ``html(figure)``.

Why three HTML forms: a notebook front end shows every output in one window and BokehJS need travel once
(``_repr_mimebundle_``, "notebook"); a caller of ``_repr_html_`` may put it anywhere, so it gets an iframe with
BokehJS inside ("iframe"); ``save_html`` writes a page that loads BokehJS once in its head ("page").
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["FigurePage"]


class FigurePage:
    """Mixin: ``_repr_html_``, ``_repr_mimebundle_`` and ``save_html`` from the class's ``html(figure)``."""

    #: the saved page's title and the iframe's name
    page_title = "gpumagic"

    def html(self, figure: str | None = "notebook") -> str:  # pragma: no cover - each result defines it
        raise NotImplementedError

    #: How the front end that returned this result words its advice (set by :meth:`advise_as`; None: as the core
    #: writes it, a keyword such as ``time_budget=2``).
    _advice: Callable[[str], str] | None = None

    def advise_as(self, rewrite: Callable[[str], str]) -> FigurePage:
        """Word the advice in the notes the front end's way (a notebook's ``%config GpuMagics.time_budget = 2``)
        wherever this result is shown, also as a cell's value; returns the result."""
        self._advice = rewrite
        return self

    def _advised(self, text: str) -> str:
        return self._advice(text) if self._advice is not None else text

    def _repr_html_(self) -> str:
        return self._advised(self.html("iframe"))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        bundle = {"text/plain": self._advised(str(self))}
        if (include is None or "text/html" in include) and not (exclude and "text/html" in exclude):
            bundle["text/html"] = self._advised(self.html("notebook"))
        return bundle

    def save_html(self, path: str | os.PathLike[str]) -> str:
        """A standalone page (BokehJS inlined once, in its head: opens offline)."""
        from ..render.embed import standalone_page

        with open(path, "w", encoding="utf-8") as f:
            f.write(standalone_page(self.page_title, self.html("page"), "body{margin:12px}"))
        return os.fspath(path)
