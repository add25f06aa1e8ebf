"""%%gpuprofile in a real JupyterLab, driven through Debian's Chromium: what a notebook user sees.

One notebook is run in the browser (Run > Run All Cells): %%gpuprofile cells on the CPU, and reports
of the GPU traces committed in tests/data loaded with gpumagic.load_trace, so kernel tables appear.
Then it is saved and the page reloaded (JupyterLab renders the saved outputs again), and a copy is
opened untrusted (as after a git clone). The screenshots go to $GPUMAGIC_BROWSER_OUT (or a pytest
temporary directory).
"""

from __future__ import annotations

import json
import pathlib
import re
import time

import pytest

from ..helpers import DATA
from .lab import (
    chromium,
    jupyter_lab,
    measure,
    open_notebook,
    run_all,
    run_cells,
    save,
    shoot,
    trust,
    write_notebook,
)

LAST = "last expression: 256"
CELLS = [
    "%load_ext gpumagic\nimport pathlib, torch, gpumagic\nfrom IPython.display import HTML\n"
    "from gpumagic.render.report import ProfileReport\n"
    f"DATA = pathlib.Path({str(DATA)!r})\nx = torch.randn(256, 256)",
    "%%gpuprofile -w 0\ny = (x @ x).relu()",
    # The cell's last expression: shown under the report as a plain cell shows it.
    f"%%gpuprofile -w 0 -n 2\nz = torch.softmax(x, dim=-1)\n'{LAST[:-3]}' + str(z.shape[0])",
    "ProfileReport(gpumagic.load_trace(DATA / 'torch_block.json.gz'), label='block')",
    "ProfileReport(gpumagic.load_trace(DATA / 'torch_matmul_4096.json.gz'), label='matmul')",
    "%%gpuprofile -w 0 --no-timeline\nw = x + 1",
    # The self-contained form (what _repr_html_ gives other front ends): the timeline in an iframe.
    "HTML(ProfileReport(gpumagic.load_trace(DATA / 'torch_matmul_4096.json.gz'), "
    "label='iframe')._repr_html_())",
]
WITH_TIMELINE = {1, 2, 3, 4, 6}  # the cells whose report draws a timeline
WITH_KERNELS = {3, 4, 6}


def open_all_details(page) -> None:
    page.evaluate(
        "() => document.querySelectorAll('.jp-Notebook .gm-report details').forEach(d => "
        "d.open = true)"
    )
    page.wait_for_timeout(500)


def wait_measured(page, ready, timeout_s: float = 90) -> dict:
    """Measure until ``ready(measurement)`` (or the time is up: the tests then say what is
    missing)."""
    deadline = time.monotonic() + timeout_s
    while True:
        m = measure(page)
        if ready(m) or time.monotonic() > deadline:
            return m
        page.wait_for_timeout(500)


def drawn(m: dict) -> bool:
    """Every timeline has drawn."""
    return {
        r["cell"] for r in m["reports"] if (r["timeline"] or {}).get("painted")
    } >= WITH_TIMELINE


def noted(words: str, cells: set[int]):
    """The reports of these cells show a note saying ``words`` (what else they show, the tests
    say)."""

    def ready(m: dict) -> bool:
        notes = {r["cell"]: r["note"] for r in m["reports"]}
        return all(words in notes.get(i, "") for i in cells)

    return ready


def wait_drawn(page) -> dict:
    return wait_measured(page, drawn)


