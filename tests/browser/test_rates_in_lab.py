"""The answers to "out of what?" in a real JupyterLab: the %gputime line with its rate, an Nsight
Compute report with its Bokeh roofline (read from the committed ncu CSV fixture), the peaks table,
and a comparison and a sweep with their plots, at the output width users have."""

from __future__ import annotations

import time

import pytest

from ..helpers import DATA
from .lab import (
    PAGE_HELPERS_JS,
    chromium,
    jupyter_lab,
    open_notebook,
    run_all,
    shoot,
    write_notebook,
)

CELLS = [
    f"%load_ext gpumagic\nimport pathlib, torch, gpumagic\nDATA = pathlib.Path({str(DATA)!r})\n"
    "x = torch.randn(256, 256)\n%config GpuMagics.time_budget = 0.05",
    "%gputime -r 20 x @ x",
    "gpumagic.load_ncu(DATA / 'ncu' / 'tiny.raw.csv')",
    "gpumagic.peaks()",
    "%%gputime --compare\nx @ x  # mm\nx + x  # add",
    "%%gputime --sweep n=32,64,128,256 a = torch.randn(n, n)\na @ a",
]

# Per output cell: its text, its width, the painted pixels of its canvases (Bokeh draws in shadow
# roots), and table cells whose numbers wrapped onto a second line.
MEASURE_JS = (
    "() => {"
    + PAGE_HELPERS_JS
    + r"""
  return [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')].map(cell => {
    const outs = [...cell.querySelectorAll('.jp-OutputArea-output')];
    const numbers = outs.flatMap(o => [...o.querySelectorAll('td')])
      .filter(td => /^[\d.,\s]+[a-zA-Zµ/%]*$/.test(td.textContent.trim()) && td.offsetParent);
    return {
      text: outs.map(o => o.innerText).join('\n'),
      width: Math.max(0, ...outs.map(o => o.scrollWidth)),
      area: Math.max(0, ...outs.map(o => o.getBoundingClientRect().width)),
      painted: outs.flatMap(o => deep(o, 'canvas')).reduce((s, c) => s + painted(c), 0),
      rows: outs.flatMap(o => [...o.querySelectorAll('tbody > tr')]).length,
      wrapped: numbers.filter(td => lines(td) > 1).map(td => td.textContent),
    };
  });
}
"""
)


@pytest.fixture(scope="module")
def rates_run(tmp_path_factory, browser_out):
    root = tmp_path_factory.mktemp("lab-rates") / "root"
    root.mkdir()
    write_notebook(root / "rates.ipynb", CELLS)
    with jupyter_lab(root, root.parent / "lab.log") as lab, chromium() as b:
        page = b.page
        open_notebook(page, lab, "rates.ipynb", "rates")
        run_all(page, len(CELLS))
        deadline = time.monotonic() + 90
        while True:  # until the roofline has drawn (or the time is up)
            cells = page.evaluate(MEASURE_JS)
            if all(cells[i]["painted"] > 100 for i in (2, 4, 5)) or time.monotonic() > deadline:
                break
            page.wait_for_timeout(500)
        shoot(page, browser_out, "rates")
        return {"cells": cells, "errors": list(b.errors)}


def test_the_gputime_line_carries_its_rate(rates_run):
    text = rates_run["cells"][1]["text"]
    assert "per call on CPU" in text and "FLOP/s fp32" in text, text
    assert "Traceback" not in text


def test_the_ncu_report_draws_its_roofline_inside_the_output_area(rates_run):
    cell = rates_run["cells"][2]
    assert "Traceback" not in cell["text"], cell["text"]
    assert "cuBLAS FP32 GEMM" in cell["text"] and "Limiter" in cell["text"], cell["text"]
    assert cell["painted"] > 100, cell  # Bokeh drew the roofline
    assert cell["width"] <= cell["area"] + 2, (
        cell
    )  # nothing wider than the output area: no horizontal scroll
    assert not cell["wrapped"], cell["wrapped"]
    assert not rates_run["errors"], rates_run["errors"]


def test_the_peaks_table_fits_and_keeps_numbers_on_one_line(rates_run):
    cell = rates_run["cells"][3]
    assert "H100" in cell["text"] and "GB10" in cell["text"], cell["text"][:300]
    assert cell["rows"] >= 10
    assert cell["width"] <= cell["area"] + 2, cell
    assert not cell["wrapped"], cell["wrapped"]


@pytest.mark.parametrize(
    "index, words", [(4, ["Speed-up", "baseline"]), (5, ["Sweep of", "n: 32"])]
)
def test_compare_and_sweep_draw_their_plots_inside_the_output_area(rates_run, index, words):
    cell = rates_run["cells"][index]
    assert "Traceback" not in cell["text"], cell["text"]
    assert all(w in cell["text"] for w in words), cell["text"][:400]
    assert cell["painted"] > 100, cell  # Bokeh drew the chart
    assert cell["width"] <= cell["area"] + 2, cell
    assert not cell["wrapped"], cell["wrapped"]
