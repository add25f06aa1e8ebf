"""A kernel whose name cannot tell bf16 from fp16 gets its precision from the op that launched
it."""

from __future__ import annotations

import pytest

from gpumagic import load_trace
from gpumagic.render.tables import kernel_table_html
from gpumagic.trace import Trace, frame
from gpumagic.trace.launching_ops import kernel_op_precisions, launching_ops, precision_of_types

from ..helpers import DATA

CUDNN_SDPA = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0"  # noqa: E501 (a kernel name as it ran)
HELPER = (
    "void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void "
    "const*, void*, void*)"
)


def attention_trace(dtype: str) -> Trace:
    """One thread: an outer op, the SDPA op inside it launching two kernels, a copy op launching a
    third."""
    ops = [
        dict(
            name="aten::scaled_dot_product_attention",
            start=0,
            end=100,
            thread=1,
            dtypes=f"{dtype}, {dtype}, {dtype}",
        ),
        dict(
            name="aten::_scaled_dot_product_cudnn_attention",
            start=10,
            end=90,
            thread=1,
            dtypes=f"{dtype}, float",
        ),
        dict(name="aten::copy_", start=120, end=140, thread=1, dtypes="float, float"),
    ]
    api = [
        dict(name="cudaLaunchKernel", start=20, end=25, thread=1, correlation=7),
        dict(name="cudaLaunchKernel", start=30, end=35, thread=1, correlation=8),
        dict(name="cudaLaunchKernel", start=125, end=130, thread=1, correlation=9),
    ]
    k = [
        dict(name=CUDNN_SDPA, start=200, end=300, device=0, stream=7, correlation=7),
        dict(name=HELPER, start=300, end=310, device=0, stream=7, correlation=8),
        dict(
            name="void at::native::copy_kernel<float>()",
            start=310,
            end=320,
            device=0,
            stream=7,
            correlation=9,
        ),
    ]
    return Trace(kernels=frame("kernels", k), api=frame("api", api), ops=frame("ops", ops))


@pytest.mark.parametrize("dtype, word", [("c10::BFloat16", "bf16"), ("c10::Half", "fp16")])
def test_the_innermost_launching_op_says_the_precision(dtype, word):
    t = attention_trace(dtype)
    assert launching_ops(t).tolist() == [1, 1, 2]  # the cuDNN op, not the outer SDPA op; the copy
    found = kernel_op_precisions(t)
    assert found[CUDNN_SDPA] == word and found[HELPER] == word
    html = kernel_table_html(t.kernel_summary(), op_precisions=found)
    assert f">{word}*</td>" in html and "from the launching op&#x27;s input dtype" in html
    assert "the kernel name does not say (it says 16-bit)" in html


def test_a_name_that_tells_keeps_its_own_precision():
    t = attention_trace("c10::Half")
    html = kernel_table_html(
        t.kernel_summary(), op_precisions={**kernel_op_precisions(t), "x": "bf16"}
    )
    assert "fp32*" not in html  # the copy kernel's name says fp32 itself: no mark


def test_precision_of_types_takes_the_first_typed_input():
    assert precision_of_types("c10::BFloat16, float") == "bf16"
    assert precision_of_types("signed char, signed char") == "int8"
    assert precision_of_types("long int") is None and precision_of_types(None) is None


def test_a_real_torch_profiler_trace_links_every_kernel_to_an_op_with_its_dtypes():
    t = load_trace(str(DATA / "torch_block.json.gz"))
    assert t.ops["dtypes"].notna().any()
    rows = launching_ops(t)
    assert (rows >= 0).all()
    assert set(kernel_op_precisions(t).values()) == {"fp32"}  # the block program runs in fp32
    assert (
        kernel_op_precisions(Trace(kernels=t.kernels)) == {}
    )  # no ops (an nsys export): the name is all there is
