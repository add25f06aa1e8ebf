"""The by-code sections of a report (``render/code_view.py``): the module tree and the lines in the
text and the HTML, their totals the report's, and the sentence of what to record where the trace
has no module or stack information."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from gpumagic import load_trace
from gpumagic.render.report import ProfileReport
from gpumagic.trace import Trace
from gpumagic.trace.by_code import NO_LINES, NO_MODULES
from gpumagic.units import format_ns

from ..helpers import ROOT

DATA = ROOT / "tests" / "data" / "attribution"


def report(name: str) -> ProfileReport:
    return ProfileReport(load_trace(DATA / f"{name}.json.gz"), timeline=False)


class Balanced(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.details = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("wbr", "br", "img", "input", "meta", "hr"):  # void: no end tag
            return
        self.open.append(tag)
        self.details += tag == "details"

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, (self.open[-3:], tag)
        self.open.pop()


def test_the_text_shows_the_top_modules_and_lines_with_their_total():
    rep = report("gpt_modules")
    text = str(rep)
    modules = rep.by_module()
    total = int(modules.loc[modules["depth"] == 0, "total_ns"].sum())
    assert total == int((rep.trace.kernels["end"] - rep.trace.kernels["start"]).sum()) + int(
        (rep.trace.memops["end"] - rep.trace.memops["start"]).sum()
    )
    assert f"By module, forward and backward, of {format_ns(total)} of GPU time:" in text
    for block in ("Block_0", "Block_1", "Block_2"):
        row = modules[modules["instance"] == f"GPT_0.{block}"].iloc[0]
        assert re.search(
            rf"{format_ns(row['fwd_ns'])}\s+{format_ns(row['bwd_ns'])}\s+{block}\b", text
        )
    assert "(outside every module): Optimizer.step#AdamW.step" in text
    assert "By function" in text and "gpt_step" in text


def test_the_html_is_a_tree_that_opens_and_a_line_table():
    rep = report("cnn_modules")
    page = rep.html(timeline=None)
    parser = Balanced()
    parser.feed(page)
    assert parser.open == []
    modules = rep.by_module()
    nested = int((modules["depth"] < modules["depth"].shift(-1)).sum())  # rows with children
    assert parser.details >= nested + 2  # each parent opens, and both sections
    assert "By module: forward and backward" in page and "Residual_2" in page
    assert "cnn_step" in page


@pytest.mark.parametrize("name", ["gpt_plain", "cnn_plain"])
def test_a_plain_trace_says_what_to_record_and_splits_nothing(name):
    rep = report(name)
    text, page = str(rep), rep.html(timeline=None)
    assert f"By module: {NO_MODULES}" in text and f"By line: {NO_LINES}" in text
    assert (
        "By module (no module information)" in page and "Forward" not in text.split("By module")[1]
    )


def test_a_trace_without_torch_ops_has_no_section():
    assert "By module" not in str(ProfileReport(Trace(), timeline=False))
