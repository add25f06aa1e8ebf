"""The kernel-name decoder against a corpus of real names (tests/data/kernel_names.json) and generated ones."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumagic.kernels import FAMILIES, KernelName, decode, demangle, normalize

CORPUS = json.loads((pathlib.Path(__file__).parent / "data" / "kernel_names.json").read_text())


def field_of(k: KernelName, name: str):
    if hasattr(k, name) and name not in ("details",):
        return getattr(k, name)
    return k.details.get(name)


@pytest.mark.parametrize("entry", CORPUS, ids=[f"{i}:{e['name'][:50]}" for i, e in enumerate(CORPUS)])
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
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
            "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
        ).short
        == "elementwise add (vectorized \u00d74)"
    )
    assert decode("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(T1::Params)").short == (
        "CUTLASS SIMT FP32 GEMM 256\u00d7128, nn"
    )
    assert decode("ncclDevKernel_AllReduce_Sum_f32_RING_LL").short == "NCCL AllReduce Sum fp32 RING LL"
    assert decode("triton_poi_fused_add_gelu_mul_0").short == "Triton pointwise: add + gelu + mul"


def test_nsys_and_profiler_spellings_decode_alike():
    torch_form = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
    )
    nsys_form = (
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, "
        "std::array<char *, (unsigned long)3>>(int, T2, T3)"
    )
    a, b = decode(torch_form), decode(nsys_form)
    assert (a.family, a.op, a.short, a.details["functor"]) == (b.family, b.op, b.short, b.details["functor"])
    assert normalize("void <unnamed>::f<(int)4>()") == "void (anonymous namespace)::f<4>()"


def test_demangle():
    assert demangle(
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EEEEviT0_T1_"
    ).startswith("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>")
    assert demangle("not_mangled") == "not_mangled"
    assert demangle("_Zgarbage") == "_Zgarbage"


@given(st.text(max_size=300))
@settings(max_examples=300)
def test_any_text_decodes_without_raising(text):
    k = decode(text)
    assert k.family in FAMILIES
    assert isinstance(k.short, str)


# --- property tests: names generated from the CUTLASS grammars ---------------------------------------------------

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


c3_dtypes = st.sampled_from([("f16", "fp16"), ("bf16", "bf16"), ("e4m3", "fp8e4m3"), ("f32", "tf32"), ("s8", "int8")])


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
def test_cutlass3_generated_names(arch, dt, acc, cd, m, n, k, cm, cn, stages, layout, align, schedule, epi):
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
        [sys.executable, "-m", "gpumagic.kernels", "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "CUTLASS tensor-core TF32 GEMM" in out and "align4" in out and "K-tile 32, 3-stage pipeline" in out
