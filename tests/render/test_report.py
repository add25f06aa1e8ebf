"""ProfileReport HTML: escaping, standalone rendering in a real browser, Chrome-trace export."""

from __future__ import annotations

import pathlib
import re

import pytest

from gpumagic import load_trace
from gpumagic.render.report import ProfileReport
from gpumagic.trace import Trace, frame

from ..helpers import DATA, headless_chromium, needs_chromium

EVIL = "void k<a&b></script><img src=x onerror=alert(1)>\"'"


def evil_trace() -> Trace:
    ks = [
        dict(name=EVIL, start=i * 1000, end=i * 1000 + 500, device=0, stream=7, correlation=i)
        for i in range(5)
    ]
    return Trace(kernels=frame("kernels", ks), meta={"device": "GPU <&>", "label": "cell"})


def test_names_are_escaped_everywhere_in_the_html():
    html = ProfileReport(evil_trace(), timeline=True)._repr_html_()
    assert EVIL not in html
    assert "<img src=x" not in html and "</script><img" not in html
    assert "&lt;a&amp;b&gt;" in html or "&amp;lt;a&amp;amp;b&amp;gt;" in html
    assert "GPU &lt;&amp;&gt;" in html


def test_text_repr_and_dataframe():
    t = load_trace(DATA / "torch_matmul_4096.json.gz")
    t.meta["label"] = "cell:matmul"
    r = ProfileReport(t)
    text = str(r)
    assert text.splitlines()[0].startswith("NVIDIA H100 80GB HBM3 \u00b7 GPU busy")
    assert "cuBLAS FP32 GEMM (FFMA)" in text
    df = r.to_dataframe()
    assert {"Short", "Family", "Tensor cores", "Precision"} <= set(df.columns)
    assert not df["Tensor cores"].iloc[0] and df["Tensor cores"].iloc[0] is not None


def test_chrome_trace_export_loads_back(tmp_path):
    t = load_trace(DATA / "torch_block.json.gz")
    out = tmp_path / "t.json"
    ProfileReport(t).to_chrome_trace(out)
    back = load_trace(out)
    assert len(back.kernels) == len(t.kernels)
    assert back.kernel_summary()["Total Time (ns)"].sum() == pytest.approx(
        t.kernel_summary()["Total Time (ns)"].sum(), abs=20
    )


def render(page: pathlib.Path, png: pathlib.Path, tmp: pathlib.Path) -> str:
    """Render a page in headless Chromium (no network); return its console log."""
    proc = headless_chromium(
        page, tmp / "profile", f"--screenshot={png}", "--window-size=1300,1100"
    )
    return "\n".join(line for line in proc.stderr.splitlines() if "CONSOLE" in line)


def timeline_drawn(png: pathlib.Path) -> float:
    """Share of coloured (non-grey) pixels: the timeline's boxes are the only saturated colour on
    the page."""
    import numpy as np
    from PIL import Image

    px = np.asarray(Image.open(png).convert("RGB")).reshape(-1, 3).astype(int)
    return float(((px.max(axis=1) - px.min(axis=1)) > 60).mean())


@needs_chromium
def test_saved_report_renders_in_a_browser_with_the_timeline(tmp_path):
    t = load_trace(DATA / "torch_block.json.gz")
    t.meta["label"] = "cell:block"
    t.kernels.loc[0, "name"] = EVIL  # a hostile name must not break the page
    page = tmp_path / "report.html"
    ProfileReport(t, label="cell:block").save_html(page)
    log = render(page, tmp_path / "r.png", tmp_path)
    assert "document idle" in log, log  # BokehJS ran
    assert not re.search(r"Uncaught|ReferenceError|TypeError|SyntaxError", log), log
    assert timeline_drawn(tmp_path / "r.png") > 0.01


@needs_chromium
def test_the_browser_check_fails_when_bokeh_resources_are_missing(tmp_path, monkeypatch):
    # A page without BokehJS (what a CDN link is on an offline machine): the check above must catch
    # it.
    from gpumagic.render import embed

    monkeypatch.setattr(embed, "bokehjs", lambda: "")
    t = load_trace(DATA / "torch_block.json.gz")
    page = tmp_path / "cdn.html"
    ProfileReport(t).save_html(page)
    log = render(page, tmp_path / "c.png", tmp_path)
    assert "document idle" not in log
    assert timeline_drawn(tmp_path / "c.png") < 0.01


