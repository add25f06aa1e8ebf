"""Within one report, distinct kernel names read differently; the decoder says what it cannot
know."""

from __future__ import annotations

import json

from gpumagic.kernels import decode
from gpumagic.kernels.labels import distinct_labels

from ..helpers import DATA


def test_every_distinct_name_of_the_corpora_gets_its_own_label():
    names = [e["name"] for e in json.loads((DATA / "kernel_names.json").read_text())]
    names += [e["name"] for e in json.loads((DATA / "kernels_gpu_host.json").read_text())]
    labels = distinct_labels(names)
    assert len(labels) == len(set(names)) and len(set(labels.values())) == len(labels)
    shorts = [decode(n).short for n in set(names)]
    assert len(set(shorts)) < len(
        labels
    )  # the corpora do hold colliding shorts: the labels resolve them
    for name, label in labels.items():
        assert label.startswith(decode(name).short)


def test_siblings_are_told_apart_by_what_differs():
    fill = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<{t}>, "
        "std::array<char*, 1ul> >(int)"
    )
    labels = distinct_labels([fill.format(t="float"), fill.format(t="bool")])
    assert sorted(labels.values()) == [
        "elementwise fill (vectorized ×4) [bool]",
        "elementwise fill (vectorized ×4) [fp32]",
    ]
    gemm = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_{}"  # noqa: E501 (a kernel name as it ran)
    labels = distinct_labels(
        [gemm.format("kernel__5x_cublas"), gemm.format("split_k_kernel__5x_cublas")]
    )
    assert labels[gemm.format("split_k_kernel__5x_cublas")].endswith("[split k]")
    alone = distinct_labels([gemm.format("kernel__5x_cublas")])
    assert "[" not in next(iter(alone.values()))


def test_cudnn_sdpa_forward_and_backward_and_what_a_name_cannot_tell():
    fwd = decode(
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0"
    )
    bwd = decode(
        "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x128x64_4x1x1_cga1x1x1_kernel0_0"
    )
    assert fwd.short != bwd.short and "forward" in fwd.short and "backward" in bwd.short
    assert fwd.precision == "16-bit"  # the same generated kernel runs for fp16 and bf16 inputs
    cat = decode(
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous "
        "namespace)::OpaqueType<2u>,"
        " unsigned int, 2, 128, 1>(int)"
    )
    assert (
        cat.precision == "16-bit"
    )  # 2-byte elements; 'unsigned int' is the index type, not the data


def test_the_report_shows_colliding_kernels_under_distinct_labels():
    from gpumagic.render.report import ProfileReport
    from gpumagic.trace import Trace, frame

    mul = (
        "void at::native::elementwise_kernel<128, {n}, "
        "at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor"
        "<float, float, float, at::native::binary_internal::MulFunctor<float> > "
        ">(at::TensorIteratorBase&, "
        "at::native::BinaryFunctor<float, float, float, "
        "at::native::binary_internal::MulFunctor<float> > const&)"
        "::{{lambda(int)#1}}>(int, at::native::gpu_kernel_impl_nocast)"
    )
    names = [mul.format(n=4), mul.format(n=2)]
    assert decode(names[0]).short == decode(names[1]).short
    ks = [
        dict(name=n, start=i * 100, end=i * 100 + 50, device=0, stream=7)
        for i, n in enumerate(names)
    ]
    report = ProfileReport(Trace(kernels=frame("kernels", ks)), timeline=False)
    shown = set(report.kernel_summary()["Short"])
    assert len(shown) == 2
    text = str(report)
    assert all(label in text for label in shown) and all(
        label in report._repr_html_() for label in shown
    )