def hover_a_kernel(page, out: pathlib.Path) -> dict | None:
    """Point at the block report's GPU lane; return the tooltip's box (Bokeh draws it in a shadow
    root)."""
    cells = page.query_selector_all(".jp-Notebook .jp-CodeCell")
    plot = cells[3].query_selector(".gm-plot")
    if plot is None:
        return None
    plot.scroll_into_view_if_needed()
    box = plot.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] - 62)
    page.wait_for_timeout(800)
    page.screenshot(path=str(out / "hover.png"))
    return page.evaluate(
        """() => {
          const deep = (root) => {
            for (const el of root.querySelectorAll('*')) {
              if (el.classList && [...el.classList].some(c => c.startsWith('bk-tooltip') || c === 'bk-Tooltip')
                  && el.getBoundingClientRect().width > 0) return el;
              if (el.shadowRoot) { const f = deep(el.shadowRoot); if (f) return f; }
            }
            return null;
          };
          const t = deep(document);
          if (!t) return null;
          const r = t.getBoundingClientRect();
          return {left: r.left, right: r.right, width: r.width, text: t.innerText.slice(0, 300),
                  viewport: window.innerWidth};
        }"""
    )


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory, browser_out):
    root = tmp_path_factory.mktemp("lab") / "root"
    root.mkdir()
    write_notebook(root / "profile.ipynb", CELLS)
    res: dict = {"out": browser_out}
    t0 = time.monotonic()
    with jupyter_lab(root, root.parent / "lab.log") as lab, chromium() as b:
        page = b.page
        open_notebook(page, lab, "profile.ipynb", "run")
        run_all(page, len(CELLS))
        res["run"] = wait_drawn(page)
        res["run_errors"] = list(b.errors)
        shoot(page, browser_out, "run")
        res["hover"] = hover_a_kernel(page, browser_out)
        open_all_details(page)
        res["expanded"] = measure(page)
        shoot(page, browser_out, "expanded")
        save(page)
        res["saved"] = (root / "profile.ipynb").read_text(encoding="utf-8")

        b.errors.clear()
        page.reload(wait_until="domcontentloaded")
        open_notebook(page, lab, "profile.ipynb", "reload")
        res["reload"] = wait_drawn(page)
        res["reload_errors"] = list(b.errors)
        shoot(page, browser_out, "reload")

        # A copy with different content is not in the server's trust database: opened as after a git
        # clone.
        nb = json.loads(res["saved"])
        nb["metadata"]["copied"] = True
        (root / "untrusted.ipynb").write_text(json.dumps(nb), encoding="utf-8")
        b.errors.clear()
        open_notebook(page, lab, "untrusted.ipynb", "untrusted")
        res["untrusted"] = wait_measured(page, noted("not trusted", WITH_TIMELINE))
        res["untrusted_errors"] = list(b.errors)
        shoot(page, browser_out, "untrusted")

        # Reopened without the output that carried BokehJS (cleared, or its cell ran again): the
        # reports say so, then draw when a report of a new kernel session brings BokehJS.
        nb = json.loads(res["saved"])
        for cell in nb["cells"]:
            for o in cell.get("outputs", []):
                h = o.get("data", {}).get("text/html")
                if h:
                    h = "".join(h) if isinstance(h, list) else h
                    o["data"]["text/html"] = re.sub(
                        r"<script type='text/x-gpumagic-bokehjs'>.*?</script>", "", h, flags=re.S
                    )
        (root / "lost.ipynb").write_text(json.dumps(nb), encoding="utf-8")
        trust(root / "lost.ipynb", root)
        b.errors.clear()
        open_notebook(page, lab, "lost.ipynb", "lost")
        res["lost"] = wait_measured(page, noted("waiting for BokehJS", WITH_TIMELINE - {6}))
        page.query_selector_all(".jp-Notebook .jp-CodeCell")[1].scroll_into_view_if_needed()
        page.screenshot(path=str(browser_out / "lost-window.png"))
        run_cells(page, [0, 4])
        res["healed"] = wait_drawn(page)
        res["lost_errors"] = list(b.errors)
    res["seconds"] = time.monotonic() - t0
    print(f"\nbrowser test: {res['seconds']:.1f} s; screenshots in {browser_out}")
    return res


def reports_by_cell(m: dict) -> dict[int, dict]:
    return {r["cell"]: r for r in m["reports"]}


def test_every_output_renders_without_errors(lab_run):
    m = lab_run["run"]
    assert set(reports_by_cell(m)) == {1, 2, 3, 4, 5, 6}, m["outputs"]
    assert not [o for outs in m["outputs"] for o in outs if "Traceback" in o], m["outputs"]
    assert not lab_run["run_errors"], lab_run["run_errors"]
    for i in WITH_KERNELS:
        assert reports_by_cell(m)[i]["kernel_rows"] >= 1


