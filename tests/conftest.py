from __future__ import annotations

import os
import pathlib
import shutil

import pytest
from hypothesis import HealthCheck, settings

from .helpers import DATA, gunzip

# One thread per process for torch's CPU kernels (set before torch is first imported, and inherited
# by the kernels and interpreters the tests start): under pytest-xdist every core already runs a
# worker, and intra-op threads on top only oversubscribe the CPU: on a loaded machine a 64×64 matmul
# then waits milliseconds for a thread that another process holds.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

# Hypothesis's 200 ms deadline per example and its "too slow to generate" check measure the machine
# as much as the code: a loaded one misses both with nothing wrong.
settings.register_profile("loaded", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("loaded")


@pytest.fixture(scope="session", autouse=True)
def _history_in_a_temporary_file(tmp_path_factory):
    """Results measured by the tests go to a file of the session's own, never to the user's history
    (``~/.local/share/gpumagic``); subprocesses the tests start inherit it. Tests of the history use
    their own. IPython's own history and profile go to the session's folder too (``IPYTHONDIR``):
    not the user's, and not one SQLite file that the shells of parallel workers write at once."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUMAGIC_HISTORY", str(tmp_path_factory.mktemp("history") / "history.sqlite"))
        mp.setenv("IPYTHONDIR", str(tmp_path_factory.mktemp("ipython")))
        yield


@pytest.fixture(scope="session")
def shell():
    """A real IPython shell with the extension loaded (as in a notebook after %load_ext
    gpumagic)."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpumagic")
    return ip


@pytest.fixture
def ip(shell):
    """The shared shell with a clean user namespace and default settings for each test."""
    before = set(shell.user_ns)
    yield shell
    for name in set(shell.user_ns) - before:
        del shell.user_ns[name]
    for c in shell.configurables:
        if type(c).__name__ == "GpuMagics":
            for trait in c.traits(config=True):
                c.set_trait(trait, c.trait_defaults(trait))


@pytest.fixture
def fresh_recorder():
    """The history recorder's once-per-process notes said afresh, and the stores it opened closed
    after the test."""
    from gpumagic.history import saving as recorder

    recorder._SAID.clear()
    yield recorder
    for store in recorder._STORES.values():
        store.close()
    recorder._STORES.clear()


@pytest.fixture
def hist(tmp_path, monkeypatch, fresh_recorder):
    """A history of the test's own (``GPUMAGIC_HISTORY``), with a fresh recorder."""
    path = tmp_path / "history.sqlite"
    monkeypatch.setenv("GPUMAGIC_HISTORY", str(path))
    return path


@pytest.fixture(scope="session")
def committed_nsys(tmp_path_factory):
    """The committed nsys exports of ``tests/data/nsys``, each unzipped once per session:
    ``committed_nsys("block")`` is the path of ``block.sqlite`` (a str, as ``load_nsys`` takes it).
    Shared by every test: read it, and copy it before changing it."""
    folder = tmp_path_factory.mktemp("nsys")

    def unzipped(name: str) -> str:
        path = folder / f"{name}.sqlite"
        if not path.exists():
            gunzip(DATA / "nsys" / f"{name}.sqlite.gz", path)
        return str(path)

    return unzipped


@pytest.fixture(scope="session")
def per_rank_nsys(tmp_path_factory) -> pathlib.Path:
    """The committed per-rank job's nsys exports (``tests/data/per_rank/nsys``: the straggler step
    of a 2-rank job on 2×H100), unzipped once per session into a folder of their own:
    ``rank0.sqlite`` and ``rank1.sqlite``. Shared by every test: read it, and copy it
    (``per_rank_copy``) before changing or adding to it."""
    folder = tmp_path_factory.mktemp("per_rank") / "nsys"
    folder.mkdir()
    for rank in (0, 1):
        gunzip(DATA / "per_rank" / "nsys" / f"rank{rank}.sqlite.gz", folder / f"rank{rank}.sqlite")
    return folder


@pytest.fixture
def per_rank_copy(per_rank_nsys, tmp_path) -> pathlib.Path:
    """A copy of :func:`per_rank_nsys` for this test alone (``tmp_path / "job"``), to change."""
    return pathlib.Path(shutil.copytree(per_rank_nsys, tmp_path / "job"))
