"""A kernel's precision is its operands', not its compute type's: cuBLAS's small-N GEMM
instantiated ``<float, ..., cublasGemvTensorStridedBatched<__nv_bfloat16 const>, ...>`` runs on
bf16 operands computed in fp32; ck_tile's generated attention names its bf16 data ``DF16b``."""

from __future__ import annotations

from gpumagic.kernels import decode

GEMM_SN = (
    "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, "
    "cublasGemvTensorStridedBatched<{t} const>, cublasGemvTensorStridedBatched<{t} const>, "
    "cublasGemvTensorStridedBatched<{t}>>(int)"
)


def test_small_n_gemm_reads_its_operands_type_and_keeps_the_compute_type():
    k = decode(GEMM_SN.format(t="__nv_bfloat16"))
    assert k.precision == "bf16" and k.details["compute"] == "fp32"
    assert k.short == "cuBLAS BF16 small-N GEMM (TN)"
    plain = decode(GEMM_SN.format(t="float"))
    assert plain.precision == "fp32" and "compute" not in plain.details


def test_ck_tile_attention_on_df16b_data_is_bf16():
    k = decode(
        "void ck_tile::kentry<256, 1, ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVSAsync<"
        "ck_tile::BlockFmhaPipelineProblem<ck_tile::DF16b, ck_tile::DF16b, ck_tile::DF16b, float, "
        "float, ck_tile::DF16b>>>>(ck_tile::FmhaFwdKernel)"
    )
    assert k.library == "Composable Kernel" and k.op == "attention" and k.precision == "bf16"
