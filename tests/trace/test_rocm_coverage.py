"""A ROCm trace that did not record something is told so in HIP's words: its kernels and calls are
HIP's, and the advice says that ProfilerActivity.CUDA is what records them on a ROCm build."""

from __future__ import annotations

from gpumagic.trace.coverage import not_recorded_in

AMD = {"backend": "torch.profiler", "vendor": "AMD", "device": "AMD Instinct MI300X"}


def test_an_amd_trace_without_kernels_is_told_in_hips_words():
    said = not_recorded_in(AMD, "kernels")
    assert "HIP kernels" in said and "CUDA kernels" not in said
    assert "on a ROCm build of PyTorch, ProfilerActivity.CUDA records HIP's activity" in said
    assert "HIP API calls" in not_recorded_in(AMD, "api")


def test_an_nvidia_trace_keeps_cudas_words():
    said = not_recorded_in({"backend": "torch.profiler", "device": "NVIDIA H100"}, "kernels")
    assert "CUDA kernels" in said and "HIP" not in said and "ROCm" not in said
