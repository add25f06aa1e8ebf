"""How a timeline reaches a page: BokehJS once per notebook, or a page of its own.

In a notebook (JupyterLab, Notebook 7, VS Code: every output of a notebook shares one window)
BokehJS (~1.4 MB) travels once per kernel session, inside the first report's HTML output, and every
report draws its figure with ``Bokeh.embed.embed_item`` into a ``<div>`` of its own output: no
iframe, no CDN, so no blank band and no network. Each report's script waits for BokehJS (an event
the carrier fires, and a poll), so outputs drawn in any order, when a saved notebook is reopened,
find it; and a report that lost its carrier (its output was cleared) says so and draws as soon as a
later report brings BokehJS again.

Where outputs do not share a window (Colab puts each in a frame of its own) and in ``_repr_html_``
for whoever calls it directly, the timeline is a standalone page in an ``<iframe srcdoc>`` exactly
as tall as its figure; ``save_html`` puts BokehJS once in the page's head. A notebook opened
untrusted runs no script: a line says so instead.
"""

from __future__ import annotations

import html
import json
import sys
from collections.abc import Callable
from typing import Any

from ..edges import BokehModel, JsonValue

__all__ = [
    "BokehJSOnce",
    "bokehjs",
    "iframe_block",
    "notebook_block",
    "page_block",
    "shares_window",
]

_CARRIER_TYPE = "text/x-gpumagic-bokehjs"
_EVENT = "gpumagic:bokehjs"
UNTRUSTED_NOTE = (
    "Timeline not drawn: this notebook is not trusted, so its scripts do not run. Trust it "
    "(JupyterLab: "
    "command palette, \u201cTrust Notebook\u201d) to draw it, or write it to a page with "
    "rep.save_html(path)."
)
MISSING_NOTE = (
    "Timeline waiting for BokehJS, which gpumagic sends once per kernel session with the "
    "first report: that "
    "output is not on this page (cleared, or its cell ran again). It draws when a report "
    "that carries it is shown: "
    "restart the kernel and run the notebook again, or use rep.save_html(path)."
)
_NOTE_STYLE = "color:#777;font-style:italic;margin:4px 0"

_bokehjs: str | None = None


def bokehjs() -> str:
    """BokehJS (core and WebGL), inline: GPU boxes are often offline. Safe inside a ``<script>``
    element."""
    global _bokehjs
    if _bokehjs is None:
        from bokeh.resources import Resources

        raw = "\n".join(Resources(mode="inline", components=["bokeh", "bokeh-gl"]).js_raw)
        _bokehjs = raw.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")
    return _bokehjs


def shares_window() -> bool:
    """Whether the front end shows every output of a notebook in one window (so BokehJS can be sent
    once)."""
    return "google.colab" not in sys.modules


class BokehJSOnce:
    """Which output carries BokehJS: the first report of the kernel session. When the front end says
    which cell is running (``current_cell``: (cell id, run id), or None), a new run of the carrier's
    cell carries it again: that run's output replaces the old one, which would otherwise leave the
    saved notebook without BokehJS."""

    def __init__(self) -> None:
        self.sent = False
        self.carrier: tuple[Any, Any] | None = None
        self.current_cell: Callable[[], tuple[Any, Any] | None] = lambda: None

    def take(self) -> bool:
        """True when this output must carry BokehJS (and from now on it is taken as sent)."""
        cell = self.current_cell()
        rerun = (
            cell is not None
            and self.carrier is not None
            and cell[0] is not None
            and cell[0] == self.carrier[0]
            and cell[1] != self.carrier[1]
        )
        if self.sent and not rerun:
            return False
        self.sent, self.carrier = True, cell
        return True

    def forget(self) -> None:
        """The next report carries BokehJS again (after the outputs were cleared, say)."""
        self.sent, self.carrier = False, None


ONCE = BokehJSOnce()


