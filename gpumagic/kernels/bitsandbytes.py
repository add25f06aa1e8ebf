"""bitsandbytes' kernels (``csrc/kernels.cu``): blockwise quantization of weights and optimizer
states (``kQuantizeBlockwise``, ``kDequantizeBlockwise<__nv_bfloat16, 512, 64, 8, 2>``), 4-bit
inference GEMV (``kgemm_4bit_inference_naive``), 8-bit optimizers (``kOptimizer32bit2State``,
``kOptimizerStatic8bit2StateBlockwise``) and LLM.int8() helpers (``kInt8VectorQuant``,
``kdequant_mm_int32_fp16``). The blockwise kernels' last template argument is bitsandbytes'
``DataType_t``: 0 General8bit (8-bit dynamic codebook), 1 FP4, 2 NF4. The 4-bit GEMV reads its code
book at run time, so its name does not say NF4 or FP4.
"""

from __future__ import annotations

import re

from .name import Draft, squash, upper
from .spelling import signature, split_top
from .stack import claim, element_types

_STEMS = {
    "kQuantizeBlockwise": "quantize",
    "kQuantizeBlockwiseSmall": "quantize",
    "kDequantizeBlockwise": "dequantize",
    "kQuantize": "quantize",
    "kDequantize": "dequantize",
    "kgemm_4bit_inference_naive": "gemm",
    "kgemm_4bit_inference": "gemm",
    "kInt8VectorQuant": "quantize",
    "kdequant_mm_int32_fp16": "dequantize",
    "kgetRowStats": "reduce",
    "kgetColRowStats": "reduce",
    "kDoubleRowColQuant": "quantize",
    "kspmm_coo_very_sparse_naive": "gemm",
    "kPercentileClipping": "optimizer",
    "kHistogramScatterAdd2D": "histogram",
    "kfunc": "elementwise",
}
_DATA_TYPE = {"0": "int8", "1": "fp4e2m1", "2": "nf4"}


def decode_bitsandbytes(k: Draft, sym: str, full: str) -> bool:
    """bitsandbytes' global ``k*`` kernels by their stem: quantization, 4-bit GEMV, 8-bit
    optimizers and LLM.int8() helpers, with the blockwise kernels' data type."""
    if not full.lstrip().startswith(("void k", "k")):
        return False
    path, leaf, args = signature(full)
    if path != leaf:
        return False
    op = _STEMS.get(leaf)
    if op is None and re.match(r"k(?:Preconditio)?n?Optimizer", leaf):
        op = "optimizer"
    if op is None or not ("<" in full or "(" in full):
        return False
    claim(
        k,
        family="bitsandbytes",
        library="bitsandbytes",
        full=full,
        op=op,
        label=leaf,
        tensor_cores=False if op == "gemm" else None,
        types=element_types(args),
    )
    top = split_top(args)
    if leaf.endswith("Blockwise") or leaf.endswith("BlockwiseSmall"):
        code = _DATA_TYPE.get(top[-1]) if top else None
        if code and leaf.startswith(("kQuantize", "kDequantize")):
            k.dtypes = tuple(dict.fromkeys((*k.dtypes, code)))
            k.precision = code
            k.add(
                top[-1],
                "dtype",
                {"int8": "8-bit dynamic code book", "fp4e2m1": "FP4", "nf4": "NF4"}[code],
            )
    if leaf.startswith("kgemm_4bit"):
        act = k.precision
        k.precision = None
        k.details["weight"] = "4-bit (NF4 or FP4, chosen at run time)"
        if act:
            k.details["activation"] = act
        k.details["weight_only"] = True
    if leaf.startswith("kInt8") or "int32" in leaf:
        k.precision = "int8"
    k.short = squash(f"bitsandbytes {upper(k.precision)} {leaf}")
    return True
