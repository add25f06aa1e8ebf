"""Kernel-name shapes the LLM-stack and training decoders missed: Triton 2.x signature suffixes,
ATen op names with underscores in Inductor's fused lists, user ``@triton.jit`` kernels known by how
they were launched, cuDNN's legacy convolution kernels and cut-off mangled names, NCCL's
symmetric-memory kernels, and the bounded ``short`` of names no decoder knows.

Sources, per case: DeepSeek's training profile (deepseek-ai/profile-data ``train.json``: its
``rotary_kernel`` / ``_copy_tensor_kernel`` come through ``cuLaunchKernel``), NVIDIA/nccl's
generated symmetric kernels (``src/device/symmetric``), public TensorFlow and PyTorch profiles of
cuDNN 7/8 convolutions and a torch.profiler table of a ``cudnn_convolution`` run, a public
TritonRoPE profiler table, and PyTorch's Inductor output code.
"""

from __future__ import annotations

import pytest

from gpumagic.kernels import decode
from gpumagic.kernels.libraries import split_fused, triton_signature_suffix


def test_triton_2_signature_suffixes_are_not_fused_ops():
    # Inductor under Triton 2.x: the compiled name ends in the arguments' specialisation
    k = decode("triton_per_fused_layer_norm_tanh_0_0d1d2d3d4d")
    assert k.family == "triton" and k.details["fused_ops"] == ["layer_norm", "tanh"]
    assert k.details["specialization"] == "0d1d2d3d4d" and "0d1d" not in k.short
    assert triton_signature_suffix("triton_poi_fused_add_0") == -1  # an index, not a suffix


def test_a_triton_2_suffix_names_a_user_kernel_as_triton():
    # a public torch.profiler table of a Triton RoPE kernel
    k = decode("rope_fw_bw_kernel_0d1d2d3d4d5d6d")
    assert (k.family, k.op) == ("triton", "rope") and k.short == "Triton rope_fw_bw_kernel"


@pytest.mark.parametrize(
    ("rest", "ops"),
    [
        (
            "fused__native_batch_norm_legit_functional_add",
            ["_native_batch_norm_legit_functional", "add"],
        ),
        ("fused_add_native_dropout_backward", ["add", "native_dropout_backward"]),
        ("fused_max_pool2d_with_indices_relu", ["max_pool2d_with_indices", "relu"]),
        ("fused__native_batch_norm_legit_no_training", ["_native_batch_norm_legit_no_training"]),
    ],
)
def test_aten_op_names_with_underscores_stay_whole(rest, ops):
    assert split_fused(rest) == ops


def test_a_driver_api_launch_makes_a_bare_name_a_triton_kernel():
    # deepseek-ai/profile-data train.json: launched by cuLaunchKernel (Triton's launcher)
    assert decode("rotary_kernel").family == "other"
    k = decode("rotary_kernel", launch="cuLaunchKernel")
    assert (k.family, k.library, k.op) == ("triton", "Triton", "rope")
    assert decode("_copy_tensor_kernel", launch="cuLaunchKernel").op == "copy"
    assert decode("rotary_kernel", launch="cudaLaunchKernel").family == "other"
    # a C++ signature is not a Triton kernel, however it was launched
    assert decode("void foo<int>(int*)", launch="cuLaunchKernel").family == "other"
    assert decode("rotary_kernel", launch="hipModuleLaunchKernel").family == "triton"


@pytest.mark.parametrize(
    "name",
    [
        # a public TF profile of a cuDNN 7 convolution
        "void implicit_convolve_sgemm<float, float, 512, 6, 8, 3, 3, 5, 1, false, false, true>("
        "int, int, int, float const*, int, float*, float const*, kernel_conv_params)",
        "_Z23implicit_convolve_sgemmIffLi1024ELi5ELi5ELi3ELi3ELi3ELi1ELb0ELb1ELb1EEviiiPKT_iPT0_S2_"
        "18kernel_conv_paramsyiffiPKS3_S7_bii",
        "_ZN5cudnn3cnn17wgrad_alg0_engineIfLi512ELi6ELi5ELi3ELi3ELi3ELb0ELi512EEEviiiPKT_iPS2_S4_"
        "18kernel_grad_paramsyifiiii",
    ],
)
def test_cudnn_legacy_convolutions(name):
    k = decode(name)
    assert (k.family, k.library, k.op, k.precision) == ("cudnn", "cuDNN", "conv", "fp32")
    assert k.tensor_cores is False and k.details["direction"] in ("fprop", "wgrad")


def test_cudnn_sublibrary_copies_of_arch_prefixed_kernels():
    # a public nsys stats table of a cuDNN 8 run
    k = decode("cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1")
    assert (k.family, k.op, k.arch) == ("cudnn", "conv", "sm80")


def test_a_cut_off_mangled_name_is_read_from_its_pieces_and_stays_short():
    # torch.profiler's table of a cudnn_convolution run cuts the name after 40 characters
    raw = "_ZN17cutlass__5x_cudnn6KernelI66cutlass_tensorop_s16..."
    k = decode(raw)
    assert (k.family, k.library, k.op, k.tensor_cores) == ("cudnn", "cuDNN", "conv", True)
    assert k.name == raw and len(k.short) <= 80 and "cut off" in k.short


@pytest.mark.parametrize(
    ("name", "collective", "precision"),
    [
        ("ncclSymkDevKernel_AllReduce_AGxLL_R_sum_f8e5m2", "AllReduce", "fp8e5m2"),
        ("ncclSymkDevKernel_ReduceScatter_LL_sum_f32", "ReduceScatter", "fp32"),
    ],
)
def test_nccl_symmetric_memory_kernels(name, collective, precision):
    k = decode(name)
    assert (k.family, k.op, k.details["collective"]) == ("nccl", "communication", collective)
    assert k.precision == precision and k.details["symmetric"] is True


def test_undecoded_names_get_a_bounded_readable_short_and_keep_their_full_text():
    long_template = "void my_lib::my_kernel<" + "Foo<Bar<int>>, " * 120 + "1>(int*)"
    k = decode(long_template)
    assert k.family == "other" and k.short == "my_kernel<…>" and k.name == long_template
    blob = "x" * 1_600
    k = decode(blob)
    assert len(k.short) == 80 and k.short.endswith("…") and k.name == blob


def test_gated_activations_are_an_activation_category():
    k = decode("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>>()")
    assert k.op == "activation" and k.details["category"] == "activation"
