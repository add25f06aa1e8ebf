"""One Bokeh figure as HTML in the three ways a result shows itself (:mod:`.embed` says why each
exists).

"notebook": BokehJS once per kernel session, where the front end shows every output in one window
(else an iframe); "page": for a page that loads BokehJS in its head (``save_html``); anything else:
an ``<iframe srcdoc>`` with BokehJS inside, for whoever calls ``_repr_html_`` directly.
"""

from __future__ import annotations

from ..edges import BokehModel
from . import embed

__all__ = ["figure_html"]


def figure_html(fig: BokehModel, mode: str, title: str) -> str:
    """``fig`` as HTML for ``mode`` ("notebook", "page" or "iframe"); ``title`` names the iframe."""
    if mode == "notebook" and embed.shares_window():
        return embed.notebook_block(fig, carrier=embed.ONCE.take())
    if mode == "page":
        return embed.page_block(fig)
    return embed.iframe_block(fig, title)
