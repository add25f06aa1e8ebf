"""A mechanical scan of every report gpumagic writes for the traces under tests/data (torch.profiler
Chrome traces and nsys exports, each made on a GPU host or gathered from public sources): no
percentage above 100% in the text or the HTML page. A share of a span, a window or a busy time
above 100% is a sentence the trace's own events contradict; a ratio past 100% is said as a
multiple ("45× the shortest"). The public corpus gets the same scan in tests/test_public_traces.py.
"""

from __future__ import annotations

import gzip
import html
import re
import shutil

import pytest

from gpumagic import load_nsys, load_trace
from gpumagic.render.report import ProfileReport

from .helpers import DATA

#: A percentage as a sentence or a table cell says it: not a URL-encoded byte (``%20`` in an
#: icon's data URI), not part of a longer number or name.
PERCENT = re.compile(r"(?<![\w.#%-])(\d+(?:\.\d+)?)\s?%(?![0-9A-Fa-f]{2})")
#: What a page shows a reader: its text and its attributes' tooltips, not its scripts' code.
_CODE = re.compile(r"<(script|style)\b.*?</\1>", re.S | re.I)
TRACES = sorted(
    p.relative_to(DATA).as_posix()
    for pattern in ("**/*.json.gz", "**/*.pt.trace.json")
    for p in DATA.glob(pattern)
    if "kernel" not in p.name and "names" not in p.name
)
EXPORTS = sorted(
    p.relative_to(DATA).as_posix() for p in DATA.glob("**/*.sqlite.gz") if "nocuda" not in p.name
)


def _shown(page: str) -> str:
    """A page's text and titles, its scripts and styles left out (Bokeh's embedded JavaScript and
    URL-encoded data are code, not sentences)."""
    return html.unescape(_CODE.sub(" ", page))


def _above(text: str) -> list[str]:
    return [m.group(0) for m in PERCENT.finditer(text) if float(m.group(1)) > 100.0]


def _scan(trace, name):
    report = ProfileReport(trace, label=name)
    for kind, text in (("text", str(report)), ("page", _shown(report._repr_html_()))):
        bad = _above(text)
        assert not bad, (name, kind, bad[:5])


@pytest.mark.parametrize("name", TRACES)
def test_no_torch_trace_report_says_a_share_above_100_percent(name):
    try:
        trace = load_trace(DATA / name)
    except Exception as exc:  # noqa: BLE001 - a file that is not a trace is another test's
        pytest.skip(f"{name} is not read as a trace ({type(exc).__name__})")
    _scan(trace, name)


@pytest.mark.parametrize("name", EXPORTS)
def test_no_nsys_export_report_says_a_share_above_100_percent(name, tmp_path):
    plain = tmp_path / pathlib_name(name)
    with gzip.open(DATA / name, "rb") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    _scan(load_nsys(plain), name)


def pathlib_name(name: str) -> str:
    return name.rsplit("/", 1)[-1].removesuffix(".gz")


def test_the_scan_finds_a_share_above_100_percent():
    assert _above("GPU idle 169% of the span; busy 99.5%") == ["169%"]
    assert _above("width:100%; a +45× skew; rotate(180%2012") == []
