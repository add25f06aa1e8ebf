from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _history_in_a_temporary_file(tmp_path_factory):
    """Results measured by the tests go to a file of the session's own, never to the user's history
    (``~/.local/share/gpumagic``); subprocesses the tests start inherit it. Tests of the history use
    their own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUMAGIC_HISTORY", str(tmp_path_factory.mktemp("history") / "history.sqlite"))
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
def hist(tmp_path, monkeypatch):
    """A history of the test's own (``GPUMAGIC_HISTORY``), with the recorder's once-per-process
    notes said afresh and its open stores closed after."""
    from gpumagic.history import saving as recorder

    path = tmp_path / "history.sqlite"
    monkeypatch.setenv("GPUMAGIC_HISTORY", str(path))
    recorder._SAID.clear()
    yield path
    for store in recorder._STORES.values():
        store.close()
    recorder._STORES.clear()