def _json_for_script(value: JsonValue) -> str:
    """JSON that cannot end its ``<script>`` element or open a tag, whatever names it holds."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# Runs in the output (or page) right after the timeline's <div>s. It loads the BokehJS carried next
# to it (when there is one and the page has none), then draws as soon as BokehJS is there and the
# output is in the document (JupyterLab may run an output's scripts before attaching it).
_EMBED_JS = """(function () {
  var box = document.currentScript.parentNode, item = %(item)s, height = %(height)d;
  var plot = box.querySelector('.gm-plot'), note = box.querySelector('.gm-note');
  var carrier = box.querySelector('script[type="%(carrier)s"]');
  if (carrier) {
    if (!window.Bokeh) {
      var s = document.createElement('script');
      s.text = carrier.textContent;
      document.head.appendChild(s);
      document.head.removeChild(s);
    }
    carrier.parentNode.removeChild(carrier);
    window.dispatchEvent(new Event('%(event)s'));
  }
  note.style.display = 'none';
  plot.style.minHeight = height + 'px';
  var drawn = false, tries = 0, timer = null;
  function draw() {
    if (drawn) return true;
    if (!window.Bokeh || !window.Bokeh.embed || !plot.isConnected) return false;
    drawn = true;
    window.removeEventListener('%(event)s', draw);
    if (timer) clearInterval(timer);
    note.style.display = 'none';
    plot.style.minHeight = height + 'px';
    window.Bokeh.embed.embed_item(item, plot).catch(function (e) {
      note.textContent = 'Timeline not drawn: ' + e;
      note.style.display = '';
      console.error(e);
    });
    return true;
  }
  if (!draw()) {
    window.addEventListener('%(event)s', draw);
    timer = setInterval(function () {
      if (draw()) return;
      if (++tries === 50) {
        note.textContent = %(missing)s;
        note.style.display = '';
        plot.style.minHeight = '';
      }
      if (tries > 600) clearInterval(timer);
    }, 100);
  }
})();"""


def _block(fig: BokehModel, carrier: bool, note: str, margin: str = "6px 0 0 0") -> str:
    from bokeh.embed import json_item

    script = _EMBED_JS % {
        "item": _json_for_script(json_item(fig)),
        "height": int(fig.height),
        "carrier": _CARRIER_TYPE,
        "event": _EVENT,
        "missing": _json_for_script(MISSING_NOTE),
    }
    carried = f"<script type='{_CARRIER_TYPE}'>{bokehjs()}</script>" if carrier else ""
    return (
        f"<div class='gm-timeline' style='width:100%;margin:{margin}'>"
        f"<div class='gm-note' style='{_NOTE_STYLE}'>{html.escape(note)}</div>"
        f"<div class='gm-plot' style='width:100%'></div>{carried}<script>{script}</script></div>"
    )


def notebook_block(fig: BokehModel, carrier: bool) -> str:
    """The timeline for a notebook output whose window BokehJS reaches once (``carrier``: this
    output brings it)."""
    return _block(fig, carrier, UNTRUSTED_NOTE)


def page_block(fig: BokehModel, margin: str = "6px 0 0 0") -> str:
    """The timeline for a page that loads BokehJS in its head (``save_html``)."""
    return _block(fig, False, MISSING_NOTE, margin)


def standalone_page(title: str, body: str, style: str = "") -> str:
    """A whole page with BokehJS in its head: opens offline, in any browser."""
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta "
        f"charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style><script>{bokehjs()}</script></head><body>{body}</body></html>"
    )


# The iframe's page tells its frame how tall it is once the figure is drawn: exactly as tall as its
# content.
_FIT_JS = """(function () {
  function fit() {
    var f = window.frameElement;
    if (f) f.style.height = document.documentElement.getBoundingClientRect().height + 'px';
  }
  new ResizeObserver(fit).observe(document.documentElement);
  fit();
})();"""


def iframe_block(fig: BokehModel, title: str) -> str:
    """The timeline as a page of its own in an ``<iframe srcdoc>`` as tall as the figure (BokehJS
    inside)."""
    page = standalone_page(
        title,
        page_block(fig, "0") + f"<script>{_FIT_JS}</script>",
        "html,body{margin:0;padding:0;overflow:hidden;background:transparent}",
    )
    return (
        f"<div class='gm-timeline-frame'><div class='gm-note' "
        f"style='{_NOTE_STYLE}'>{html.escape(UNTRUSTED_NOTE)}"
        "</div><script>document.currentScript.previousElementSibling.remove()</script>"
        f"<iframe class='gm-timeline' title='{html.escape(title, quote=True)}' "
        f'srcdoc="{html.escape(page, quote=True)}" '
        f"style='display:block;width:100%;height:{int(fig.height)}px;border:0;margin:6px 0 0 "
        f"0'></iframe></div>"
    )
