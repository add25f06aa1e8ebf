"""The fp32-GEMM finding speaks on AMD GPUs in AMD's words: GEMMs on the vector ALUs, not matrix
cores (MFMA), and the advice that applies there (bf16/fp16 autocast), never NVIDIA's TF32 switch.
Tensile names as ROCm/Tensile names its kernels (problem type, macro tile ``MT``, matrix
instruction ``MI``, target ``ISA``)."""

from __future__ import annotations

from gpumagic.analysis.kernel_mix import ffma_gemms
from gpumagic.trace import Trace, frame

NO_MFMA = "Cijk_Ailk_Bljk_SB_MT64x64x8_SN_1LDSB0_AMAS3_BL1_ISA90a_K1_PGR1_WG16_16_1"
MFMA = "Cijk_Ailk_Bljk_SB_MT128x128x16_MI32x32x2x1_SN_ISA90a_K1"


def amd_trace(name: str) -> Trace:
    kernels = [
        {"name": name, "start": 10_000 * i, "end": 10_000 * i + 9_000, "device": 0, "stream": 1}
        for i in range(10)
    ]
    meta = {"backend": "torch.profiler", "vendor": "AMD", "device": "AMD Instinct MI250X"}
    return Trace(kernels=frame("kernels", kernels), meta=meta)


def test_fp32_gemms_off_the_matrix_cores_are_said_in_amds_words():
    (found,) = ffma_gemms(amd_trace(NO_MFMA))
    assert "vector ALUs, not matrix cores (no MFMA" in found.message
    assert "torch.autocast('cuda', dtype=torch.bfloat16)" in found.message
    assert "tf32" not in found.message.lower() and "CUDA cores" not in found.message


def test_fp32_gemms_on_mfma_are_not_a_finding():
    assert ffma_gemms(amd_trace(MFMA)) == []
