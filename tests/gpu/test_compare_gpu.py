"""Compare and sweep on the GPU: speed-ups that are the ratio of the printed medians, a sweep whose
small adds are launch-bound and large ones are not, an out-of-memory point marked and freed, and
demos 05 and 07 top to bottom."""

from __future__ import annotations

import os
import pathlib
import re

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs CUDA", allow_module_level=True)

import gpumagic  # noqa: E402
from gpumagic.timing.compare_result import parse_time  # noqa: E402

DEMOS = pathlib.Path(__file__).parents[2] / "demos"


def test_compare_speedups_are_the_ratio_of_the_printed_medians():
    n = 4096
    a = torch.randn(n, n, device="cuda")
    g = {"a": a, "ab": a.bfloat16(), "torch": torch}
    torch.backends.cuda.matmul.allow_tf32 = False
    cmp = gpumagic.compare({"fp32": "a @ a", "bf16": "ab @ ab"}, globals=g, time_budget=1.0)
    text = str(cmp)
    rows = {line.split()[0]: line for line in text.splitlines()[2:4]}
    medians = {label: parse_time(" ".join(rows[label].split()[1:3])) for label in ("fp32", "bf16")}
    printed = float(re.search(r"([\d.]+)\u00d7\s*$", rows["bf16"]).group(1))
    assert printed == pytest.approx(medians["fp32"] / medians["bf16"], rel=0.005)
    assert cmp.speedup("bf16") == pytest.approx(
        cmp.results["fp32"].median / cmp.results["bf16"].median
    )
    assert cmp.speedup("bf16") > 2  # tensor cores against FFMA at 4096
    assert "Timed interleaved" in text
    df = cmp.to_dataframe()
    assert (df["launch_bound"] == False).all()  # noqa: E712 - 4096 matmuls keep the GPU busy
    assert df.set_index("label").loc["bf16", "precision"] == "bf16"
    if "H100" in cmp.device or "H200" in cmp.device:
        assert "% of peak" in text.splitlines()[1]


def test_sweep_of_an_add_is_launch_bound_when_small_and_not_when_large():
    sizes = [1 << 10, 1 << 14, 1 << 26]
    s = gpumagic.sweep(
        "x + y",
        "x = torch.randn(n, device='cuda'); y = torch.randn(n, device='cuda')",
        params={"n": sizes},
        globals={"torch": torch},
    )
    df = s.to_dataframe()
    assert list(df["status"]) == ["ok"] * 3
    assert bool(df["launch_bound"].iloc[0]) is True
    assert bool(df["launch_bound"].iloc[-1]) is False
    assert df["byte_rate"].iloc[-1] > 10 * df["byte_rate"].iloc[0]
    data = s.plot_data()
    assert data["metric"] == "byte"
    if (
        "H100" in s.device or "H200" in s.device
    ):  # the table knows their bandwidth: the dashed line is drawn
        assert max(data["peaks"]) > df["byte_rate"].max()
    assert "bokeh" in s.html("page").lower()


def test_an_out_of_memory_point_is_marked_freed_and_the_sweep_goes_on():
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    huge = (
        int((torch.cuda.get_device_properties(0).total_memory * 2) ** 0.5 / 2) + 1
    )  # n*n*4 bytes > 2x memory
    s = gpumagic.sweep(
        "a + 1",
        "a = torch.ones(n, n, device='cuda')",
        params={"n": [256, huge, 512]},
        globals={"torch": torch},
    )
    assert [p.status for p in s.points] == ["ok", "out of memory", "ok"]
    assert "OutOfMemoryError" in s.points[1].error
    assert torch.cuda.memory_allocated() <= before + (1 << 20)


@pytest.mark.parametrize("name", ["05_tensor_cores", "07_sweep"])
def test_demo_runs_top_to_bottom_on_the_gpu(name, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(DEMOS / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "device: NVIDIA" in text and "skipped" not in text
    shown = "".join(o.get("data", {}).get("text/plain", "") for o in outputs)
    if name == "05_tensor_cores":
        assert "3 statements on NVIDIA" in shown and "tensor cores True" in text
    else:
        assert "Sweep of 2 statements" in shown and "launch-bound up to n =" in text
    if os.environ.get("OUT"):  # the device run brings $OUT back: the executed notebook, for a look
        nbformat.write(nb, os.path.join(os.environ["OUT"], f"{name}.ipynb"))
