"""The kernel-name decoder on AMD ROCm's kernels: Tensile GEMMs (hipBLASLt / rocBLAS), MIOpen,
Composable Kernel, RCCL and the HIP runtime's blit kernels (gpumagic/kernels/rocm.py).

Names come from public sources, cited per case: the MI250 training trace in Holistic Trace
Analysis' test data (facebookresearch/HolisticTraceAnalysis ``tests/data/amd_trace/
mi250_minitoy_train_ROCm6_2_kineto.json.gz``, MIT; read in place from ``shared/data/public/hta``),
a public rocprofv3 ``--stats`` tutorial of a ResNet training run on MI300 (kernel_stats.csv, quoted
in its README), and ROCm's own sources (MIOpen's solvers, rocRoller's tests). Expectations follow
each library's naming scheme (see the module docstring), not the decoder's output.
"""

from __future__ import annotations

import pytest

from gpumagic.kernels import FAMILIES, decode

from .conftest import decode_times

# HTA amd_trace (MI250, ROCm 6.2): the trace's two GEMMs, launched by hipExtModuleLaunchKernel
HTA_TN = (
    "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1"
    "_CLR1_CADS0_EPS0_GRVWA2_GRVWB2_GSUAMB_ISA90a_IU1_K1_LBSPPA128_LBSPPB128_LBSPPM0_LPA8_LPB8"
)
HTA_NT = (
    "Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1"
    "_CLR1_CADS0_EPS0_GRVWA1_GRVWB1_GSUAMB_ISA90a_IU1_K1_LBSPPA0_LBSPPB0_LBSPPM0_LPA0_LPB0"
)


@pytest.mark.parametrize(
    ("name", "layout", "tile"), [(HTA_TN, "TN", "64x16x32"), (HTA_NT, "NT", "64x16x16")]
)
def test_tensile_gemms_of_an_mi250_trace_say_layout_precision_tile_and_matrix_cores(
    name, layout, tile
):
    k = decode(name)
    assert k.library.startswith("hipBLASLt/rocBLAS (Tensile)") and k.op == "gemm"
    assert k.precision == "fp32" and k.layout == layout and k.tile == tile
    assert k.tensor_cores is True and k.math == "matrix cores (MFMA)"
    assert k.arch == "gfx90a" and k.epilogue == "bias"
    assert k.details["matrix_instruction"] == "16x16x1"
    assert len(k.short) <= 80 and "MFMA" in k.short and "TF32" not in k.short


def test_tensile_type_codes_read_inputs_output_and_compute_type():
    # rocRoller's test kernel name (ROCm/rocRoller, a Tensile-named fp16 GEMM)
    k = decode("Cijk_Ailk_Bjlk_HHS_BH_MT128x256x16_MI32x32x8x1_SE_K1")
    assert (k.precision, k.dtypes, k.layout) == ("fp16", ("fp16", "fp32"), "NT")
    assert k.details["compute_type"] == "fp32" and k.tile == "128x256x16"


def test_tensile_without_a_matrix_instruction_runs_on_the_vector_alus():
    # Tensile's own MIOpen configs for Vega 20 (ROCm/Tensile Tensile/Configs/miopen): no MI token
    k = decode("Cijk_Ailk_Bljk_SB_MT128x128x32_DTL0_GRVW04_LPB00_PBC0_PGR0_TT08_08_VW04_WG16_16_01")
    assert k.tensor_cores is False and k.precision == "fp32" and k.layout == "NN"


def test_rdna_tensile_kernels_use_wmma():
    # hipBLASLt gfx1151 library logic name (ROCm/hipBLASLt Logic/asm_full/gfx1151)
    k = decode("Cijk_Ailk_Bjlk_HHS_BH_Bias_HAS_SAV_UserArgs_MT64x96x32_MI16x16x1_SN_ISA1151_K1")
    assert k.math == "matrix cores (WMMA)" and k.arch == "gfx1151"


