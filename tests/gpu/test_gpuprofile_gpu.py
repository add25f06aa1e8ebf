"""%%gpuprofile on a real GPU: repeated captures stay right, kernels match launches, the report is
complete."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

from gpumagic.analysis import findings  # noqa: E402
from gpumagic.capture.torch.backend import capture  # noqa: E402
from gpumagic.render.report import ProfileReport  # noqa: E402

LAUNCH = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")


def block(ns):
    x = ns["x"]
    qkv = x @ ns["Wqkv"]
    q, k, v = qkv.split(1024, dim=-1)
    attn = torch.softmax(q @ k.transpose(-2, -1) / 32.0, dim=-1)
    h = attn @ v + x
    return torch.relu(h @ ns["W1"]) @ ns["W2"] + h


@pytest.fixture(scope="module")
def ns():
    g = torch.Generator(device="cuda").manual_seed(0)
    r = lambda *s: torch.randn(*s, device="cuda", generator=g) * 0.02  # noqa: E731
    return {"x": r(4, 256, 1024), "Wqkv": r(1024, 3072), "W1": r(1024, 4096), "W2": r(4096, 1024)}


def test_repeated_captures_see_every_launched_kernel_after_its_launch(ns):
    block(ns)
    torch.cuda.synchronize()
    counts = []
    for i in range(5):
        t = capture(lambda: block(ns), f"cell:{i}").trace
        launches = t.api[t.api["name"].isin(LAUNCH)]
        assert len(t.kernels) == len(launches) > 0, (i, len(t.kernels), len(launches))
        joined = t.kernels.merge(launches, on="correlation", suffixes=("_k", "_a"))
        assert len(joined) == len(t.kernels)
        assert (joined["start_k"] >= joined["start_a"]).all(), "a kernel started before its launch"
        counts.append(len(t.kernels))
        kinds = {f.kind for f in findings(t)}
        assert "kernels_dropped" not in kinds and "kernels_missing" not in kinds
    assert len(set(counts)) == 1


def test_report_on_the_gpu_has_kernels_decoded_and_timeline(ns, tmp_path):
    t = capture(lambda: block(ns), "cell:block").trace
    r = ProfileReport(t, label="cell:block")
    html = r._repr_html_()
    assert "GPU stream" in html and "Kernels" in html
    assert r.figures["gpu_util"] is not None and 0 < r.figures["gpu_util"] <= 1.0
    fam = set(r.kernel_summary()["Family"])
    assert fam & {"cublas_xmma", "nvjet", "cutlass2", "cutlass3"}, fam
    assert "aten" in fam
    r.save_html(tmp_path / "r.html")


def test_magic_on_the_gpu(ns):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpumagic")
    shell.user_ns.update(ns)
    shell.user_ns["block"] = block
    shell.user_ns["torch"] = torch
    shell.run_cell_magic(
        "gpuprofile", "-o rep", "out = block({'x': x, 'Wqkv': Wqkv, 'W1': W1, 'W2': W2})"
    )
    rep = shell.user_ns["rep"]
    assert len(rep.trace.kernels) >= 8
    assert rep.trace.meta["device"] == torch.cuda.get_device_name()
    assert shell.user_ns["out"].shape == (4, 256, 1024)


@pytest.mark.parametrize("dtype, word", [(torch.bfloat16, "bf16"), (torch.float16, "fp16")])
def test_the_kernel_table_tells_bf16_from_fp16_by_the_launching_op(dtype, word):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from gpumagic.trace.launching_ops import kernel_op_precisions

    q = torch.randn(2, 8, 512, 64, device="cuda", dtype=dtype)

    def run():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]):
            torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)

    run()
    torch.cuda.synchronize()
    t = capture(run, "cell:sdpa").trace
    found = kernel_op_precisions(t)
    attention = [n for n in t.kernels["name"].unique() if "sdpa" in n or "flash" in n]
    assert attention and all(found.get(n) == word for n in attention), (found, attention)
    html = ProfileReport(t, timeline=False)._repr_html_()
    assert f">{word}" in html
