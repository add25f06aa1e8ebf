from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def shell():
    """A real IPython shell with the extension loaded (as in a notebook after %load_ext gpumagic)."""
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
