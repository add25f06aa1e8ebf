"""Hostile kernel names: decoding time grows linearly with a name's length, and a name too long to
parse keeps its text.

A profile can hold any string as a kernel name, and ``decode()`` runs on every distinct one while a
report renders. A regular expression that backtracks made a 40,000-character digit run take ~10 s
(quadratic), so each case here is timed in a subprocess with a timeout: a regression fails the test
instead of hanging the suite.
"""

from __future__ import annotations

from gpumagic.kernels import decode, demangle, normalize
from gpumagic.kernels.decode import MAX_PARSED
from gpumagic.kernels.spelling import index_type, split_top

from .conftest import MB, decode_times

#: (label, prefix, repeated body, suffix): the shapes that made a regular expression backtrack, or
#: could.
SHAPES = [
    ("digit run in template", "void k<", "1", ">()"),
    ("bare digit run", "", "1", ""),
    ("digit run with suffix", "void k<", "1", "u>()"),
    ("mangled digits", "_Z", "1", ""),
    ("nvcc static prefix", "__nv_static_", "__Z", "!"),
    ("template nest", "void k<", "a<", ""),
    ("closed template nest", "void cusparse::csrmm_alg2_kernel<", "a<", ">()"),
    ("long identifier", "void ", "a", "()"),
    ("many commas", "void k<", "1, ", ">()"),
    ("casts", "void k<", "(int)1, ", ">()"),
    ("nvprof arguments", "void k<", "int=1, ", ">()"),
    ("underscore tokens", "cutlass_80_tensorop_s1688gemm_", "1_", ""),
    ("xmma tokens", "sm90_xmma_gemm_", "_", "_"),
    ("triton tokens", "triton_poi_fused_", "a_", "x"),
    ("nccl tokens", "ncclDevKernel_", "1x", ""),
    ("spaces", "void k<", " ", ">()"),
]

#: Shapes that were quadratic in decoder modules outside spelling/decode (cutlass.py, libraries.py,
#: aten.py's fused-optimizer pattern) until fixed, and the shapes the other decoders' patterns meet.
OTHER_MODULE_SHAPES = [
    ("CUTLASS 2.x core with a digit run", "cutlass_80_tensorop_s", "1", ""),
    ("memory operation with open parentheses", "Memcpy ", "(", ""),
    (
        "foreach kernel with a repeated word",
        "void at::native::multi_tensor_apply_kernel<",
        "Fused",
        ">()",
    ),
    (
        "foreach kernel with many functors",
        "void at::native::multi_tensor_apply_kernel<",
        "aFunctor",
        ">()",
    ),
    ("ATen lambda in a function", "void at::native::k<", "g(a)::{lambda(", ">()"),
    ("cuDNN RNN kernel with underscore words", "void RNN_blockPersist", "_a", "<float>()"),
    ("MAGMA auxiliary", "slaset_", "a", "(int)"),
    ("xmma variant words", "sm90_xmma_gemm_", "wo_", "f32f32_f32f32"),
]


def test_a_megabyte_hostile_name_decodes_in_well_under_a_tenth_of_a_second():
    times = decode_times(SHAPES + OTHER_MODULE_SHAPES, MB, timeout=60)
    slow = [(label, round(took, 4)) for label, _, took in times if took > 0.05]
    assert not slow, slow


def test_names_just_under_the_parse_cap_are_parsed_in_linear_time():
    # these are parsed in full: every decoder reads them, so the regular expressions themselves must
    # not backtrack
    times = decode_times(SHAPES, MAX_PARSED, timeout=60)
    slow = [(label, round(took, 3)) for label, _, took in times if took > 2.0]
    assert not slow, slow


def test_names_under_the_cap_in_the_other_decoders_are_parsed_in_linear_time():
    times = decode_times(OTHER_MODULE_SHAPES, MAX_PARSED, timeout=60)
    slow = [(label, round(took, 3)) for label, _, took in times if took > 2.0]
    assert not slow, slow


def test_a_name_past_the_parse_cap_keeps_its_full_text_and_says_why():
    name = "void at::native::vectorized_elementwise_kernel<4, " + "1" * MAX_PARSED + ">()"
    k = decode(name)
    assert k.name == name and k.demangled == name
    assert k.family == "other" and k.short == name[:80]
    assert (
        k.details["not_parsed"]
        == f"a {len(name):,}-character name; names over {MAX_PARSED:,} are not parsed"
    )
    assert "not parsed" in k.explain_text()
    # one character under the cap is parsed as usual
    fits = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()"
    assert decode(fits + " " * (MAX_PARSED - len(fits))).family == "aten"


def test_digit_suffixes_and_nvcc_prefixes_read_as_before():
    assert normalize("std::array<char*, 3ul>, 12u, 7ll, 5") == "std::array<char*, 3>, 12, 7, 5"
    assert normalize("x" + "1" * 5000 + "ul") == "x" + "1" * 5000
    static = (
        "__nv_static_45__32_dpRealComplex_compute_70_cpp1_ii_f01f2bc9__ZN13dpRealComplex24postprocessC2C_kernelMemIjd"
        "L9fftAxii_t7EEEvP7ComplexIT0_EPKS4_T_15coordDivisors_tIS8_E7coord_tIS8_ESC_S8_S3_10callback_t"
    )
    assert (
        demangle(static) == demangle(static[static.index("_ZN") :]) != static[static.index("_ZN") :]
    )
    for not_static in ("__nv_static___Z", "__nv_static_a__Zb!", "__nv_static_abc"):
        assert demangle(not_static) == not_static


def test_index_type_looks_one_level_into_a_traits_argument_and_no_deeper():
    assert index_type(split_top("sddmm_traits<long, long, float>, float")) == "int64"
    assert index_type(split_top("outer<sddmm_traits<long, float>>, float")) is None
