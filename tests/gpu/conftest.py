import pytest

torch = pytest.importorskip("torch")

if not torch.cuda.is_available():  # the whole directory is for the GPU host
    collect_ignore_glob = ["test_*.py"]
