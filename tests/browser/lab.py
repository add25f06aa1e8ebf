"""A real JupyterLab server and Debian's Chromium driven by Playwright: what a notebook user sees.

Used by the browser tests' fixtures, and runnable by hand: ``python -m tests.browser.lab NB.ipynb
OUT_DIR`` opens a notebook, runs it in the browser and writes screenshots.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..helpers import CHROMIUM

# The width of a notebook's output area a user with a laptop-sized window sees (the layout the tests
# check).
OUTPUT_WIDTH = 950


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def notary_dir(root: pathlib.Path) -> pathlib.Path:
    return root.parent / (root.name + "-state") / "notary"


def trust(path: pathlib.Path, root: pathlib.Path) -> None:
    """Sign a notebook for the server that serves ``root`` (as `jupyter trust` would): its outputs
    run scripts."""
    import nbformat
    from nbformat.sign import NotebookNotary

    notary_dir(root).mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(path, as_version=4)
    NotebookNotary(data_dir=str(notary_dir(root))).sign(nb)


def write_notebook(path: pathlib.Path, cells: list[str]) -> None:
    """A notebook of these code cells, for the Python 3 kernel."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)


@dataclass
class Lab:
    url: str
    token: str
    root: pathlib.Path

    def notebook_url(self, name: str, workspace: str) -> str:
        # A fresh workspace (and ?reset) so that tabs restored from earlier runs do not open.
        return f"{self.url}/lab/workspaces/{workspace}/tree/{name}?reset&token={self.token}"


@contextlib.contextmanager
def jupyter_lab(root: pathlib.Path, log: pathlib.Path) -> Iterator[Lab]:
    """``jupyter lab`` on a free loopback port with its own settings, workspaces and trust database;
    stopped by its process id at the end."""
    port, token = free_port(), secrets.token_hex(16)
    state = notary_dir(root).parent
    notary_dir(root).mkdir(parents=True, exist_ok=True)
    # No news or update toasts over the outputs (they would also ask the internet).
    settings = state / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True})
    )
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={state / 'settings'}",
        f"--LabApp.workspaces_dir={state / 'workspaces'}",
        f"--NotebookNotary.data_dir={state / 'notary'}",
        "--ServerApp.open_browser=False",
        "--LabServerApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    # Its own config and data directories: no user kernelspec or extension changes what runs.
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(state / "config"),
        JUPYTER_DATA_DIR=str(state / "data"),
        PYTHONUNBUFFERED="1",
    )
    url = f"http://127.0.0.1:{port}"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root)
    try:
        deadline = time.monotonic() + 180  # a loaded machine starts it slowly
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    json.load(r)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"jupyter lab did not start:\n{log.read_text()[-3000:]}"
                    ) from None
                time.sleep(0.3)
        yield Lab(url, token, root)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Browser:
    page: object
    errors: list[str]


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 2400) -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            errors: list[str] = []
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.on("pageerror", lambda e: errors.append(str(e)))
            yield Browser(page, errors)
        finally:
            browser.close()


