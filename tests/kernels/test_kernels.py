"""The kernel-name decoder against a corpus of real names (tests/data/kernel_names.json) and
generated ones."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumagic.kernels import FAMILIES, KernelName, decode, demangle, normalize

from ..helpers import DATA

CORPUS = json.loads((DATA / "kernel_names.json").read_text())


def field_of(k: KernelName, name: str):
    if hasattr(k, name) and name not in ("details",):
        return getattr(k, name)
    return k.details.get(name)


@pytest.mark.parametrize(
    "entry", CORPUS, ids=[f"{i}:{e['name'][:50]}" for i, e in enumerate(CORPUS)]
)
def test_corpus_name_decodes_to_its_listed_fields(entry):
    k = decode(entry["name"])
    wrong = {f: (field_of(k, f), v) for f, v in entry["expect"].items() if field_of(k, f) != v}
    assert not wrong, f"{entry['name'][:120]}: (got, expected) {wrong}"


def test_corpus_is_large_and_sourced():
    assert len(CORPUS) >= 150
    assert all(e["source"] for e in CORPUS)
    families = {e["expect"].get("family") for e in CORPUS}
    assert families >= {
        "cutlass2",
        "cutlass3",
        "cublas_xmma",
        "cublas_legacy",
        "nvjet",
        "cudnn",
        "flash_attention",
        "aten",
        "triton",
        "nccl",
        "memop",
        "other",
    }


def test_every_corpus_name_has_a_short_label_and_explanation():
    for e in CORPUS:
        k = decode(e["name"])
        assert k.family in FAMILIES
        if e["name"]:
            assert k.short and len(k.short) < 120, e["name"]
            assert k.explain()


def test_seed_name_explained_token_by_token():
    k = decode("cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4")
    rows = {tok: (fld, meaning) for tok, fld, meaning in k.explain()}
    assert rows["80"][0] == "arch" and "SM 8.0" in rows["80"][1]
    assert rows["tensorop"][0] == "math" and "tensor cores" in rows["tensorop"][1]
    assert "16\u00d78\u00d78" in rows["s1688"][1] and "fp32" in rows["s1688"][1]
    assert rows["128x128"][0] == "tile"
    assert "K-tile 32" in rows["32x3"][1] and "3-stage" in rows["32x3"][1]
    assert rows["nn"][0] == "layout"
    assert rows["align4"][0] == "alignment"
    assert k.short == "CUTLASS tensor-core TF32 GEMM 128\u00d7128, nn"


def test_ffma_gemm_is_flagged_not_tensor_cores():
    k = decode(
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
    )
    assert k.tensor_cores is False and "FFMA" in k.math
    tf32 = decode(
        "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"
    )
    assert tf32.tensor_cores is True and tf32.precision == "tf32" and "wgmma" in tf32.math


def test_readable_short_forms():
    assert (
        decode(
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, "
            "std::array<char*, 3ul>)"
        ).short
        == "elementwise add (vectorized \u00d74)"
    )
    assert decode(
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)"
    ).short == ("CUTLASS SIMT FP32 GEMM 256\u00d7128, nn")
    assert (
        decode("ncclDevKernel_AllReduce_Sum_f32_RING_LL").short == "NCCL AllReduce fp32"
    )  # the rest is nominal
    assert decode("ncclDevKernel_AllReduce_Sum_bf16_TREE_LL").short == "NCCL AllReduce bf16 tree"
    said = " ".join(
        what for _, _, what in decode("ncclDevKernel_AllReduce_Sum_f32_RING_LL").explain()
    )
    assert "chosen at run time" in said and "every reduction operator" in said
    assert decode("triton_poi_fused_add_gelu_mul_0").short == "Triton pointwise: add + gelu + mul"


def test_nsys_and_profiler_spellings_decode_alike():
    torch_form = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
    )
    nsys_form = (
        "void at::native::vectorized_elementwise_kernel<(int)4, "
        "at::native::CUDAFunctor_add<float>, "
        "std::array<char *, (unsigned long)3>>(int, T2, T3)"
    )
    a, b = decode(torch_form), decode(nsys_form)
    assert (a.family, a.op, a.short, a.details["functor"]) == (
        b.family,
        b.op,
        b.short,
        b.details["functor"],
    )
    assert normalize("void <unnamed>::f<(int)4>()") == "void (anonymous namespace)::f<4>()"


def test_demangle():
    assert demangle(
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EEEEviT0_T1_"
    ).startswith(
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>"
    )
    assert demangle("not_mangled") == "not_mangled"
    assert demangle("_Zgarbage") == "_Zgarbage"


@given(st.text(max_size=300))
@settings(max_examples=300)
def test_any_text_decodes_without_raising(text):
    k = decode(text)
    assert k.family in FAMILIES
    assert isinstance(k.short, str)


# --- property tests: names generated from the CUTLASS grammars
# ---------------------------------------------------

dims = st.sampled_from([16, 32, 64, 128, 256])


@given(
    arch=st.sampled_from(["50", "70", "75", "80", "86", "89", "90"]),
    opclass=st.sampled_from(["tensorop", "simt"]),
    m=dims,
    n=dims,
    k=st.sampled_from([8, 16, 32, 64]),
    stages=st.integers(2, 9),
    layout=st.sampled_from(["nn", "nt", "tn", "tt"]),
    align=st.sampled_from([1, 2, 4, 8, 16]),
    wrapped=st.booleans(),
)
def test_cutlass2_generated_names(arch, opclass, m, n, k, stages, layout, align, wrapped):
    core = "s1688gemm" if opclass == "tensorop" else "sgemm"
    name = f"cutlass_{arch}_{opclass}_{core}_{m}x{n}_{k}x{stages}_{layout}_align{align}"
    if wrapped:
        name = f"void cutlass::Kernel2<{name}>({name}::Params)"
    d = decode(name)
    assert d.family == "cutlass2" and d.op == "gemm"
    assert d.arch == f"sm{arch}"
    assert d.tensor_cores is (opclass == "tensorop")
    assert d.tile == f"{m}x{n}x{k}" and d.stages == stages
    assert d.layout == layout and d.alignment == str(align)
    assert d.precision == ("tf32" if opclass == "tensorop" else "fp32")


c3_dtypes = st.sampled_from(
    [("f16", "fp16"), ("bf16", "bf16"), ("e4m3", "fp8e4m3"), ("f32", "tf32"), ("s8", "int8")]
)


@given(
    arch=st.sampled_from(["sm90", "sm90a", "sm100", "sm100a", "sm120"]),
    dt=c3_dtypes,
    acc=st.sampled_from(["f32", "f16", "s32"]),
    cd=st.sampled_from(["f16", "bf16", "f32", "void"]),
    m=dims,
    n=dims,
    k=st.sampled_from([32, 64, 128]),
    cm=st.sampled_from([1, 2, 4]),
    cn=st.sampled_from([1, 2]),
    stages=st.integers(0, 8),
    layout=st.sampled_from(["ntn", "tnt", "ttt", "nnn", "tnn"]),
    align=st.sampled_from([4, 8, 16]),
    schedule=st.sampled_from(["", "_warpspecialized_cooperative", "_warpspecialized_pingpong"]),
    epi=st.sampled_from(["", "_epi_tma", "_epi_nosmem"]),
)
def test_cutlass3_generated_names(
    arch, dt, acc, cd, m, n, k, cm, cn, stages, layout, align, schedule, epi
):
    code, canon = dt
    name = (
        f"cutlass3x_{arch}_tensorop_gemm_{code}_{code}_{acc}_{cd}_{cd if cd != 'void' else 'f16'}_"
        f"{m}x{n}x{k}_{cm}x{cn}x1_{stages}_{layout}_align{align}{schedule}{epi}"
    )
    d = decode(name)
    assert d.family == "cutlass3" and d.op == "gemm" and d.tensor_cores
    assert d.arch == arch.rstrip("a")
    assert d.precision == canon
    assert d.tile == f"{m}x{n}x{k}" and d.cluster == f"{cm}x{cn}x1"
    assert d.stages == (stages or None)
    assert d.layout == layout and d.alignment == str(align)
    if schedule:
        assert d.details["schedule"] == schedule[1:]
    if epi:
        assert d.epilogue == epi[1:]


def test_command_line_prints_the_explanation():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpumagic.kernels",
            "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (
        "CUTLASS tensor-core TF32 GEMM" in out
        and "align4" in out
        and "K-tile 32, 3-stage pipeline" in out
    )


# --- results are shared through the cache, so they must be read-only
# ---------------------------------------------


def test_a_decoded_result_cannot_be_changed_by_one_caller_for_the_next():
    name = "triton_poi_fused_add_gelu_mul_0"  # a result with a list inside details
    k = decode(name)
    before = (k.short, dict(k.details), k.tokens, k.dtypes, list(k.details["fused_ops"]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        k.short = "X"
    with pytest.raises(dataclasses.FrozenInstanceError):
        del k.family
    with pytest.raises(TypeError):
        k.details["kind"] = "X"
    with pytest.raises(AttributeError):
        k.details["fused_ops"].append("X")
    with pytest.raises(AttributeError):
        k.tokens.append(("X", "X", "X"))
    with pytest.raises(TypeError):
        k.tokens[0] = ("X", "X", "X")
    with pytest.raises(TypeError):
        k.tokens[0][2] = "X"
    k.explain().append(("X", "X", "X"))  # explain() hands out a copy
    again = decode(name)
    assert again is k
    assert (
        again.short,
        dict(again.details),
        again.tokens,
        again.dtypes,
        list(again.details["fused_ops"]),
    ) == before
    decode.cache_clear()
    assert decode(name) == k


def test_every_container_in_a_result_is_immutable():
    for e in CORPUS:
        k = decode(e["name"])
        assert isinstance(k.dtypes, tuple) and isinstance(k.tokens, tuple)
        assert all(isinstance(row, tuple) for row in k.tokens)
        assert isinstance(k.details, types.MappingProxyType)
        for value in k.details.values():
            assert not isinstance(value, (list, dict, set)), (e["name"][:80], value)


def test_a_result_built_by_hand_is_frozen_too():
    k = KernelName(name="x", details={"a": [1, 2]}, tokens=[("x", "name", "x")])
    assert k.details["a"] == [1, 2] and isinstance(k.details, types.MappingProxyType)
    with pytest.raises(AttributeError):
        k.details["a"].append(3)
    assert hash(k) == hash(KernelName(name="x", details={"a": [1, 2]}, tokens=[("x", "name", "x")]))


# --- math libraries: cuFFT, cuSOLVER, cuSPARSE, legacy cuBLAS
# -----------------------------------------------------


def test_corpus_covers_the_math_libraries():
    for family in ("cufft", "cusolver", "cusparse"):
        entries = [e for e in CORPUS if e["expect"].get("family") == family]
        assert len(entries) >= 8, family
        assert all(e["source"] for e in entries)
    helpers = [
        e
        for e in CORPUS
        if e["expect"].get("family") == "cublas_legacy" and e["expect"].get("op") != "gemm"
    ]
    assert len(helpers) >= 8


def test_cufft_template_arguments():
    k = decode(
        "void regular_fft_c2r<1008u, EPT<7u, 9u, 16u>, 2u, 4u, (padding_t)14, (twiddle_t)0, "
        "(loadstore_modifier_t)2, "
        "(layout_t)0, unsigned int, float, HostConfigPlaceholder>(kernel_arguments_t<unsigned int>)"
    )
    assert (k.family, k.op, k.precision) == ("cufft", "fft", "fp32")
    assert k.details["fft_size"] == 1008 and k.details["transform"] == "c2r"
    assert k.details["elements_per_thread"] == [7, 9, 16]
    assert "C2R" in k.short and "1008" in k.short


def test_bare_helper_names_say_too_little_to_claim():
    # any project can have a 'dot_kernel'; only a profiler's full signature names the library
    for name in (
        "dot_kernel",
        "gemmSN_NN_kernel",
        "splitKreduce_kernel",
        "lacpy_kernel",
        "csrmv_kernel",
    ):
        assert decode(name).family == "other", name
    assert (
        decode("void dot_kernel<float, 128, 0>(float*, int)").family == "other"
    )  # generic name, no cuBLAS types
    k = decode(
        "void dot_kernel<float, 128, 0, cublasDotParams<cublasGemvTensor<float const> > "
        ">(cublasDotParams)"
    )
    assert (k.family, k.op, k.precision) == ("cublas_legacy", "dot", "fp32")


def test_trsm_kernels_are_cublas_even_inside_cusolver_calls():
    # trsm_ln_kernel shows up in torch.linalg.solve (cuSOLVER getrs), but the kernel is libcublas'
    k = decode(
        "void trsm_ln_kernel<float, 32u, 32u, 4u, true>(int, int, float const*, int, float*, "
        "int, float)"
    )
    assert (k.family, k.library, k.op, k.precision) == ("cublas_legacy", "cuBLAS", "trsm", "fp32")
    assert (
        decode("void getrf_pivot<getrf_params_<double, 512, 1, 512, 512, 1> >(int)").family
        == "cusolver"
    )


def test_complex_element_types():
    assert decode("void gesvdbj_batch_32x16<float2, float>(long)").precision == "complex64"
    assert (
        decode("void getrf_pivot<getrf_params_<double2, 512, 2, 512, 256, 1> >(int)").precision
        == "complex128"
    )
    k = decode(
        "void cusparse::csrmv_v3_kernel<std::integral_constant<bool, false>, int, int, "
        "cusparse::Complex<double>>()"
    )
    assert (k.op, k.precision, k.details["index_type"]) == ("spmv", "complex128", "int32")


def test_nvprof_spelling_of_template_arguments():
    assert normalize("void f<unsigned int=128, bool=1, int=-2>(int)") == "void f<128, 1, -2>(int)"
    a = decode(
        "void regular_fft<unsigned int=128, unsigned int=1, unsigned int, "
        "double>(kernel_arguments_t<unsigned int>)"
    )
    b = decode("void regular_fft<128u, 1u, unsigned int, double>(kernel_arguments_t<unsigned int>)")
    assert (
        (a.family, a.short)
        == (b.family, b.short)
        == ("cufft", "cuFFT C2C FP64 FFT, size 128 (regular)")
    )


def test_nvcc_static_names_are_demangled():
    name = (
        "__nv_static_45__32_dpRealComplex_compute_70_cpp1_ii_f01f2bc9__ZN13dpRealComplex24postprocessC2C_kernelMemIjd"
        "L9fftAxii_t7EEEvP7ComplexIT0_EPKS4_T_15coordDivisors_tIS8_E7coord_tIS8_ESC_S8_S3_10callback_t"
    )
    assert demangle(name).startswith(
        "void dpRealComplex::postprocessC2C_kernelMem<unsigned int, double"
    )
    assert demangle("__nv_static_not_a_name") == "__nv_static_not_a_name"


def test_held_out_library_kernels_decode_to_their_library_and_op():
    """Names the decoder was not written against: an H100 run of FFT, linear-algebra, sparse and
    BLAS ops that the corpus workloads never ran (tests/data/README.md). Library and op are
    annotated from the workload and the libraries' API, not from the decoder."""
    held = json.loads((DATA / "kernel_names_heldout.json").read_text())
    corpus = {e["name"] for e in json.loads((DATA / "kernel_names.json").read_text())}
    assert len(held) >= 60 and not corpus & {e["name"] for e in held}
    wrong = []
    for e in held:
        k = decode(e["name"])
        want = e["expect"]
        if (
            not k.library.startswith(tuple(want["library"].split("|")))
            or want.get("op", k.op) != k.op
        ):
            wrong.append((e["name"][:80], k.library, k.op, want))
    assert not wrong, wrong


def test_decoded_names_pickle_and_come_back_read_only():
    import pickle
    from types import MappingProxyType

    names = [
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)",
        "triton_poi_fused_add_gelu_mul_0",
    ]
    for name in names:
        k = decode(name)
        back = pickle.loads(pickle.dumps(k))
        assert back == k and back.explain() == k.explain()
        assert isinstance(back.details, MappingProxyType)
        with pytest.raises(TypeError):
            back.details["x"] = 1
