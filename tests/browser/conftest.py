"""Browser tests: skipped where Chromium, JupyterLab or Playwright is missing (CI installs all
three)."""

from __future__ import annotations

import os
import pathlib

import pytest

from .lab import CHROMIUM


def pytest_collection_modifyitems(config, items):
    missing = []
    if CHROMIUM is None:
        missing.append("Chromium (apt-get install chromium)")
    for module in ("jupyterlab", "playwright"):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"{module} (pip install -e '.[test]')")
    if missing:
        skip = pytest.mark.skip(reason="needs " + ", ".join(missing))
        for item in items:
            if "tests/browser/" in item.nodeid.replace(os.sep, "/"):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def browser_out(tmp_path_factory) -> pathlib.Path:
    """Where screenshots go: $GPUMAGIC_BROWSER_OUT, else a pytest temporary directory (printed in
    the summary)."""
    out = os.environ.get("GPUMAGIC_BROWSER_OUT")
    path = pathlib.Path(out) if out else tmp_path_factory.mktemp("browser")
    path.mkdir(parents=True, exist_ok=True)
    return path
