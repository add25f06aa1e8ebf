"""Jobs for the tests of ``gpumagic.job``: the committed per-rank fixtures (``tests/data/per_rank``:
the straggler step of a 2-rank job on 2×H100, one nsys export and one torch.profiler trace per rank)
unzipped, and a synthetic job grown from the committed H100 export by ``benchmarks/job_scale.py``
(6 ranks on 2 hosts whose clocks differ, rank 3 the straggler)."""

from __future__ import annotations

import gzip
import importlib.util
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PER_RANK = ROOT / "tests" / "data" / "per_rank"


def job_scale():
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("job_scale", ROOT / "benchmarks" / "job_scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def unzip_exports(folder: pathlib.Path) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank in (0, 1):
        with (
            gzip.open(PER_RANK / "nsys" / f"rank{rank}.sqlite.gz") as src,
            open(folder / f"rank{rank}.sqlite", "wb") as dst,
        ):
            shutil.copyfileobj(src, dst)
    return folder


@pytest.fixture
def exports(tmp_path: pathlib.Path) -> pathlib.Path:
    return unzip_exports(tmp_path / "per_rank")


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("synthetic") / "job"
    job_scale().build_job(folder, 6, 3000, 3000, straggler=3, hosts=2)
    return folder