def open_notebook(page, lab: Lab, name: str, workspace: str) -> None:
    """Open a notebook in a fresh workspace and wait until its kernel is connected and idle."""
    page.goto(lab.notebook_url(name, workspace), wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    wait_for_kernel(page, lab, name)
    fit_output_width(page)


def kernel_state(lab: Lab, name: str) -> str | None:
    """The execution state the server reports for the kernel of notebook ``name``'s session (None
    while it has none)."""
    url = f"{lab.url}/api/sessions?token={lab.token}"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            sessions = json.load(r)
    except OSError:
        return None
    for s in sessions:
        if s.get("path") == name and s.get("kernel"):
            return s["kernel"].get("execution_state")
    return None


#: The toolbar's kernel indicator: its data-status is the kernel's status as the page sees it
#: ("connecting", "starting", "unknown" until the page's own connection to the kernel is up).
KERNEL_IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle']"


def wait_for_kernel(page, lab: Lab, name: str, timeout_s: float = 180) -> None:
    """Until the server reports the notebook's kernel idle and the page's toolbar does too: a Run All
    clicked while the page is still connecting to its kernel does nothing."""
    deadline = time.monotonic() + timeout_s
    state = None
    while time.monotonic() < deadline:
        state = kernel_state(lab, name)
        if state == "idle" and page.query_selector(KERNEL_IDLE):
            return
        page.wait_for_timeout(250)
    shown = page.eval_on_selector_all(
        ".jp-Notebook-ExecutionIndicator", "els => els.map(e => e.dataset.status)"
    )
    raise TimeoutError(f"{name}'s kernel: {state} on the server, {shown} in the page")


def fit_output_width(page) -> None:
    """Size the window so that the notebook's cells (and so the output area) are OUTPUT_WIDTH px
    wide, the file browser open beside them as a user has it."""
    for _ in range(3):
        w = page.evaluate(
            "() => { const o = document.querySelector('.jp-Notebook .jp-Cell "
            ".jp-InputArea-editor');"
            " return o ? o.getBoundingClientRect().width : 0; }"
        )
        if not w or abs(w - OUTPUT_WIDTH) < 2:
            return
        vp = page.viewport_size
        page.set_viewport_size(
            {"width": int(vp["width"] + OUTPUT_WIDTH - w), "height": vp["height"]}
        )
        page.wait_for_timeout(300)


#: Arms a watch on the notebook's prompts: ``window.__gmQueued`` turns true once a prompt shows
#: ``[*]`` (a cell queued or running: JupyterLab shows it as it sends the cell, before any reply).
WATCH_PROMPTS_JS = r"""() => {
  window.__gmQueued = false;
  if (window.__gmWatch) window.__gmWatch.disconnect();
  const nb = document.querySelector('.jp-Notebook');
  const look = () => {
    if ([...nb.querySelectorAll('.jp-InputPrompt')].some(p => p.textContent.includes('*')))
      window.__gmQueued = true;
  };
  window.__gmWatch = new MutationObserver(look);
  window.__gmWatch.observe(nb, {subtree: true, childList: true, characterData: true});
}"""
DONE = re.compile(r"\[\s*\d+\s*\]:?")


def prompts(page) -> list[str]:
    return page.eval_on_selector_all(
        ".jp-CodeCell .jp-InputPrompt", "els => els.map(e => e.textContent.trim())"
    )


def queue(page, run: Callable[[], None], what: str, timeout_s: float = 60) -> None:
    """Do ``run`` (a click or keys that run cells), and do it again every 2 s until a cell's prompt
    shows it queued: JupyterLab drops a run asked for while the page has no kernel connection yet
    (the prompts stay ``[ ]``). Fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        page.wait_for_selector(KERNEL_IDLE, timeout=int(timeout_s * 1000))
        page.evaluate(WATCH_PROMPTS_JS)
        run()
        for _ in range(20):
            page.wait_for_timeout(100)
            if page.evaluate("() => window.__gmQueued"):
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: no cell was queued in {timeout_s:g} s: {prompts(page)}")
        if page.query_selector(".jp-Dialog"):  # e.g. a kernel chooser: not this run's answer
            page.keyboard.press("Escape")


def run_all(page, n_code_cells: int, timeout_s: float = 300) -> None:
    """Run > Run All Cells from the menu bar (again until a cell is queued), then wait until every
    code cell has an execution count."""

    def click() -> None:
        page.click(".jp-Notebook")
        page.click("text=Run >> nth=0")
        page.click("li.lm-Menu-item:has-text('Run All Cells')")

    queue(page, click, "Run All Cells")
    deadline = time.monotonic() + timeout_s
    shown: list[str] = []
    stopped = 0  # checks in a row with the kernel idle and no cell queued, yet cells not run
    while time.monotonic() < deadline:
        shown = prompts(page)
        done = [p for p in shown if DONE.fullmatch(p)]
        idle = page.query_selector(KERNEL_IDLE) is not None
        if len(done) >= n_code_cells and idle:
            page.wait_for_timeout(1500)  # outputs (and their scripts) settle
            return
        stopped = stopped + 1 if idle and not any("*" in p for p in shown) else 0
        if stopped >= 10:  # a cell failed: the kernel dropped the cells queued after it
            break
        page.wait_for_timeout(500)
    outputs = page.eval_on_selector_all(
        ".jp-CodeCell .jp-OutputArea-output", "els => els.map(e => e.innerText.slice(0, 800))"
    )
    raise TimeoutError(f"the notebook did not finish: prompts {shown}, outputs {outputs}")


def run_cells(page, indices: list[int], timeout_s: float = 180) -> None:
    """Run some cells, one by one (click into the cell, Shift+Enter, again until it is queued), each
    until it has an execution count and the kernel is idle."""
    for i in indices:
        cell = page.query_selector_all(".jp-Notebook .jp-CodeCell")[i]

        def press(cell=cell) -> None:
            cell.scroll_into_view_if_needed()
            cell.query_selector(".jp-InputArea-editor").click()
            page.keyboard.press("Shift+Enter")

        queue(page, press, f"cell {i}")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            prompt = cell.query_selector(".jp-InputPrompt").text_content().strip()
            if DONE.fullmatch(prompt) and page.query_selector(KERNEL_IDLE):
                break
            page.wait_for_timeout(300)
        else:
            raise TimeoutError(f"cell {i} did not finish: prompts {prompts(page)}")
    page.wait_for_timeout(1500)


def save(page) -> None:
    page.click(".jp-Notebook")
    page.keyboard.press("Control+s")
    page.wait_for_timeout(1500)


# --- what is measured in the page
# -------------------------------------------------------------------------------

# Functions the page measurements share: every element matching a selector, Bokeh's shadow roots
# included; the painted pixels of a canvas (one in 4 sampled); the lines an element's text takes.
PAGE_HELPERS_JS = r"""
  const deep = (root, sel) => {
    const out = [...root.querySelectorAll(sel)];
    for (const el of root.querySelectorAll('*')) if (el.shadowRoot) out.push(...deep(el.shadowRoot, sel));
    return out;
  };
  const painted = (c) => {
    try {
      const ctx = c.getContext('2d');
      if (!ctx || !c.width || !c.height) return 0;
      const d = ctx.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 16) if (d[i] > 0) n++;
      return n;
    } catch (e) { return 0; }
  };
  const lines = (cell) => {
    const r = document.createRange();
    r.selectNodeContents(cell);
    return new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top))).size;
  };
