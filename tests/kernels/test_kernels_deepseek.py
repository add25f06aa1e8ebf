"""The kernel-name decoder on DeepSeek's own builds (gpumagic/kernels/deepseek.py): DeepEP and the
grouped FP8 GEMMs under ``dpsk::`` namespaces, and the ``cuda::`` helper kernels beside them.

Every name is from DeepSeek's published DeepSeek-V3 training profile (deepseek-ai/profile-data
``train.json``, a kineto trace of H800s), with its long parameter lists cut where the decoder does
not need them. Expectations follow what each kernel does in DeepEP / DeepGEMM's sources.
"""

from __future__ import annotations

import pytest

from gpumagic.kernels import decode


@pytest.mark.parametrize(
    ("name", "phase"),
    [
        (
            "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>("
            "int4*, float*, bool const*, int4 const*, float const*)",
            "combine",
        ),
        (
            "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, long*, float*, "
            "dpsk::ep::internode::SourceMeta*, int4 const*)",
            "dispatch",
        ),
        ("void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*, int)", "notify"),
        ("void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, long*, int)", "notify"),
    ],
)
def test_deepseek_deepep_kernels_are_all_to_all(name, phase):
    k = decode(name)
    assert (k.family, k.op, k.details["phase"]) == ("deepep", "all_to_all", phase)
    assert k.library.startswith("DeepEP") and k.details["scope"] == "internode"


def test_combine_has_its_token_type_and_dispatch_does_not_guess_one():
    combine = decode("void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>()")
    assert combine.precision == "bf16"
    dispatch = decode("void dpsk::ep::internode::dispatch<false, 8, false, 8>(int4*, float*)")
    assert dispatch.precision is None  # FP8 or BF16 is chosen at run time


def test_dispatch_layout_is_moe_routing():
    k = decode(
        "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, "
        "bool*, int, int, int, int)"
    )
    assert (k.family, k.op) == ("deepep", "moe_routing")


@pytest.mark.parametrize(
    ("variant", "grouped", "epilogue"),
    [
        ("fp8_dptp128c_acc", False, "accumulate"),
        ("m_grouped_fp8_ptp128c", True, None),
        ("fp8_ptp128c", False, None),
    ],
)
def test_grouped_fp8_gemms_in_cutlass_device_kernels(variant, grouped, epilogue):
    k = decode(
        f"void cutlass::device_kernel<dpsk::grouped_gemm::cuda::{variant}::GemmKernel>"
        f"(dpsk::grouped_gemm::cuda::{variant}::GemmKernel::Params)"
    )
    assert k.op == "gemm" and k.precision == "fp8e4m3" and k.tensor_cores is True
    assert k.arch == "sm90" and k.short != "device_kernel" and variant in k.short
    assert ("grouped" in k.details) is grouped and k.epilogue == epilogue


@pytest.mark.parametrize(
    ("name", "op", "precision"),
    [
        (
            "void cuda::per_token_cast_to_fp8_with_channels<__nv_bfloat16, 128, false, 128, false>"
            "(__nv_bfloat16 const*, int, unsigned char*, float*, int, int, int, int, bool, float, "
            "__nv_fp8_interpretation_t)",
            "quantize",
            "fp8e4m3",
        ),
        (
            "void cuda::per_channel_cast_and_transpose<256, 128, true, true, true, false, true>("
            "void const*, float const*, int const*, int const*, unsigned char*, float*, int, int, "
            "float, __nv_fp8_interpretation_t)",
            "quantize",
            "fp8e4m3",
        ),
        (
            "void cuda::cast_back_impl<__nv_fp8x2_e4m3>(void const*, void*, float const*, int, "
            "int, int, int)",
            "dequantize",
            "fp8e4m3",
        ),
        (
            "void cuda::topk_sum_and_topk_idx<16, 64>(float const*, long*, int, int, int, int, "
            "int)",
            "moe_routing",
            "fp32",
        ),
        (
            "void cuda::get_fused_mapping<512>(long const*, int*, int*, int*, int*, int*, int*, "
            "int const*, int, int, int)",
            "moe_routing",
            None,
        ),
        (
            "void cuda::clean_and_count_expert<512>(long const*, int*, int*, int*, int*, int*, "
            "int, int, int, int)",
            "moe_routing",
            None,
        ),
        (
            "void cuda::reduce_fused_impl<__nv_bfloat16, false, false>(int4 const*, float const*, "
            "int const*, int4*, int, int, int, __nv_fp8_interpretation_t, float const*, "
            "float const*)",
            "moe_permute",
            "bf16",
        ),
    ],
)
def test_deepseek_cuda_helpers(name, op, precision):
    k = decode(name)
    assert k.library.startswith("DeepSeek") and k.op == op and k.precision == precision
    assert len(k.short) <= 80


def test_swiglu_is_an_activation_and_its_fused_cast_quantizes():
    plain = decode(
        "void cuda::swiglu_forward_backward_with_weight_impl<__nv_bfloat16>(__nv_bfloat16*, "
        "__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16 const*, __nv_bfloat16 const*, int const*, "
        "float const*, int, int)"
    )
    assert plain.details["category"] == "activation" and plain.precision == "bf16"
    fused = decode(
        "void cuda::swiglu_forward_with_weight_and_per_token_cast_to_fp8_with_channels_impl<"
        "__nv_bfloat16, true, false, 128>(unsigned char*, __nv_bfloat16 const*, int const*, "
        "float const*, int, int, float*, int const*, float, __nv_fp8_interpretation_t)"
    )
    assert fused.details["fused"] == "quantize to fp8e4m3" and fused.precision == "fp8e4m3"


def test_libcudacxx_names_are_not_claimed():
    k = decode("void cuda::std::__4::__detail::kernel<int>(int*)")
    assert not k.library.startswith("DeepSeek")


def test_apex_fast_layer_norm_of_the_same_trace():
    k = decode(
        "void layer_norm::ln_fwd_kernel<layer_norm::Kernel_traits<__nv_bfloat16, __nv_bfloat16, "
        "__nv_bfloat16, __nv_bfloat16, float, unsigned int, 7168u, 1u, 1u, 4u, 16u> >"
        "(layer_norm::FwdParams)"
    )
    assert (k.family, k.op, k.precision) == ("apex", "norm", "bf16")