# rocprofv3 --stats of a ResNet training run on MI300 (public tutorial's kernel_stats.csv)
@pytest.mark.parametrize(
    ("name", "op", "precision", "tensor_cores"),
    [
        ("MIOpenBatchNormBwdSpatial", "norm", None, None),
        ("MIOpenBatchNormFwdTrainSpatial", "norm", None, None),
        ("SubTensorOpWithScalar1d", "elementwise", None, None),
        (
            "igemm_fwd_gtcx3_nhwc_fp16_bx0_ex0_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64"
            "_tb1x8x2x1_1x4x1x64_gkgs",
            "conv_fprop",
            "fp16",
            True,
        ),
        (
            "igemm_wrw_gtcx3_nhwc_fp16_bx0_ex1_bt256x256x32_wt32x32x8_ws2x2_wr2x2_ta1x4x1x8_1x8x1x32"
            "_tb1x4x1x8_1x8x1x32_gkgs",
            "conv_wgrad",
            "fp16",
            True,
        ),
        (
            "igemm_bwd_gtcx3_nhwc_fp16_bx0_ex0_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64"
            "_tb1x8x1x2_1x4x1x64_gkgs",
            "conv_dgrad",
            "fp16",
            True,
        ),
        # MIOpen's Winograd solver kernel names (ROCm/MIOpen src/solver/conv_bin_winoRxS.cpp)
        ("miopenSp3AsmConv_v30_3_1_gfx9_fp32_f2x3_stride1", "conv", "fp32", False),
    ],
)
def test_miopen_kernels_of_a_resnet_training_run(name, op, precision, tensor_cores):
    k = decode(name)
    assert k.library == "MIOpen" and k.op == op
    assert k.precision == precision and k.tensor_cores is tensor_cores
    assert k.family in FAMILIES and len(k.short) <= 80


def test_igemm_kernels_carry_their_block_tile_and_layout():
    k = decode(
        "igemm_fwd_gtcx3_nhwc_fp16_bx0_ex0_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64"
        "_tb1x8x2x1_1x4x1x64_gkgs"
    )
    assert (k.tile, k.layout, k.details["matrix_instruction"]) == ("128x128x32", "NHWC", "32x32x8")


def test_rccl_and_hip_blit_kernels():
    # the same rocprofv3 tutorial's 4-rank run: RCCL's entry kernel and the runtime's copy kernel
    k = decode("rccl_main_kernel(ncclDevComm*, unsigned long, ncclWork*)")
    assert (k.family, k.library, k.op) == ("nccl", "RCCL", "communication")
    k = decode("__amd_rocclr_copyBuffer")
    assert (k.family, k.op) == ("memop", "copy") and k.library.startswith("HIP runtime")
    assert decode("__amd_rocclr_fillBufferAligned").op == "memset"


def test_composable_kernel_gemm_reads_its_element_types():
    # CK's block-scale FP8 GEMM as an MI300 vLLM trace names it (a public GEMM-name parser's tests)
    k = decode(
        "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemmMultiD_ABScale_xdl_cshuffle_v3<"
        "ck::tensor_layout::gemm::RowMajor, ck::tensor_layout::gemm::ColumnMajor, ck::Tuple<>, "
        "ck::tensor_layout::gemm::RowMajor, ck::f8_fnuz_t, ck::f8_fnuz_t, float, float, "
        "ck::Tuple<>, unsigned short> >(ck::Argument)"
    )
    assert k.library == "Composable Kernel" and k.op == "gemm"
    assert k.precision == "fp8e4m3" and k.tensor_cores is True and "MFMA" in k.math


ROCM_SHAPES = [
    ("Tensile tokens", "Cijk_Ailk_Bljk_SB_", "MT1x1x1_", "K1"),
    ("Tensile type run", "Cijk_Ailk_Bljk_", "HHS", "_BH"),
    ("igemm tokens", "igemm_fwd_gtc", "x_", "_fp16"),
    ("igemm layout", "igemm_fwd_gtcx_n", "hwc", "_fp16_bt1x1x1"),
    ("Winograd versions", "miopenSp3AsmConv", "_v1_1_1", "_gfx9_fp32"),
    ("naive conv", "naive_conv_fwd_", "nchw_", "float"),
    ("CK templates", "void ck::kernel_gemm_xdl<", "ck::half_t, ", ">()"),
    ("rocBLAS names", "rocblas_", "gemv_", "kernel"),
]


def test_rocm_names_grow_linearly_with_their_length():
    small = {label: took for label, _, took in decode_times(ROCM_SHAPES, 4_000, timeout=30)}
    big = decode_times(ROCM_SHAPES, 32_000, timeout=30)
    slow = [
        (label, round(took, 4)) for label, _, took in big if took > max(0.02, 30 * small[label])
    ]
    assert not slow, slow