"""

# Per report output: its cell's index, whether the timeline drew (a canvas with painted pixels,
# found through Bokeh's shadow roots), the blank space under the plot, and the table cells whose
# words broke.
MEASURE_JS = (
    "() => {"
    + PAGE_HELPERS_JS
    + r"""
  // A word broken across lines: one run of non-space characters of a text node whose Range has several rects
  // (a <wbr> ends a text node, so a name wrapped at a token boundary is not a broken word; nor is a line that
  // ends after a hyphen, as in "column-major").
  const brokenWords = (cell) => {
    const bad = [];
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let t = walker.nextNode(); t; t = walker.nextNode()) {
      if (!t.parentElement || !t.parentElement.offsetParent) continue; // inside a closed <details>
      const re = /[^\s-]+-?/g;
      let m;
      while ((m = re.exec(t.data))) {
        const r = document.createRange();
        r.setStart(t, m.index);
        r.setEnd(t, m.index + m[0].length);
        const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
        if (tops.size > 1) bad.push(m[0]);
      }
    }
    return bad;
  };
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
  const reports = [];
  cells.forEach((cell, index) => {
    for (const rep of cell.querySelectorAll('.gm-report')) {
      const out = {cell: index, width: rep.getBoundingClientRect().width, broken: [], multiline: [], timeline: null};
      out.summary = (rep.querySelector('.gm-summary') || {}).textContent || '';
      out.text = rep.innerText.slice(0, 600);
      const kt = rep.querySelector('table.gm-kernels');
      out.kernel_rows = kt ? kt.querySelectorAll(':scope > tbody > tr').length : 0;
      for (const table of rep.querySelectorAll('table')) {
        for (const td of table.querySelectorAll(':scope > tbody > tr > td, :scope > thead > tr > th')) {
          for (const w of brokenWords(td)) out.broken.push(w);
          if (!td.classList.contains('gm-name') && td.offsetParent && lines(td) > 1) out.multiline.push(td.textContent);
        }
      }
      const tl = rep.querySelector('.gm-timeline');
      const note = rep.querySelector('.gm-note');
      out.note = note && note.offsetParent ? note.textContent : '';
      if (tl) {
        // The timeline's box (an iframe, or a <div> in the output) against the figure Bokeh drew in it: the
        // space below the figure is the blank band.
        const frame = tl.tagName === 'IFRAME' ? tl : null;
        const doc = frame ? frame.contentDocument : null;
        const inner = doc ? doc.querySelector('.gm-timeline') : tl;
        const plot = inner ? inner.querySelector('.gm-plot') : null;
        const fig = plot ? plot.firstElementChild : null;
        const canvases = deep(doc || tl, 'canvas');
        const box = tl.getBoundingClientRect();
        const figBox = fig ? fig.getBoundingClientRect() : null;
        const figBottom = figBox ? figBox.bottom + (frame ? box.top : 0) : box.top;
        out.timeline = {
          iframe: !!frame,
          bokeh: !!(frame ? (frame.contentWindow || {}).Bokeh : window.Bokeh),
          canvases: canvases.length,
          painted: canvases.reduce((s, c) => s + painted(c), 0),
          height: box.height,
          figure: figBox ? figBox.height : 0,
          blank: box.bottom - figBottom,
        };
      }
      reports.push(out);
    }
  });
  const headings = [...document.querySelectorAll('.jp-Notebook .gm-report h4')].map(h => ({
    text: h.textContent, next: h.nextElementSibling ? h.nextElementSibling.tagName : null}));
  const outputs = cells.map(c => [...c.querySelectorAll('.jp-OutputArea-output')].map(o => o.innerText.slice(0, 300)));
  return {reports, headings, outputs};
}
"""
)


def measure(page) -> dict:
    return page.evaluate(MEASURE_JS)


def shoot(page, out: pathlib.Path, stem: str) -> list[pathlib.Path]:
    """A screenshot of the window and one of each code cell with a report, whole (scrolled into view
    first)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}-window.png"]
    page.screenshot(path=str(paths[0]))
    for i, cell in enumerate(page.query_selector_all(".jp-Notebook .jp-CodeCell")):
        if not cell.query_selector(".gm-report"):
            continue
        cell.scroll_into_view_if_needed()
        page.wait_for_timeout(400)
        p = out / f"{stem}-cell{i}.png"
        cell.screenshot(path=str(p))
        paths.append(p)
    return paths


if __name__ == "__main__":  # by hand: python -m tests.browser.lab NB.ipynb OUT_DIR [--run]
    import tempfile

    nb_path, out_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    root = pathlib.Path(tempfile.mkdtemp()) / "root"
    root.mkdir()
    shutil.copy(nb_path, root / nb_path.name)
    if "--trust" in sys.argv:
        trust(root / nb_path.name, root)
    with jupyter_lab(root, root.parent / "lab.log") as lab, chromium() as b:
        open_notebook(b.page, lab, nb_path.name, "byhand")
        if "--run" in sys.argv:
            n = sum(1 for c in json.loads(nb_path.read_text())["cells"] if c["cell_type"] == "code")
            run_all(b.page, n)
        else:
            b.page.wait_for_timeout(4000)
        print(json.dumps(measure(b.page), indent=1)[:20000])
        print("errors:", b.errors)
        print(shoot(b.page, out_dir, nb_path.stem))