# --- what a notebook user sees (the browser test in tests/browser checks the same in a real
# JupyterLab) -----------


def block_report(**kw) -> ProfileReport:
    return ProfileReport(load_trace(DATA / "torch_block.json.gz"), label="block", **kw)


def test_kernel_names_wrap_between_tokens_and_numbers_never_wrap():
    from gpumagic.render.tables import breakable

    assert breakable("sm80_xmma_gemm") == "sm80_<wbr>xmma_<wbr>gemm"
    assert breakable("void at::native::k<4, float>(int)") == (
        "void at::<wbr>native::<wbr>k&lt;<wbr>4,<wbr> float&gt;(<wbr>int)"
    )
    html = block_report(timeline=False)._repr_html_()
    assert "anywhere" not in html  # the rule that broke "cuBLAS" into "cuB LAS"
    assert "sm80_<wbr>xmma_<wbr>gemm" in html
    kernels = html[html.index("<table class='gm-kernels'") :]
    kernels = kernels[: kernels.index("</table>")]
    numbers = re.findall(r"<td style='([^']*)'>[\d.]+%</td>", kernels)
    assert numbers and all("white-space:nowrap" in s for s in numbers)
    heads = re.findall(r"<th [^>]*>([^<]*)</th>", kernels)
    assert heads == [
        "Time",
        "Total",
        "Calls",
        "Avg",
        "Kernel",
        "Library",
        "Op",
        "Tensor cores",
        "Precision",
        "Rate",  # the block's ops recorded shapes: their work is counted
    ]
    assert "Med 18.7 ms" in kernels  # the other statistics moved into the expanded row


def test_summary_line_counts_in_the_singular_too():
    assert (
        "\u00b7 1 kernel \u00b7"
        in ProfileReport(load_trace(DATA / "torch_matmul_4096.json.gz")).summary_line()
    )
    assert "10 kernels, 1 memory op \u00b7" in block_report().summary_line()


def test_missing_input_shapes_show_empty_not_nan():
    ops = [dict(name="aten::add", start=0, end=100, thread=1, depth=0, shapes=None, external_id=1)]
    html = ProfileReport(Trace(ops=frame("ops", ops)), timeline=False)._repr_html_()
    assert "aten::<wbr>add" in html and ">nan<" not in html and "None" not in html


def test_gpu_streams_sort_as_numbers_and_the_axis_unit_fits_the_span():
    from gpumagic.render.timeline import time_unit, timeline_figure
    from gpumagic.render.timeline_lanes import lanes as _lanes

    ks = [
        dict(
            name="k", start=i * 10**9, end=i * 10**9 + 5 * 10**8, device=0, stream=s, correlation=i
        )
        for i, s in enumerate([13, 143, 159, 17, 21, 7] * 5)
    ]
    t = Trace(kernels=frame("kernels", ks))
    assert [label for label, _, _ in _lanes(t)] == [
        f"GPU stream {s}" for s in (7, 13, 17, 21, 143, 159)
    ]
    assert (
        time_unit(30e9) == ("s", 1e9)
        and time_unit(3e6) == ("ms", 1e6)
        and time_unit(5e4)[0] == "\u00b5s"
    )
    fig = timeline_figure(t)
    assert fig.xaxis[0].axis_label == "s since capture start"
    assert (
        max(max(r.data_source.data["right"]) for r in fig.renderers) < 31
    )  # seconds, not 30000 ms


def test_timeline_has_a_family_legend_and_a_hover_that_wraps():
    from bokeh.models import HoverTool, Legend

    fig = block_report()._timeline_figure()
    legend = next(m for m in fig.above if isinstance(m, Legend))
    labels = [i.label["value"] for i in legend.items]
    assert {"cuBLAS", "CUTLASS 2.x", "PyTorch ATen", "memory op", "CPU op", "CUDA API"} <= set(
        labels
    )
    hover = next(t for t in fig.tools if isinstance(t, HoverTool))
    assert "max-width" in hover.tooltips and "overflow-wrap" in hover.tooltips


