"""Kernel names that explain themselves: ``decode(name) -> KernelName``. No torch import.

A profile's answer is a kernel name, and the names are dense codes:
``cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4`` is CUTLASS, SM 8.0, tensor cores, fp32
accumulate with the 16×8×8 (TF32) MMA, a 128×128 block tile, K-tile 32, 3 pipeline stages, both
operands column-major, 16-byte (4-element) alignment. The decoders read the naming grammars of the
libraries that make them rather than matching a list, so names never seen before decode too.
Whatever a decoder cannot place is kept as a named raw token; names no decoder recognises get family
``other``.

One module per naming grammar:

- ``name``: the ``KernelName`` result (frozen: results are cached and shared), the ``Draft``
  decoders fill in, and the shared vocabulary (families, dtype codes, architectures, layouts) and
  token helpers;
- ``spelling``: demangling, one spelling for torch.profiler / nsys / nvprof names, signature
  parsing;
- ``precision``: what each spelling of an element type means (``f16``, ``__half``, ``c10::Half``),
  once for every library, and the per-library tables built from it;
- ``cutlass``: CUTLASS 2.x and 3.x generator names;
- ``cublas``: cuBLAS / cuDNN xmma names and cuBLASLt nvjet names;
- ``cublas_legacy``: architecture-prefixed cuBLAS GEMMs and cuBLAS's helper kernels (GEMV, dot,
  TRSM, split-K, ...);
- ``cudnn``: cuDNN (convolution helpers, batch norm, RNN, attention steps) and fused attention
  (FlashAttention, memory-efficient attention);
- ``aten``: PyTorch's own kernels, foreach / fused-optimizer kernels, and the CUB kernels PyTorch
  instantiates;
- ``libraries``: NCCL, Triton (TorchInductor), memory operations, torch.optim's profiler ranges;
- ``cufft``, ``cusolver``, ``cusparse``, ``magma``: the math libraries' kernels;
- ``rocm``: AMD ROCm's kernels (Tensile / hipBLASLt / rocBLAS GEMMs, MIOpen, Composable Kernel,
  RCCL, the HIP runtime's blit kernels);
- ``deepseek``: DeepSeek's own builds (``dpsk::`` DeepEP and grouped FP8 GEMMs, ``cuda::``
  helpers); ``stack`` and one module per library for the LLM stack;
- ``decode``: the ordered decoder list and the cached ``decode()``.
"""

from __future__ import annotations

from .decode import decode
from .name import FAMILIES, KernelName
from .spelling import demangle, normalize

__all__ = ["FAMILIES", "KernelName", "decode", "demangle", "normalize"]
