"""What the tests share that is not a fixture: where the repository and the committed fixtures are,
the stand-in tools, the system's Chromium and a saved page opened in it without a window, a gzipped
fixture unpacked to a path, and a timing result made of noisy samples.

Tests import these (``from ..helpers import DATA``) instead of computing paths from their own file,
so that a test module can move between folders without its paths changing meaning."""

from __future__ import annotations

import gzip
import os
import pathlib
import random
import shutil
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from gpumagic.timing import TimingResult

ROOT = pathlib.Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
DATA = TESTS / "data"
#: The stand-ins for Nsight Systems and Nsight Compute that the CPU tests run in their place.
FAKE_NSYS = str(TESTS / "fake_nsys" / "nsys")
FAKE_NCU = str(TESTS / "fake_ncu" / "ncu")
#: The Python the stand-in ncu runs its target with (it records the command line it was given).
FAKE_NCU_PYTHON = str(TESTS / "fake_ncu" / "python")
CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Chromium (apt-get install chromium)"
)


def gunzip(src: str | pathlib.Path, dst: str | pathlib.Path) -> pathlib.Path:
    """``src`` (a committed ``.gz`` fixture) unpacked to ``dst``; returns ``dst``."""
    with gzip.open(src) as f, open(dst, "wb") as out:
        shutil.copyfileobj(f, out)
    return pathlib.Path(dst)


def headless_chromium(
    page: pathlib.Path, profile: pathlib.Path, *flags: str
) -> subprocess.CompletedProcess[str]:
    """A saved page opened in Chromium without a window or network (``profile``: its own user data
    folder), its scripts given 8 s of virtual time; ``flags`` say what to take (``--screenshot=…``,
    ``--dump-dom``). The page's console lines are in the returned process's stderr."""
    cmd = [
        CHROMIUM,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=8000",
        *flags,
        page.as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def fake_result(
    median: float = 1e-3, n: int = 60, seed: int = 0, spread: float = 0.01, **kw
) -> TimingResult:
    """A host-clock result of ``n`` samples around ``median`` (Gaussian, ``spread`` relative, from
    ``seed``), as the history saves it."""
    from gpumagic.timing import TimingResult

    rng = random.Random(seed)
    samples = [median * (1 + rng.gauss(0, spread)) for _ in range(n)]
    return TimingResult(
        samples=samples, calls_per_sample=10, device=kw.pop("device", "CPU"), backend="host", **kw
    )


def leftovers(tmp_path: pathlib.Path) -> list[str]:
    """Live processes whose command line names a path under ``tmp_path`` (a test's own run: the
    tool, a launcher, ranks, the cell's processes), each as "pid: command line"."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = (
                pathlib.Path(f"/proc/{pid}/cmdline")
                .read_bytes()
                .decode(errors="replace")
                .split("\0")
            )
            state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):  # gone meanwhile
            continue
        if state != "Z" and any(str(tmp_path) in a for a in args):
            found.append(f"{pid}: {' '.join(args)}")
    return found


def settle(tmp_path: pathlib.Path, seconds: float = 3.0) -> list[str]:
    """:func:`leftovers` once they are gone, or after ``seconds`` (a stopped process takes a
    moment to be reaped)."""
    deadline = time.monotonic() + seconds
    while (left := leftovers(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left