def test_bokehjs_travels_once_per_kernel_session_in_a_notebook():
    from gpumagic.render import embed

    embed.ONCE.forget()
    carrier = "type='text/x-gpumagic-bokehjs'"
    first = block_report()._repr_mimebundle_()["text/html"]
    second = block_report()._repr_mimebundle_()["text/html"]
    assert first.count(carrier) == 1 and carrier not in second
    assert len(second) < 200_000 < 1_000_000 < len(first)
    for html in (first, second):
        assert (
            "<style" not in html and "<iframe" not in html
        )  # styles inline; the figure drawn in the output
        assert "gm-plot" in html and "embed_item" in html
    # Where each output has a window of its own (Colab), each report brings BokehJS, in an iframe.
    assert "<iframe" in block_report(bokehjs="every")._repr_mimebundle_()["text/html"]


def test_a_new_run_of_the_carriers_cell_carries_bokehjs_again():
    from gpumagic.render.embed import BokehJSOnce

    once, cell = BokehJSOnce(), ["a", 1]
    once.current_cell = lambda: tuple(cell)
    assert once.take() and not once.take()  # a second report in the same run
    cell[:] = ["b", 2]
    assert not once.take()
    cell[:] = ["a", 3]  # the carrier's cell runs again: its old output (and BokehJS) is replaced
    assert once.take()


def test_untrusted_view_keeps_styles_inline_and_says_why_there_is_no_timeline():
    from gpumagic.render.embed import UNTRUSTED_NOTE

    html = block_report()._repr_mimebundle_()["text/html"]
    assert html.index(esc_note(UNTRUSTED_NOTE)) > html.index("gm-kernels")
    assert (
        "<h4" not in html.split("gm-kernels")[1]
    )  # no bare "Timeline" heading left over without its plot
    assert re.search(r"<td style='[^']*white-space:nowrap", html)
    iframe = block_report()._repr_html_()
    assert esc_note(UNTRUSTED_NOTE) in iframe.split("<iframe")[0]


def esc_note(s: str) -> str:
    import html

    return html.escape(s)


def test_the_iframe_is_exactly_as_tall_as_its_figure():
    r = block_report()
    height = int(r._timeline_figure().height)
    html = r._repr_html_()
    assert f"height:{height}px" in html.split("<iframe")[1].split(">")[0]
    assert "ResizeObserver" in html  # and the page inside keeps it so once drawn


def test_a_lane_past_its_glyph_limit_is_bucketed_without_losing_events():
    """Events beyond the limit merge into time buckets: every event counted once, each box spanning
    its events and named after its longest one; nested ranges bucket per depth."""
    import numpy as np
    import pandas as pd

    from gpumagic.render.timeline import _rows

    rng = np.random.default_rng(1)
    n = 20_000
    start = np.cumsum(rng.integers(100, 1_000, n))
    dur = rng.integers(10, 2_000, n)
    names = np.array(
        ["void short_kernel<int>(int)", "void long_kernel<float>(float)"], dtype=object
    )
    ks = dict(
        name=names[(dur > 1_500).astype(int)],
        start=start,
        end=start + dur,
        device=0,
        stream=7,
        correlation=0,
    )
    ranges = [
        dict(
            text=f":r{i}",
            start=int(start[i * 10]),
            end=int(start[i * 10] + 50_000),
            thread=1,
            depth=0,
        )
        for i in range(n // 10)
    ]
    nested = [dict(r, start=r["start"] + 1, end=r["end"] - 1, depth=1) for r in ranges]
    t = Trace(kernels=frame("kernels", pd.DataFrame(ks)), nvtx=frame("nvtx", ranges + nested))
    rows, *_ = _rows(t, 100)
    gpu = rows[rows["group"] != "nvtx"]
    assert len(gpu) <= 100 and gpu["count"].sum() == n
    nv = rows[rows["group"] == "nvtx"]
    assert (
        nv["count"].sum() == len(ranges) + len(nested) and nv["top"].nunique() == 2
    )  # one row of boxes per depth
    merged = gpu[gpu["count"] > 1]
    assert merged["name"].str.match(r"\d+ events, longest: ").all()
    w0 = int(start.min()) - int(t.window()[0])
    assert (merged["t_end"] > merged["t_start"]).all() and gpu["t_start"].min() == w0
    assert "long_kernel" in " ".join(merged["raw"])  # the longest event of a bucket names it


def test_every_kernel_family_has_a_timeline_colour_and_label():
    from gpumagic.kernels import FAMILIES
    from gpumagic.render.timeline import FAMILY_COLORS, FAMILY_LABELS

    assert set(FAMILIES) <= set(FAMILY_COLORS) and set(FAMILIES) <= set(FAMILY_LABELS)
