import pytest

torch = pytest.importorskip("torch")

if not torch.cuda.is_available():  # the whole directory is for the GPU host
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture
def own_names():
    """The shared IPython shell's names as they were before the test: whatever the test's cells
    defined (models, optimizers, tensors) is dropped after it, so later tests of the session meet
    neither its models nor its memory."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    before = set(shell.user_ns)
    yield shell
    for name in set(shell.user_ns) - before:
        del shell.user_ns[name]
    import gc

    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
