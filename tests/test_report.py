"""ProfileReport HTML: escaping, standalone rendering in a real browser, Chrome-trace export."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

from gpumagic import load_trace
from gpumagic.render.report import ProfileReport
from gpumagic.trace import Trace, frame

DATA = pathlib.Path(__file__).parent / "data"
EVIL = "void k<a&b></script><img src=x onerror=alert(1)>\"'"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def evil_trace() -> Trace:
    ks = [dict(name=EVIL, start=i * 1000, end=i * 1000 + 500, device=0, stream=7, correlation=i) for i in range(5)]
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
    cmd = [
        CHROMIUM,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=8000",
        f"--screenshot={png}",
        "--window-size=1300,1100",
        page.as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return "\n".join(line for line in proc.stderr.splitlines() if "CONSOLE" in line)


def timeline_drawn(png: pathlib.Path) -> float:
    """Share of coloured (non-grey) pixels: the timeline's boxes are the only saturated colour on the page."""
    import numpy as np
    from PIL import Image

    px = np.asarray(Image.open(png).convert("RGB")).reshape(-1, 3).astype(int)
    return float(((px.max(axis=1) - px.min(axis=1)) > 60).mean())


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install chromium)")
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


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install chromium)")
def test_the_browser_check_fails_when_bokeh_resources_are_missing(tmp_path, monkeypatch):
    # CDN resources on an offline machine: what the report must never depend on. The check above must catch it.
    import bokeh.resources

    monkeypatch.setattr(bokeh.resources, "INLINE", bokeh.resources.CDN)
    t = load_trace(DATA / "torch_block.json.gz")
    page = tmp_path / "cdn.html"
    ProfileReport(t).save_html(page)
    log = render(page, tmp_path / "c.png", tmp_path)
    assert "document idle" not in log
    assert timeline_drawn(tmp_path / "c.png") < 0.01
