"""How near the silicon each row ran (``analysis/op_rates.py``): the work of a row's launching ops,
counted from their recorded shapes and types, over its kernels' time, against the device's peak;
what cannot be counted is left blank."""

from __future__ import annotations

import pytest

from gpumagic.analysis.op_rates import code_rates, kernel_rates, op_work, parse_shapes, rate_text
from gpumagic.render.report import ProfileReport
from gpumagic.trace import Trace, frame

from ..helpers import ROOT


@pytest.mark.parametrize(
    "name, shapes, types, want",
    [
        (
            "aten::mm",
            "[64, 32], [32, 16]",
            "c10::BFloat16, c10::BFloat16",
            (2 * 64 * 32 * 16, (64 * 32 + 32 * 16 + 64 * 16) * 2),
        ),
        (
            "aten::addmm",
            "[16], [64, 32], [32, 16], [], []",
            "float, float, float",
            (2 * 64 * 32 * 16, (64 * 32 + 32 * 16 + 64 * 16) * 4),
        ),
        (
            "aten::bmm",
            "[4, 8, 2], [4, 2, 3]",
            "c10::Half, c10::Half",
            (2 * 4 * 8 * 3 * 2, (64 + 24 + 96) * 2),
        ),
        ("aten::add", "[8, 512], [512], []", "float, float", (None, (4096 + 512 + 4096) * 4)),
        ("aten::add_", "[8, 512], [8, 512], []", "float, float", (None, 3 * 4096 * 4)),
        ("aten::copy_", "[100], [100], []", "c10::BFloat16, float", (None, 100 * 2 + 100 * 4)),
        ("aten::fill_", "[1000], []", "float", (None, 4000)),
        ("aten::sum", "[8, 512], [], [], []", "float", (None, 4096 * 4)),
        ("aten::convolution", "[1, 3, 8, 8], [4, 3, 3, 3]", "float, float", (None, None)),
        ("aten::mm", "[64, 32], [16, 16]", "float, float", (None, None)),  # not a product
        ("aten::mm", None, None, (None, None)),  # no shapes recorded
    ],
)
def test_each_counted_op_gives_its_flops_and_bytes_and_the_rest_nothing(name, shapes, types, want):
    assert op_work(name, shapes, types) == want


def test_shapes_read_as_kineto_writes_them():
    assert parse_shapes("[8, 512, 768], [], [768]") == [[8, 512, 768], [], [768]]
    assert parse_shapes(float("nan")) is None


def _trace(device: str = "NVIDIA H200") -> Trace:
    """A bf16 GEMM of 4096^3 run twice (one 0.2 ms kernel each), an add of two 2^20 fp32 vectors,
    and a kernel of an op whose work is not counted."""
    ops = [
        {"name": "aten::mm", "start": 0, "end": 100, "thread": 1, "depth": 0}
        | {"shapes": "[4096, 4096], [4096, 4096]", "dtypes": "c10::BFloat16, c10::BFloat16"},
        {"name": "aten::mm", "start": 200, "end": 300, "thread": 1, "depth": 0}
        | {"shapes": "[4096, 4096], [4096, 4096]", "dtypes": "c10::BFloat16, c10::BFloat16"},
        {"name": "aten::add", "start": 400, "end": 500, "thread": 1, "depth": 0}
        | {"shapes": "[1048576], [1048576], []", "dtypes": "float, float"},
        {"name": "aten::_foreach_add_", "start": 600, "end": 700, "thread": 1, "depth": 0}
        | {"shapes": "[], [], []", "dtypes": "float"},
    ]
    api = [
        {"name": "cudaLaunchKernel", "start": 10 + 200 * i, "end": 20 + 200 * i, "thread": 1}
        | {"correlation": i}
        for i in range(4)
    ]
    names = ["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"] * 2 + ["add_kernel", "foreach"]
    durs = [200_000, 200_000, 3_000, 5_000]
    kernels = [
        {"name": n, "start": 10_000 + 300_000 * i, "end": 10_000 + 300_000 * i + d}
        | {"device": 0, "stream": 7, "correlation": i}
        for i, (n, d) in enumerate(zip(names, durs))
    ]
    return Trace(
        kernels=frame("kernels", kernels),
        api=frame("api", api),
        ops=frame("ops", ops),
        meta={"device": device, "recorded": ["kernels", "api", "ops"]},
    )


def test_a_gemm_row_gives_its_tflops_and_share_of_the_precisions_peak():
    rates = kernel_rates(_trace()).set_index("Name")
    gemm = rates.loc["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"]
    want = 2 * 4096**3 / 200e-6  # 687 TFLOP/s
    assert gemm["flop_rate"] == pytest.approx(want) and gemm["precision"] == "bf16"
    assert gemm["flop_share"] == pytest.approx(want / 989.5e12)
    assert rate_text(gemm) == "687 TFLOP/s bf16, 69% of peak"
    add = rates.loc["add_kernel"]
    assert add["byte_rate"] == pytest.approx(3 * 4 * 2**20 / 3e-6)
    assert rate_text(add).endswith("of bandwidth") and pd_isna(add["flop_rate"])
    assert "foreach" not in rates.index  # not counted: absent, never guessed


def pd_isna(value) -> bool:
    return value is None or value != value


def test_the_report_shows_a_rate_column_and_a_table_without_shapes_has_none():
    html = ProfileReport(_trace()).html(timeline=None)
    assert ">Rate</th>" in html and ">687 TFLOP/s · 69%</td>" in html
    assert "title='687 TFLOP/s bf16, 69% of peak'" in html
    plain = _trace()
    plain.ops["shapes"] = None  # recorded without shapes
    assert ">Rate</th>" not in ProfileReport(plain).html(timeline=None)
    assert kernel_rates(plain).empty


def test_a_real_training_step_gets_rates_by_kernel_module_and_line():
    from gpumagic import load_trace

    trace = load_trace(ROOT / "tests/data/attribution/gpt_modules.json.gz")
    rates = kernel_rates(trace)
    gemms = rates[rates["Name"].str.startswith("nvjet")]
    assert len(gemms) >= 5 and gemms["flop_share"].between(0.3, 1.0).all()  # H100 bf16
    mods = code_rates(trace, "module").set_index(["Module", "Pass"])
    block = mods.loc[("GPT_0.Block_0", "backward")]
    assert 0 < block["counted_share"] <= 1 and block["flop_rate"] > 1e14
    # a module's rate is over all its kernels' time: no higher than its fastest GEMM's
    assert block["flop_rate"] < gemms["flop_rate"].max()
    assert not code_rates(trace, "line").empty
    rep = ProfileReport(trace)
    assert rep.rates("module").equals(code_rates(rep.trace, "module"))
    with pytest.raises(ValueError, match="by must be"):
        rep.rates("stream")
