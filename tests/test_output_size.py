"""A notebook's size grows with its figures' data, not with their number: BokehJS travels once per
kernel session, whatever kind of figure comes first (a profile's timeline, an ncu roofline, a
roofline of timed calls, a sweep, a comparison chart, any Bokeh figure shown through gpumagic), and
every later output holds its figure's JSON alone."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from gpumagic import load_trace
from gpumagic.capture.ncu.read import read_raw_csv
from gpumagic.device_peaks import achieved
from gpumagic.render import embed
from gpumagic.render.calls_roofline import roofline
from gpumagic.render.compare_plot import compare_figure
from gpumagic.render.figure_page import Figure
from gpumagic.render.ncu_view import NcuReport
from gpumagic.render.report import ProfileReport
from gpumagic.render.sweep_plot import sweep_figure

from .helpers import DATA

#: a figure's own output (its JSON, the script that draws it, the table beside it): far under one
#: copy of BokehJS
SMALL = 150_000


class Work:
    def __init__(self, flops: int, nbytes: int, precision: str) -> None:
        self.flops, self.bytes, self.precision_class = flops, nbytes, precision


def calls_roofline() -> Figure:
    """Demo 06's picture: three matmuls, an add and a softmax on an H100's datasheet ceilings."""
    dev = "NVIDIA H100 80GB HBM3"
    n = 8192
    mm = 2 * n**3, 3 * 4 * n * n
    points = [
        ("fp32 matmul", *mm, "fp32", 2.4e-2),
        ("tf32 matmul", *mm, "tf32", 3.0e-3),
        ("bf16 matmul", 2 * n**3, 3 * 2 * n * n, "bf16", 1.5e-3),
    ]
    out = [(label, achieved(Work(f, b, p), t, dev)) for label, f, b, p, t in points]
    add = achieved(Work(0, 3 * 4 << 26, "fp32"), 3e-4, dev)
    out.append(("add", (1 << 26) / add.bytes, (1 << 26) / 3e-4, add))
    return roofline(out, dev)


def ncu_report() -> NcuReport:
    return NcuReport(read_raw_csv((DATA / "ncu" / "tensor.raw.csv").read_text()), label="cell:1")


def profile_report() -> ProfileReport:
    trace = load_trace(DATA / "torch_block.json.gz")
    trace.meta["label"] = "cell:block"
    return ProfileReport(trace, timeline=True)


def sweep() -> Figure:
    series = {
        "a @ a": {
            "x": [256, 512, 1024, 2048],
            "y": [1e12, 8e12, 4e13, 9e13],
            "params": ["n=256", "n=512", "n=1024", "n=2048"],
            "median": ["1 us", "2 us", "4 us", "8 us"],
            "rate": ["1 TFLOP/s", "8 TFLOP/s", "40 TFLOP/s", "90 TFLOP/s"],
        }
    }
    return Figure(sweep_figure(series, peaks={4.9e14: "bf16"}, metric="flop", x="n"), "sweep")


def comparison() -> Figure:
    bars = [
        {
            "label": "a @ b",
            "median": 2e-3,
            "text": "2 ms",
            "speedup": "1.00x (baseline)",
            "baseline": True,
        },
        {"label": "a.half() @ b.half()", "median": 5e-4, "text": "500 \xb5s", "speedup": "4.00x"},
    ]
    return Figure(compare_figure(bars), "comparison")


KINDS = {
    "timeline": profile_report,
    "ncu roofline": ncu_report,
    "calls roofline": calls_roofline,
    "sweep": sweep,
    "comparison": comparison,
}


@pytest.fixture(autouse=True)
def _fresh_session():
    """Each test a fresh kernel session: the next figure carries BokehJS; the module's state is
    restored after."""
    embed.ONCE.forget()
    yield
    embed.ONCE.forget()


def bokehjs_copies(text: str) -> int:
    """Copies of BokehJS's core bundle in ``text`` (as sent, or as stored in a notebook's JSON)."""
    js = embed.bokehjs()
    marker = next(
        m.group(0) for m in re.finditer(r"[A-Za-z0-9_.,;:(){}=+\-*/ ]{48}", js[len(js) // 2 :])
    )
    return text.count(marker)


def notebook_output(obj) -> str:
    """What a notebook stores of ``obj`` shown as a cell's value: its mime bundle, as JSON."""
    return json.dumps(obj._repr_mimebundle_())


@pytest.mark.parametrize("first", list(KINDS))
def test_bokehjs_travels_with_the_first_figure_of_any_kind_and_never_again(first):
    order = [first] + [k for k in KINDS if k != first]
    outputs = {kind: notebook_output(KINDS[kind]()) for kind in order}
    assert bokehjs_copies(outputs[first]) == 1, first
    for kind in order[1:]:
        assert bokehjs_copies(outputs[kind]) == 0, f"{kind} after {first} repeats BokehJS"
        assert "gm-plot" in outputs[kind], kind  # still a drawn figure
        assert len(outputs[kind]) < SMALL, (kind, len(outputs[kind]))


def test_a_notebook_of_many_figures_holds_one_bokehjs():
    texts = [notebook_output(KINDS[kind]()) for _ in range(3) for kind in KINDS]
    assert sum(bokehjs_copies(t) for t in texts) == 1
    assert sum(len(t) for t in texts) < len(embed.bokehjs()) + len(texts) * SMALL


def test_every_figure_output_still_says_so_when_opened_untrusted():
    for kind, make in KINDS.items():
        html = make()._repr_mimebundle_()["text/html"]
        assert embed.UNTRUSTED_NOTE.split(":")[0] in html, kind


def test_html_for_whoever_asks_for_it_alone_stays_self_contained(tmp_path):
    fig = calls_roofline()
    assert bokehjs_copies(fig._repr_html_()) == 1  # an iframe page with its own BokehJS
    assert embed.ONCE.sent is False  # ... which does not count as the session's copy
    page = pathlib.Path(fig.save_html(tmp_path / "roofline.html")).read_text(encoding="utf-8")
    assert bokehjs_copies(page) == 1


def test_the_calls_roofline_draws_each_call_under_its_ceilings():
    fig = calls_roofline()
    assert "H100" in str(fig)
    from bokeh.embed import json_item

    item = json.dumps(json_item(fig.figure))
    for text in (
        "fp32 matmul",
        "tf32 matmul",
        "bf16 matmul",
        "add",
        "memory-bound",
        "fp32 ",
        "tf32 tensor ",
        "bf16 tensor ",
        "DRAM ",
    ):
        assert text in item, text
    # positions at 6 significant digits: no 17-digit floats in the figure's JSON
    assert not re.search(r"\d\.\d{9,}", item)


def test_a_call_without_counted_flops_has_no_place_on_log_axes():
    dev = "NVIDIA H100 80GB HBM3"
    copy = achieved(Work(0, 1 << 30, "fp32"), 1e-3, dev)
    fig = roofline(
        [("copy", copy), ("mm", achieved(Work(2 * 4096**3, 3 * 2 * 4096**2, "bf16"), 2e-4, dev))]
    )
    from bokeh.models import ColumnDataSource

    sources = [
        m for m in fig.figure.references() if isinstance(m, ColumnDataSource) and "label" in m.data
    ]
    assert [s.data["label"] for s in sources] == [["mm"]]
    with pytest.raises(TypeError):
        roofline([("bad", 1.0)])
