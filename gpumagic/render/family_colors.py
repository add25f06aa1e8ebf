"""A colour and a legend label per kernel family, shared by every figure that colours kernels.

One table, so the timeline's legend, its boxes and any later figure agree on what a family looks
like; the decoder (``gpumagic.kernels``) names the families, this module only dresses them. Order
matters: the legend lists families in this order.
"""

from __future__ import annotations

__all__ = ["FAMILY_COLORS", "FAMILY_LABELS"]

FAMILY_COLORS = {
    "cutlass2": "#1f77b4",
    "cutlass3": "#17becf",
    "cublas_xmma": "#2ca02c",
    "cublas_legacy": "#98df8a",
    "nvjet": "#bcbd22",
    "cudnn": "#9467bd",
    "flash_attention": "#e377c2",
    "aten": "#ff7f0e",
    "triton": "#d62728",
    "nccl": "#8c564b",
    "cufft": "#ad494a",
    "cusolver": "#8c6d31",
    "cusparse": "#6b6ecf",
    "magma": "#e7ba52",
    "vllm": "#3182bd",
    "sglang": "#e6550d",
    "flashinfer": "#de9ed6",
    "trtllm": "#31a354",
    "flashmla": "#a55194",
    "deepgemm": "#637939",
    "deepep": "#843c39",
    "transformer_engine": "#74c476",
    "liger": "#fd8d3c",
    "mamba": "#9e9ac8",
    "xformers": "#ce6dbd",
    "bitsandbytes": "#bd9e39",
    "apex": "#6baed6",
    "torchao": "#fdae6b",
    "rocm": "#a6761d",
    "memop": "#7f7f7f",
    "other": "#c7c7c7",
}
# What the legend calls each kernel family and each kind of host lane.
FAMILY_LABELS = {
    "cutlass2": "CUTLASS 2.x",
    "cutlass3": "CUTLASS 3.x",
    "cublas_xmma": "cuBLAS",
    "cublas_legacy": "cuBLAS (legacy)",
    "nvjet": "cuBLAS (nvjet)",
    "cudnn": "cuDNN",
    "flash_attention": "FlashAttention",
    "aten": "PyTorch ATen",
    "triton": "Triton",
    "nccl": "NCCL",
    "cufft": "cuFFT",
    "cusolver": "cuSOLVER",
    "cusparse": "cuSPARSE",
    "magma": "MAGMA",
    "vllm": "vLLM",
    "sglang": "SGLang",
    "flashinfer": "FlashInfer",
    "trtllm": "TensorRT-LLM",
    "flashmla": "FlashMLA",
    "deepgemm": "DeepGEMM",
    "deepep": "DeepEP",
    "transformer_engine": "Transformer Engine",
    "liger": "Liger",
    "mamba": "Mamba",
    "xformers": "xFormers",
    "bitsandbytes": "bitsandbytes",
    "apex": "Apex",
    "torchao": "torchao",
    "rocm": "AMD ROCm (Tensile, MIOpen, CK)",
    "memop": "memory op",
    "other": "other kernel",
    "nvtx": "NVTX range",
    "ops": "CPU op",
    "api": "CUDA API",
}