def test_bokeh_draws_every_timeline_and_no_blank_band(lab_run):
    for i, r in reports_by_cell(lab_run["run"]).items():
        tl = r["timeline"]
        if i not in WITH_TIMELINE:
            assert tl is None, (i, tl)
            continue
        assert tl["bokeh"] and tl["canvases"] and tl["painted"] > 100, (i, tl)
        assert tl["figure"] > 150, (i, tl)
        assert abs(tl["blank"]) <= 2, (
            i,
            tl,
        )  # the box is as tall as the figure: no band under the plot
        assert not r["note"], (i, r["note"])
    assert reports_by_cell(lab_run["run"])[6]["timeline"]["iframe"]


def test_tables_break_no_word_and_numbers_stay_on_one_line(lab_run):
    for stage in ("run", "expanded"):
        for i, r in reports_by_cell(lab_run[stage]).items():
            assert r["width"] <= 1000, (
                stage,
                i,
                r["width"],
            )  # the output area the layout is checked at
            assert not r["broken"], (stage, i, r["broken"][:20])
            assert not r["multiline"], (stage, i, r["multiline"][:20])


def test_the_hover_box_stays_inside_the_window(lab_run):
    tip = lab_run["hover"]
    if tip is None:
        pytest.skip("no tooltip appeared under the pointer")
    assert tip["width"] <= 600 and tip["left"] >= 0 and tip["right"] <= tip["viewport"], tip


def test_bokehjs_travels_once_in_the_saved_notebook(lab_run):
    saved = lab_run["saved"]
    assert saved.count("type='text/x-gpumagic-bokehjs'") == 1  # one report carries BokehJS for all
    assert (
        saved.count("BEGIN bokeh.min.js") == 2
    )  # BokehJS: in that carrier, and in the iframe's own page
    assert len(saved.encode()) < 3_600_000


def test_reopened_notebook_draws_every_timeline(lab_run):
    m = lab_run["reload"]
    assert set(reports_by_cell(m)) == {1, 2, 3, 4, 5, 6}
    for i in WITH_TIMELINE:
        tl = reports_by_cell(m)[i]["timeline"]
        assert tl["painted"] > 100 and abs(tl["blank"]) <= 2, (i, tl)
    assert not lab_run["reload_errors"], lab_run["reload_errors"]


def test_untrusted_copy_shows_summary_and_kernel_table(lab_run):
    m = lab_run["untrusted"]
    reports = reports_by_cell(m)
    assert set(reports) == {1, 2, 3, 4, 5, 6}
    for i, r in reports.items():
        assert r["summary"], i
        assert not r["broken"] and not r["multiline"], (i, r["broken"], r["multiline"])
        if i in WITH_KERNELS:
            assert r["kernel_rows"] >= 1, i
        if (
            i in WITH_TIMELINE
        ):  # no script ran: one line says why, instead of an empty heading or a blank box
            assert "not trusted" in r["note"], (i, r)
            assert not (r["timeline"] or {}).get("painted"), i
    assert not [h for h in m["headings"] if h["text"] == "Timeline"], m["headings"]
    assert not lab_run["untrusted_errors"], lab_run["untrusted_errors"]


def test_the_cells_last_expression_is_shown(lab_run):
    assert LAST in "\n".join(lab_run["run"]["outputs"][2]), lab_run["run"]["outputs"][2]


def test_a_report_that_lost_its_bokehjs_says_so_and_draws_when_another_brings_it(lab_run):
    lost = reports_by_cell(lab_run["lost"])
    for i in WITH_TIMELINE - {6}:  # the iframe report brings its own
        assert "waiting for BokehJS" in lost[i]["note"] and not lost[i]["timeline"]["painted"], (
            i,
            lost[i],
        )
    healed = reports_by_cell(lab_run["healed"])
    for i in WITH_TIMELINE:
        assert healed[i]["timeline"]["painted"] > 100 and not healed[i]["note"], (i, healed[i])
    assert not lab_run["lost_errors"], lab_run["lost_errors"]
