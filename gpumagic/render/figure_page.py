"""The three faces of a result that carries a Bokeh figure (a profile report, an ncu report, a
comparison, a sweep, any Bokeh figure through :class:`Figure`): the text, the notebook output, and a
page saved to disk. One base, so each result writes only its own ``html(figure)``.

Why three HTML forms: a notebook front end shows every output in one window and BokehJS need travel
once (``_repr_mimebundle_``, "notebook"); a caller of ``_repr_html_`` may put it anywhere, so it
gets an iframe with BokehJS inside ("iframe"); ``save_html`` writes a page that loads BokehJS once
in its head ("page").
"""

from __future__ import annotations

import os
from collections.abc import Container

from ..edges import BokehModel, PrettyPrinter

__all__ = ["Figure", "FigurePage"]


class FigurePage:
    """Mixin: ``_repr_html_``, ``_repr_mimebundle_`` and ``save_html`` from the class's
    ``html(figure)``, each text passed through :meth:`_advised` (a result whose notes advise
    settings words them the front end's way there)."""

    #: the saved page's title
    page_title = "gpumagic"

    def html(
        self, figure: str | None = "notebook"
    ) -> str:  # pragma: no cover - each result defines it
        raise NotImplementedError

    def _advised(self, text: str) -> str:
        return text

    def __repr__(self) -> str:
        """The text form, as a terminal shows a result (IPython's pretty printer too:
        :meth:`_repr_pretty_`)."""
        return str(self)

    def _repr_pretty_(self, p: PrettyPrinter, cycle: bool) -> None:
        p.text(str(self))

    def _repr_html_(self) -> str:
        """Self-contained (the figure in an iframe with its own BokehJS): for whoever asks for HTML
        alone."""
        return self._advised(self.html("iframe"))

    def _repr_mimebundle_(
        self, include: Container[str] | None = None, exclude: Container[str] | None = None
    ) -> dict[str, str]:
        """What a notebook shows: HTML with the figure drawn by BokehJS sent once per kernel
        session, and the text for front ends without HTML."""
        bundle = {"text/plain": self._advised(str(self))}
        if (include is None or "text/html" in include) and not (exclude and "text/html" in exclude):
            bundle["text/html"] = self._advised(self.html("notebook"))
        return bundle

    def save_html(self, path: str | os.PathLike[str]) -> str:
        """A standalone page (BokehJS inlined once, in its head: opens offline)."""
        from .embed import standalone_page

        with open(path, "w", encoding="utf-8") as f:
            f.write(standalone_page(self.page_title, self.html("page"), "body{margin:12px}"))
        return os.fspath(path)


class Figure(FigurePage):
    """Any Bokeh figure shown the way gpumagic shows its own: in a notebook, BokehJS travels once
    per kernel session (with whichever figure or report comes first) and this output holds only the
    figure's JSON, where bokeh's ``output_notebook(INLINE)`` + ``show`` would put all of BokehJS
    (about 4 MB, twice over) in the notebook. ``Figure(p)`` as a cell's value, or
    ``display(Figure(p))``; ``save_html(path)`` writes a page of its own."""

    def __init__(self, figure: BokehModel, title: str | None = None) -> None:
        self.figure = figure
        self.title = title or getattr(getattr(figure, "title", None), "text", None) or "figure"

    @property
    def page_title(self) -> str:  # type: ignore[override]
        return f"gpumagic: {self.title}"

    def html(self, figure: str | None = "iframe") -> str:
        from .figure_modes import figure_html

        return figure_html(self.figure, figure or "iframe", self.page_title)

    def __str__(self) -> str:
        return (
            f"{self.title} (a Bokeh figure: shown in a notebook, or written with save_html(path))"
        )
