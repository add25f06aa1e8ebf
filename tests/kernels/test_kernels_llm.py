"""The kernel-name decoder on the LLM stack's kernels (tests/data/kernel_names_llm.json) and per
library.

The corpus holds names from public profiles (torch.profiler and nsys tables of vLLM, SGLang and
TensorRT-LLM serving runs) and from the libraries' sources (kernel templates spelled as profilers
print them), each annotated from the source that defines the kernel, not from the decoder: family,
library, op, and precision, tensor cores and geometry where the name carries them. ``a|b`` lists
readings that each count as right (a kernel vLLM and SGLang both ship, a kernel that fuses RoPE with
the KV-cache write); a library matches by prefix ("vLLM" is right for "vLLM (Marlin)").
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from gpumagic.kernels import FAMILIES, KernelName, decode
from gpumagic.render.timeline import FAMILY_COLORS, FAMILY_LABELS

from ..helpers import DATA
from .conftest import MB, decode_times

LLM = json.loads((DATA / "kernel_names_llm.json").read_text())
LLM_FAMILIES = (
    "vllm",
    "sglang",
    "flashinfer",
    "trtllm",
    "flashmla",
    "deepgemm",
    "deepep",
    "transformer_engine",
    "liger",
    "mamba",
    "xformers",
    "bitsandbytes",
    "apex",
    "torchao",
)


def field_of(k: KernelName, name: str) -> object:
    return getattr(k, name) if hasattr(k, name) and name != "details" else k.details.get(name)


def right(k: KernelName, name: str, want: object) -> bool:
    got = field_of(k, name)
    if not isinstance(want, str):
        return got == want
    alternatives = tuple(want.split("|"))
    return got.startswith(alternatives) if name == "library" else got in alternatives


def one(name: str) -> KernelName:
    return decode(name)


@pytest.mark.parametrize("entry", LLM, ids=[f"{i}:{e['name'][:50]}" for i, e in enumerate(LLM)])
def test_llm_corpus_name_decodes_to_its_annotated_fields(entry):
    k = decode(entry["name"])
    wrong = {f: (field_of(k, f), w) for f, w in entry["expect"].items() if not right(k, f, w)}
    assert not wrong, f"{entry['name'][:120]}: (got, expected) {wrong}"
    assert k.family in FAMILIES and "decode_error" not in k.details
    assert k.short and len(k.short) < 120 and k.explain()


def test_llm_corpus_is_sourced_and_covers_every_library():
    assert len(LLM) >= 100
    names = [e["name"] for e in LLM]
    assert len(set(names)) == len(names)
    assert all(e["source"] and {"family", "library", "op"} <= set(e["expect"]) for e in LLM)
    families = {f for e in LLM for f in e["expect"]["family"].split("|")}
    assert families >= {*LLM_FAMILIES, "nvjet", "cutlass3"}
    ops = {o for e in LLM for o in e["expect"]["op"].split("|")}
    assert ops >= {
        "gemm",
        "attention",
        "norm",
        "rope",
        "quantize",
        "dequantize",
        "moe_routing",
        "moe_permute",
        "all_to_all",
        "kv_cache_write",
        "sampling",
        "loss",
        "scan",
        "conv",
        "activation",
    }
    precisions = {e["expect"].get("precision") for e in LLM}
    assert precisions >= {"bf16", "fp16", "fp8e4m3", "int4", "nf4", "fp4e2m1", "fp6e3m2"}


def test_every_library_family_has_a_timeline_colour_and_a_legend_label():
    assert set(FAMILIES) <= set(FAMILY_COLORS) and set(FAMILIES) <= set(FAMILY_LABELS)
    assert len(set(FAMILY_COLORS.values())) == len(FAMILY_COLORS)


def test_nvjet_names_without_the_sm_token_read_as_the_sm90_form_does():
    new, old = (
        one("nvjet_tst_192x8_64x8_2x1_v_bz_TNT"),
        one("nvjet_sm90_tst_192x8_64x8_2x1_v_bz_TNT"),
    )
    for f in (
        "family",
        "library",
        "op",
        "precision",
        "tile",
        "stages",
        "cluster",
        "layout",
        "tensor_cores",
    ):
        assert getattr(new, f) == getattr(old, f), f
    assert (new.arch, old.arch) == (None, "sm90")
    fp8 = one("nvjet_qqtst_128x128_128x6_1x2_h_bz_coopA_algo2_TNT")
    assert (fp8.precision, fp8.details["schedule"], fp8.tile) == (
        "fp8e4m3",
        "cooperative",
        "128x128x128",
    )


def test_vllm_custom_ops():
    act = one(
        "void vllm::act_and_mul_kernel<c10::Half, &vllm::gelu_kernel<c10::Half>, true>(c10::Half*, "
        "c10::Half const*, int)"
    )
    assert (act.family, act.library, act.op, act.precision) == (
        "vllm",
        "vLLM",
        "activation",
        "fp16",
    )
    rope = one(
        "void vllm::rotary_embedding_kernel<c10::BFloat16, false>(long const*, c10::BFloat16*, "
        "c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)"
    )
    assert (rope.op, rope.precision) == ("rope", "bf16")
    cache = one(
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, "
        "(vllm::Fp8KVCacheDataType)1>(__nv_bfloat16 const*)"
    )
    assert (cache.op, cache.precision, cache.details["kv_cache"]) == (
        "kv_cache_write",
        "bf16",
        "fp8e4m3",
    )
    pa = one(
        "void vllm::paged_attention_v1_kernel<c10::Half, c10::Half, 64, 32, 128, "
        "(vllm::Fp8KVCacheDataType)0, "
        "true>(c10::Half*)"
    )
    assert (pa.op, pa.tensor_cores) == ("attention", False)
    assert (
        one("void vllm::moe::topkGatingSoftmax<4, 64, 4, 8, 32, int, float>(float const*)").op
        == "moe_routing"
    )


def test_marlin_reads_its_scalar_type_ids():
    # vllm::ScalarType ids (csrc/core/scalar_type.hpp): exponent, mantissa, sign, bias packed from
    # the low bits
    k = one(
        "void marlin::Marlin<(long)1125899906909960, (long)1125899907892224, "
        "(long)1125899906909960, 256>"
    )
    assert (k.library, k.op, k.precision, k.details["activation"], k.tensor_cores) == (
        "vLLM (Marlin)",
        "gemm",
        "int4",
        "bf16",
        True,
    )
    fp8 = one(
        "void marlin::Marlin<(long)1125899906910725, (long)2814749767172868, "
        "(long)1125899906910725, 128>"
    )
    assert fp8.details.get("weight_only") and fp8.details["activation"] == "fp16"


def test_weight_only_gemms_give_weight_and_activation_precision():
    awq = one("void vllm::awq::gemm_forward_4bit_cuda_m16nXk32<64>(int, int, __nv_bfloat16*, int*)")
    assert (awq.precision, awq.details["activation"], awq.tensor_cores) == ("int4", "bf16", True)
    gptq = one("void vllm::gptq::gemm_half_q_half_gptq_8bit_kernel<true, 2>(__half const*)")
    assert (gptq.precision, gptq.details["activation"], gptq.tensor_cores) == (
        "int8",
        "fp16",
        False,
    )
    fp6 = one("void QUANT_GEMM_Kernel<TilingConfig<4, 1, 8>, __nv_bfloat16, 2, 2>(int4 const*)")
    assert (fp6.library, fp6.precision, fp6.details["activation"]) == (
        "torchao (FP6-LLM)",
        "fp5e2m2",
        "bf16",
    )


def test_cutlass3_templates_inside_pytorch_and_vllm():
    k = one(
        "void "
        "cutlass::device_kernel<at::cuda::detail::enable_3x_kernel_for_sm9x<cutlass::gemm::kernel::"
        "GemmUniversal<cute::tuple<int, int, int>, "
        "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::"
        "MainloopSm90TmaGmmaWarpSpecialized<3, cute::tuple<cute::C<1>, cute::C<2>, "
        "cute::C<1> >, cutlass::gemm::"
        "KernelTmaWarpSpecializedPingpong>, cute::tuple<cute::C<64>, cute::C<128>, cute::C<128> >, "
        "cutlass::float_e5m2_t, cute::tuple<long, cute::C<1>, long>, cutlass::float_e4m3_t> > > >"
    )
    assert (k.family, k.library, k.op, k.precision) == (
        "cutlass3",
        "CUTLASS 3.x (in PyTorch)",
        "gemm",
        "fp8e5m2",
    )
    assert (k.tile, k.cluster, k.stages, k.arch, k.details["schedule"]) == (
        "64x128x128",
        "1x2x1",
        3,
        "sm90",
        "TmaWarpSpecializedPingpong",
    )
    fa3 = one(
        "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::"
        "CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, "
        "cute::tuple<cute::"
        "C<128>, cute::C<128>, cute::C<128> >, 128, cutlass::bfloat16_t, float, "
        "cutlass::arch::Sm90> > > >"
    )
    assert (
        fa3.family == "flash_attention"
    )  # FlashAttention 3 in a device_kernel stays FlashAttention


def test_flashinfer_attention_sampling_and_cute_dsl():
    decode_k = one(
        "void flashinfer::SingleDecodeWithKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, "
        "4u, 8u, 16u, "
        "1u, 8u, flashinfer::DefaultAttention<false, false, false, false>, "
        "flashinfer::SingleDecodeParams"
        "<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16> >"
    )
    assert (decode_k.op, decode_k.tensor_cores, decode_k.precision) == ("attention", False, "bf16")
    prefill = one(
        "void "
        "flashinfer::SinglePrefillWithKVCacheKernel<flashinfer::KernelTraits<(flashinfer::MaskMode)1, "  # noqa: E501 (a kernel name as it ran)
        "64u, 1u, 8u, 16u, 4u, 1u, 4u, (flashinfer::PosEncodingMode)0, __half, __half, "
        "__half, float>>"
    )
    assert (prefill.op, prefill.tensor_cores, prefill.precision) == ("attention", True, "fp16")
    s = one(
        "void flashinfer::sampling::MinPSamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)1, "
        "(cub::BlockReduceAlgorithm)2, 4u, true, float, int>(float*)"
    )
    assert s.op == "sampling"
    dsl = one(
        "kernel_cutlass_kernel_flashinfernormkernelsrmsnormRMSNormKernel_object_at__tensorptrf16gmemalign128o1"
    )
    assert (dsl.library, dsl.op, dsl.precision) == ("FlashInfer (CuTe DSL)", "norm", "fp16")


def test_tensorrt_llm_generated_attention_names():
    v2 = one("fmha_v2_flash_attention_bf16_64_128_S_qkv_256_causal_alibi_sm90_kernel_nl_tiled")
    assert (v2.family, v2.op, v2.precision, v2.arch, v2.tile, v2.details["head_dim"]) == (
        "trtllm",
        "attention",
        "bf16",
        "sm90",
        "64x128",
        "256",
    )
    assert (
        one("fmha_v2_flash_attention_fp16_64_32_S_qkv_128_causal_sm86_kernel_nl").family
        != "flash_attention"
    )
    xqa = one("xqa_kernel_dt_fp16_d_64_beam_1_kvt_e4m3_nqpkv_4_m_16_sm_89")
    assert (xqa.precision, xqa.details["kv_cache"], xqa.arch) == ("fp16", "fp8e4m3", "sm89")
    gen = one(
        "gemm_Bfloat16_E4m3E4m3_Fp32_t128x64x128u2_s4_et64x64_m64x64x32_cga1x1x1_16dp256b_TN_sm100a"
    )
    assert (gen.op, gen.precision, gen.tile, gen.stages, gen.arch) == (
        "gemm",
        "fp8e4m3",
        "128x64x128",
        4,
        "sm100",
    )


def test_flashmla_is_not_flashattention():
    k = one(
        "void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, "
        "8, cutlass::half_t, "
        "512>, false, flash::SharedStorageMLA<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, "
        "cutlass::half_t, 512>>>"
    )
    assert (k.family, k.library, k.op, k.precision, k.details["head_dim"]) == (
        "flashmla",
        "FlashMLA",
        "attention",
        "fp16",
        576,
    )
    sm90 = one("void sm90::flash_fwd_splitkv_mla_fp8_sparse_kernel<64, 2>(SparseAttnParams)")
    assert (sm90.family, sm90.precision, sm90.arch) == ("flashmla", "fp8e4m3", "sm90")


def test_deepgemm_and_deepep():
    g = one(
        "void deep_gemm::sm100_fp8_gemm_1d1d_impl<(cute::UMMA::Major)0, "
        "(cute::UMMA::Major)0, 0u, 0u, 7168u, "
        "128u, 128u, 128u, 1u, 1u, 4u, (deep_gemm::GemmType)1>"
    )
    assert (g.library, g.op, g.precision, g.arch, g.details["grouped"]) == (
        "DeepGEMM",
        "gemm",
        "fp8e4m3",
        "sm100",
        "grouped (M, contiguous)",
    )
    bf16 = one("void deep_gemm::sm90_bf16_gemm_impl<0u, 0u, 4096u, 1u, 128u, 256u, 64u>(int*)")
    assert (bf16.precision, bf16.tensor_cores) == ("bf16", True)
    d = one("void deep_ep::internode::combine<__nv_bfloat16, 4, 8, 7168, 8>(int4*)")
    assert (d.family, d.op, d.details["phase"], d.details["scope"]) == (
        "deepep",
        "all_to_all",
        "combine",
        "internode",
    )
    ll = one("void deep_ep::internode_ll::dispatch<false, false, 4096>(void*)")
    assert (ll.details["phase"], ll.precision) == ("dispatch", None)


def test_transformer_engine_liger_mamba():
    ct = one(
        "void transformer_engine::multi_cast_transpose_kernel<8, true, __nv_bfloat16, "
        "__nv_fp8_e5m2, float>"
        "(transformer_engine::(anonymous namespace)::MultiCastTransposeArgs)"
    )
    assert (ct.family, ct.op, ct.precision) == ("transformer_engine", "quantize", "fp8e5m2")
    for name, op in (
        ("_fused_add_rms_norm_backward_kernel", "norm"),
        ("_kldiv_kernel_forward", "loss"),
        ("_triton_qwen2vl_mrope", "rope"),
        ("_geglu_tanh_forward_kernel", "activation"),
    ):
        k = one(name)
        assert (k.family, k.library, k.op) == ("liger", "Liger (Triton)", op), name
    assert (
        one("_rms_norm_fwd_kernel").family == "other"
    )  # a bare Triton name that is not Liger's stays unclaimed
    cc = one(
        "void "
        "causal_conv1d_channellast_fwd_kernel<Causal_conv1d_channellast_fwd_kernel_traits<128, "
        "4, 64, "
        "true, c10::Half, c10::Half> >(ConvParamsBase)"
    )
    assert (cc.family, cc.op, cc.precision) == ("mamba", "conv", "fp16")


def test_xformers_bitsandbytes_apex():
    xf = one(
        "fmha_cutlassF_f32_notaligned_32x128_gmem_sm75(AttentionKernel<float, "
        "cutlass::arch::Sm75, false, 32, "
        "128, 65536, true, true>::Params)"
    )
    assert (xf.family, xf.library.split(" (")[0], xf.precision, xf.arch) == (
        "xformers",
        "xFormers",
        "fp32",
        "sm75",
    )
    torch_own = one(
        "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::"
        "half_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)"
    )
    assert torch_own.family == "flash_attention"  # PyTorch's own copy keeps its reading
    q = one(
        "void kQuantizeBlockwise<__nv_bfloat16, 4096, 4, 0, 0>(float*, __nv_bfloat16*, "
        "float*, unsigned char*, "
        "float*, int, int)"
    )
    assert (q.family, q.op, q.precision) == ("bitsandbytes", "quantize", "int8")
    lamb = one(
        "void multi_tensor_apply_kernel<TensorListMetadata<2>, LAMBStage2Functor<c10::Half>, "
        "float*, float*, "
        "float>(long, int volatile*, TensorListMetadata<2>, LAMBStage2Functor<c10::Half>, "
        "float*, float*, float)"
    )
    assert (lamb.family, lamb.op, lamb.precision) == ("apex", "optimizer", "fp16")
    aten = one(
        "void at::native::(anonymous "
        "namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
        "TensorListMetadata<4>, at::native::(anonymous "
        "namespace)::FusedAdamMathFunctor<float, 4>>(int)"
    )
    assert aten.family == "aten"  # PyTorch's multi-tensor kernel is not Apex's


def test_what_each_op_of_the_stack_reads_as_in_unseen_names():
    # names written from the libraries' conventions, not taken from the corpus
    cases = {
        "void vllm::silu_and_mul_quant_kernel<c10::BFloat16, "
        "c10::Float8_e4m3fn>(c10::Float8_e4m3fn*)": "activation",
        "void vllm::dynamic_scaled_int8_quant_kernel<c10::Half, float>(c10::Half const*)": "quantize",  # noqa: E501 (a kernel name as it ran)
        "void vllm::cp_gather_cache<__nv_bfloat16>(__nv_bfloat16 const*)": "copy",
        "void "
        "tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::BlockScaleQuantizationType)0, "  # noqa: E501 (a kernel name as it ran)
        "__nv_bfloat16, 16, false>(int)": "quantize",
        "void flashinfer::BatchQKApplyLlama31RotaryPosIdsKernel<false, 128u, 8u, 16u, "
        "__half, int>(int)": "rope",
        "void sglang::cross_device_reduce_2stage<__nv_bfloat16, 8>(sglang::RankData*)": "communication",  # noqa: E501 (a kernel name as it ran)
        "void transformer_engine::dequantize_kernel<__nv_fp8_e4m3, __nv_bfloat16>(int)": "dequantize",  # noqa: E501 (a kernel name as it ran)
    }
    for name, op in cases.items():
        assert decode(name).op == op, name


def test_llm_corpus_share_of_fields_right():
    total, good = Counter(), Counter()
    for e in LLM:
        k = decode(e["name"])
        for f, w in e["expect"].items():
            total[f] += 1
            good[f] += right(k, f, w)
    assert sum(good.values()) == sum(total.values()), {f: (good[f], total[f]) for f in total}


#: hostile shapes aimed at the LLM stack's decoders: deep nests, long runs and repeats of the tokens
#: they look for
LLM_SHAPES = [
    ("vLLM template nest", "void vllm::k<", "a<", ">()"),
    ("vLLM element types", "void vllm::rms_norm_kernel<", "c10::BFloat16, ", ">()"),
    ("Marlin scalar ids", "void marlin::Marlin<", "1125899906910725, ", ">()"),
    ("upper-case run (snake case)", "void vllm::", "A", "()"),
    ("fmha_v2 arch tokens", "fmha_v2_", "_sm1_kernel", "!"),
    ("fmha_v2 dtype tokens", "fmha_v2_", "fp16_", "_sm90_kernel"),
    ("trtllm-gen fmha", "fmhaSm100aKernel_Q", "KvO", "H"),
    ("trtllm-gen gemm", "bmm_E4m3_", "t1x1x1_", "x"),
    ("CuTe DSL name", "kernel_cutlass_kernel_flashinfer", "_object_a", ""),
    (
        "CUTLASS device tuples",
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<CollectiveMma<",
        "cute::tuple<cute::C<1>, cute::C<1>, ",
        ">",
    ),
    (
        "CUTLASS mainloop words",
        "void cutlass::device_kernel<GemmUniversal<CollectiveMma<",
        "Mainloop",
        "<",
    ),
    ("CUTLASS MMA atoms", "void cutlass::device_kernel<GemmUniversal<", "SM90_1x1x1_", "a"),
    ("mangled CUTLASS", "_ZN7cutlass13device_kernelI13GemmUniversal", "MMA_1x1x1_F32A", ""),
    ("DeepGEMM", "void deep_gemm::sm90_", "fp8_", "impl<(deep_gemm::GemmType)1>()"),
    ("DeepEP scopes", "void deep_ep::", "intranode::", "dispatch<true>()"),
    ("bitsandbytes arguments", "void kDequantizeBlockwise<", "1, ", "2>()"),
    ("Apex functors", "void multi_tensor_apply_kernel<", "AdamFunctor<", ">()"),
    ("Transformer Engine namespaces", "void transformer_engine::", "a::", "k<>()"),
    (
        "FlashMLA traits",
        "void flash::flash_fwd_splitkv_mla_kernel<",
        "Flash_fwd_kernel_traits_mla<1, ",
        ">()",
    ),
    ("FlashInfer device kernel", "void cutlass::device_kernel<flashinfer::", "a::", ">"),
    ("bare Triton-like name", "_", "a_", "kernel"),
]


def test_a_megabyte_hostile_llm_name_decodes_in_well_under_a_tenth_of_a_second():
    times = decode_times(LLM_SHAPES, MB, timeout=60)
    slow = [(label, round(took, 4)) for label, _, took in times if took > 0.05]
    assert not slow, slow


def test_llm_names_grow_linearly_with_their_length():
    """Decoding time at 8× the length stays within ~8× (plus noise): no shape is quadratic."""
    small = {label: took for label, _, took in decode_times(LLM_SHAPES, 4_000, timeout=30)}
    big = decode_times(LLM_SHAPES, 32_000, timeout=30)
    slow = [
        (label, round(took, 4)) for label, _, took in big if took > max(0.02, 30 * small[label])
    ]
    assert not slow, slow
