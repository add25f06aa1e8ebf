"""The hand-labelled corpus of Blackwell, GB10 / sm_120, ROCm, llama.cpp and nvFuser names
(tests/data/kernel_names_blackwell.json), and the rule every corpus keeps: a decoded precision is a
precision (never a raw token), and a narrow or block-scaled one is spelled by the name itself."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from gpumagic.kernels import decode
from gpumagic.kernels.ggml import GGML_TYPES
from gpumagic.kernels.name import DTYPE

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
CORPUS = json.loads((DATA / "kernel_names_blackwell.json").read_text())
EVERY_CORPUS = sorted(DATA.glob("kernel_names*.json"))


def _field(k, name):
    return getattr(k, name) if hasattr(k, name) and name != "details" else k.details.get(name)


def _right(got, name, want):
    if not isinstance(want, str):
        return got == want
    alternatives = tuple(want.split("|"))
    if name == "library":
        return isinstance(got, str) and got.startswith(alternatives)
    return got in alternatives


@pytest.mark.parametrize("entry", CORPUS, ids=[e["name"][:50] for e in CORPUS])
def test_each_corpus_name_decodes_to_its_labels(entry):
    k = decode(entry["name"])
    wrong = {
        f: (want, _field(k, f))
        for f, want in entry["expect"].items()
        if not _right(_field(k, f), f, want)
    }
    assert not wrong, wrong


def test_the_corpus_is_the_size_the_issue_asks_for():
    tags = [t for e in CORPUS for t in e["tags"]]
    assert len(CORPUS) >= 150 and tags.count("blackwell") >= 60 and tags.count("gb10") >= 20
    assert all(e["source"] for e in CORPUS)


#: Every precision a decoder may report: the dtype vocabulary, ggml's weight formats, and the
#: narrow and block-scaled formats.
VOCABULARY = (
    set(DTYPE.values())
    | {t.lower() for t in GGML_TYPES.values()}
    | {"fp16", "bf16", "tf32", "fp8e4m3", "fp8e5m2", "fp8", "nvfp4", "mxfp4", "mxfp8"}
    | {"mxfp8e4m3", "mxfp8e5m2", "mxfp6e2m3", "mxfp6e3m2", "fp4e2m1", "nf4", "int4", "uint4"}
    | {"16-bit", "32-bit", "64-bit", "8-bit", "bool", "int16", "int64", "uint32", "uint64"}
    | {"complex64", "complex128", "uint8", "int32", "fp16/bf16", "fp6e3m2", "fp6e2m3"}
)
GGML_NAMES = {t.lower() for t in GGML_TYPES.values()} - {"f16", "f32", "bf16", "f64"}
#: A narrow or block-scaled precision must be spelled by the name: what each is written as.
EVIDENCE = {
    # DeepEP's dispatch<kUseFP8, ...>: its first template argument says FP8
    "fp8e4m3": r"e4m3|fp8|f8|nvjet_(?:sm\d+_)?q|deep_ep::\w+::dispatch<true",
    # torchao's FP6-LLM: QUANT_GEMM_Kernel<..., EXPONENT, MANTISSA>
    "fp6e3m2": r"quant_gemm_kernel<.*, 3, 2>",
    "fp8e5m2": r"e5m2|fp8|f8",
    "fp8": r"fp8|f8|e4m3|e5m2",
    "nvfp4": r"ue4m3|nvfp4|vec16",
    "mxfp8": r"ue8m0|mxfp8",
    "mxfp8e4m3": r"ue8m0xe4m3|vec32ue8m0|mxfp8",
    "mxfp8e5m2": r"ue8m0xe5m2|mxfp8",
    "mxfp6e2m3": r"e2m3|mxfp6",
    "mxfp6e3m2": r"e3m2|mxfp6",
    "mxfp4": r"mxfp4|ue8m0xe2m1|1x32fp4|\(ggml_type\)39\b",
    "fp4e2m1": r"e2m1|fp4|f4|quantizeblockwise",
    "nf4": r"nf4|quantizeblockwise",
    "int8": r"int8|i8|s8|biu|i\d{4,5}|char|imma|8bit|dp4a",
    # Marlin spells its weight type as vLLM's ScalarType id among its template numbers
    "int4": r"int4|s4|i4|4bit|awq|marlin",
    "uint4": r"uint4|u4|marlin",
}


def _corpus_names():
    for path in EVERY_CORPUS:
        for e in json.loads(path.read_text()):
            yield path.name, e["name"]


@pytest.mark.parametrize("path", EVERY_CORPUS, ids=[p.name for p in EVERY_CORPUS])
def test_no_decoded_precision_is_absent_from_the_names_own_tokens(path):
    bad = []
    for e in json.loads(path.read_text()):
        k = decode(e["name"])
        p = k.precision
        if p is None:
            continue
        text = f"{k.name} {k.demangled}".lower()
        if p not in VOCABULARY:
            bad.append((p, "not a precision", e["name"][:80]))
        elif p in EVIDENCE and not re.search(EVIDENCE[p], text):
            bad.append((p, "not spelled by the name", e["name"][:80]))
        elif k.family == "ggml" and p in GGML_NAMES and "ggml_type" not in text:
            bad.append((p, "a ggml format without its type number", e["name"][:80]))
    assert not bad, bad


@pytest.mark.parametrize(
    "name",
    [
        "cutlass3x_sm120_bstensorop_s16832gemm_block_scaled_ue8m0xe4m3_ue8m0xe4m3_f32_bf16_bf16",
        "nvjet_sm120_zzz_mma_128x128x64_2_64x64x64_tmaAB_bz_TNNN",
        "nvjet_sm100_oohsh_128x256_256x5_2x2_2cta_h_bz_Avec16UE4M3_Bvec16UE4M3_TNT",
        "mul_mat_q<(ggml_type)77, 64, false>",
        "kernel_cutlass_kernel___main__PersistentDenseGemmKernel_object_at__TiledMMA_ShapeMNK1281288",
    ],
)
def test_an_mma_shape_or_unknown_letter_is_never_a_precision(name):
    k = decode(name)
    assert k.precision in VOCABULARY | {None}
    assert k.precision not in ("fp8e5m2", "fp32", "tf32")


def test_a_cut_name_says_so_and_keeps_what_survives():
    k = decode("nvjet_sm121_tst_mma_192x16x64_..._splitK_TNNN")
    assert "cut_off" in k.details and "middle" in k.details["cut_off"]
    assert (k.precision, k.tile, k.layout, k.arch) == ("bf16", "192x16x64", "TNNN", "sm121")
    whole = decode("nvjet_sm121_tst_mma_160x128x64_2_80x32x64_tmaAB_alignCD4_bz_TNNN")
    assert "cut_off" not in whole.details and whole.stages == 2
    # a parameter list elided as (...) is the name's own spelling, not a cut
    assert (
        "cut_off" not in decode("void mul_mat_vec_q<(ggml_type)12, (int)7, (bool)0>(...)").details
    )


def test_sm120_block_scaled_cutlass_reads_operands_not_the_mma_shape():
    k = decode(
        "cutlass3x_sm120_bstensorop_s16864gemm_block_scaled_ue4m3xe2m1_ue4m3xe2m1_f32_bf16_bf16"
        "_128x128x256_1x1x1_0_tnn_align32_o_vs16_bias_bf16_relu"
    )
    assert (k.precision, k.details["mma_shape"], k.details["scale_vector"]) == (
        "nvfp4",
        "16×8×64",
        16,
    )
    mixed = decode(
        "cutlass3x_sm100_bssptensorop_bsspgemm_ue8m0xe2m3_ue8m0xe4m3_f32_f16_f16_128x128x256_0"
        "_vs64_tnt_align32_q_1sm"
    )
    assert mixed.precision is None and mixed.dtypes == ("mxfp6e2m3", "mxfp8e4m3")
    assert mixed.details["cta_group"] == 1


def test_fa4_and_cute_dsl_kernels_by_their_real_names():
    fa4 = decode(
        "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object_at_"
        "_tensorptrbf16gmemalign16o1"
    )
    assert (fa4.library, fa4.arch, fa4.precision) == (
        "FlashAttention 4 (CuTe DSL)",
        "sm100",
        "bf16",
    )
    gemm = decode("kernel_cutlass_kernel___main__HopperWgmmaGemmKernel_object_at__Valuetypef16_0")
    assert (gemm.library, gemm.op, gemm.arch, gemm.precision) == (
        "CUTLASS (CuTe DSL)",
        "gemm",
        "sm90",
        "fp16",
    )


def test_rocm_names_keep_their_arch_and_weights():
    custom = decode("Custom_Cijk_Ailk_Bljk_BBS_BH_Bias_SAV_UserArgs_MT128x128x64_MI16x16x1_gfx950")
    assert custom.arch == "gfx950" and custom.precision == "bf16"
    assert decode("_ZN5aiter33f4gemm_bf16_per1x32Fp4_tn_256x256E").precision == "mxfp4"
    assert decode("_ZN5aiter42fp8gemm_bf16_blockscale_BpreShuffle_32x128E").precision == "fp8e4m3"


def test_an_xmma_convolution_is_cudnns_and_blackwell_sdpa_runs_on_tensor_cores():
    assert decode("sm100_xmma_fprop_implicit_gemm_f16f16_f16f32_nhwc").library == "cuDNN"
    assert decode("sm90_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32").library == "cuBLAS"
    sdpa = decode("cudnn_generated_fort_native_sdpa_sm120_flash_fprop_f16_knob_3_64x64x64_4x1x1")
    assert sdpa.tensor_cores is True
    assert (
        decode("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_f16_knob_3").tensor_cores is None
    )
