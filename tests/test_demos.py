"""Every demo notebook runs top to bottom (on the CPU here: GPU-only cells say they were
skipped)."""

from __future__ import annotations

import pytest

from .helpers import ROOT

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

DEMOS = sorted((ROOT / "demos").glob("*.ipynb"))


def test_the_demos_are_there():
    assert [p.stem for p in DEMOS] == [
        "01_gpu_is_real",
        "02_kernels_have_names",
        "03_nsys_in_the_notebook",
        "04_overhead_vs_compute",
        "05_tensor_cores",
        "06_roofline",
        "07_sweep",
        "08_two_gpus",
        "09_whole_job",
        "10_what_changed",
        "11_compiled_and_graphs",
    ]


@pytest.mark.parametrize("path", DEMOS, ids=[p.stem for p in DEMOS])
def test_demo_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    # raises CellExecutionError, with the failing cell and its traceback, on any error
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "device:" in text
