"""Kernel names of Blackwell, the Spark's engines and code generators: cuBLAS's nvjet ``mma`` form
(sm_120/121 GEMMs) and block-scaled NVFP4/MXFP8 nvjet names, CUTLASS's WMMA fallback, FlashAttention
4's CuTe DSL names, llama.cpp's kernels (ggml's type enum), nvFuser's generated kernels and cuDNN's
kernels from before the architecture led the name."""

from __future__ import annotations

import pytest

from gpumagic.kernels import decode

CASES = [
    (
        "nvjet_sm121_tst_mma_128x256x64_4_1x1_v_bz_TNN",
        {"library": "cuBLAS (nvjet)", "precision": "bf16", "arch": "sm121", "tile": "128x256x64"},
        "cuBLAS nvjet BF16 GEMM 128×256×64, TNN",
    ),
    (
        "nvjet_sm120_hsh_mma_128x128x64_3_1x1_h_bz_NNT",
        {"precision": "fp16", "arch": "sm120", "layout": "NNT"},
        "cuBLAS nvjet FP16 GEMM 128×128×64, NNT",
    ),
    (
        "nvjet_sm100_oohsh_256x256_128x4_2x1_2cta_v_bz_Avec16UE4M3_Bvec16UE4M3_TNT",
        {"precision": "nvfp4", "arch": "sm100", "cluster": "2x1x1"},
        "cuBLAS nvjet NVFP4 GEMM 256×256×128, TNT",
    ),
    (
        "nvjet_sm100_qqtst_128x256_128x6_2x1_2cta_v_bz_Avec32UE8M0_Bvec32UE8M0_TNN",
        {"precision": "mxfp8e4m3"},
        "cuBLAS nvjet MXFP8E4M3 GEMM 128×256×128, TNN",
    ),
    (
        "cutlass_80_wmma_tensorop_h161616gemm_32x32_128x2_tn_align8",
        {"library": "CUTLASS 2.x", "precision": "fp16", "op": "gemm", "tensor_cores": True},
        "CUTLASS WMMA FP16 GEMM 32×32, tn",
    ),
    (
        "flash_fwd_sm100_bf16_head_dim128_tile128x128",
        {"library": "FlashAttention 4 (CuTe DSL)", "precision": "bf16", "arch": "sm100"},
        "attention forward (FlashAttention 4) BF16 d128",
    ),
    (
        "void mul_mat_q<(ggml_type)12, 64, false>(char const*, char const*, float*, float*, int, "
        "int, int, int, int, int, int, int, int)",
        {"library": "llama.cpp (ggml CUDA)", "op": "gemm", "precision": "q4_k"},
        "llama.cpp Q4_K quantized matrix multiply (MMQ)",
    ),
    (
        "void mul_mat_vec_q<(ggml_type)39, 1>(void const*, void const*, float*, int, int, int, "
        "int)",
        {"op": "gemv", "precision": "mxfp4"},
        "llama.cpp MXFP4 quantized matrix-vector multiply (one token)",
    ),
    (
        "nvfuser_pointwise_f0_c1_r0_g0(<unnamed>::Tensor<float, 2, 2>, "
        "<unnamed>::Tensor<__bfloat, 2, 2>)",
        {"library": "nvFuser", "op": "elementwise", "precision": "bf16"},
        "nvFuser pointwise kernel BF16",
    ),
    (
        "fmhaSm100fKernel_QkvBfloat16OBfloat16H128PagedKvCausalP32VarSeqQ128Kv128PersistentContext",
        {"library": "TensorRT-LLM (trtllm-gen)", "precision": "bf16", "arch": "sm100"},
        "TRT-LLM trtllm-gen BF16 attention",
    ),
    (
        "bmm_Bfloat16_E4m3E4m3_Fp32_t128x8x128u2_s6_et64x8_m64x8x32_cga1x1x1_16dp256b_TN_transOut"
        "_schedS_sm100f",
        {"precision": "fp8e4m3", "arch": "sm100", "layout": "TN", "op": "gemm"},
        "TRT-LLM trtllm-gen FP8E4M3 GEMM 128x8x128",
    ),
    (
        "sm120_matMul_pointwise_pointwise",
        {"library": "cuDNN", "op": "gemm", "arch": "sm120", "epilogue": "pointwise+pointwise"},
        "cuDNN fused GEMM + 2 pointwise op(s)",
    ),
    (
        "void cudnn::fusion::fmha_reduce_head<float>(int)",
        {"library": "cuDNN", "op": "attention"},
        "cuDNN FP32 attention step: fmha_reduce_head",
    ),
    (
        "triton_tem_fused_flex_attention_0",
        {"library": "Triton (TorchInductor)", "op": "attention"},
        "Triton template (attention): flex + attention",
    ),
    (
        "triton_tem_fused_convolution_0",
        {"op": "conv"},
        "Triton template (convolution): convolution",
    ),
    (
        "void flashinfer::MXFP8QuantizeLinearKernel<__nv_bfloat16, 32>(__nv_bfloat16 const*, "
        "unsigned char*, unsigned char*, int)",
        {"library": "FlashInfer", "op": "quantize", "precision": "mxfp8"},
        "FlashInfer quantize to MXFP8 (from BF16)",
    ),
    (
        "aiter::fmha_fwd_hd128_bf16_causal_a32_rtz",
        {"library": "aiter (ROCm)", "op": "attention", "precision": "bf16"},
        "aiter attention forward BF16 d128",
    ),
    (
        "_ZN5aiter22fmha_fwd_hd128_bf16_causalE",
        {"library": "aiter (ROCm)", "op": "attention"},
        "aiter attention forward BF16 d128",
    ),
    (
        "scudnn_128x32_relu_small_nn_v1",
        {"library": "cuDNN", "op": "conv", "precision": "fp32", "arch": None},
        "cuDNN SIMT FP32 conv 128×32, nn",
    ),
    (
        "turing_fp16_s1688cudnn_fp16_128x128_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1",
        {"op": "conv", "precision": "fp16", "tensor_cores": True, "arch": "sm75"},
        "cuDNN tensor-core FP16 conv 128×128, tn",
    ),
]


@pytest.mark.parametrize("name, fields, short", CASES, ids=[c[0][:40] for c in CASES])
def test_each_name_decodes_to_its_fields(name, fields, short):
    k = decode(name)
    for field, want in fields.items():
        assert getattr(k, field) == want, (field, getattr(k, field))
    assert k.short == short


def test_a_ggml_type_number_it_does_not_know_is_said_not_guessed():
    k = decode("void mul_mat_q<(ggml_type)77, 64, false>(char const*)")
    assert k.library == "llama.cpp (ggml CUDA)" and k.precision is None


def test_an_mx_scale_with_an_element_type_the_letters_do_not_give_has_no_precision():
    k = decode("nvjet_sm100_oohsh_256x256_128x4_2x1_2cta_v_bz_Avec32UE8M0_Bvec32UE8M0_TNT")
    assert k.precision is None and "UE8M0 per 32" in k.details["block_scaled"]
