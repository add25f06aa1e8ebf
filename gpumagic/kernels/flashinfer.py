"""FlashInfer's kernels: ``flashinfer::`` templates (``BatchPrefillWithPagedKVCacheKernel``,
``BatchDecodeWithPagedKVCacheKernel``, ``norm::FusedAddRMSNormKernel``,
``activation::act_and_mul_kernel``, ``sampling::TopKTopPSamplingFromProbKernel``,
``BatchQKApplyRotaryPosIdsCosSinCacheKernel``, ``AppendPagedKVCacheKernel``, ``MergeStatesKernel``,
its Hopper FA3 kernels inside ``cutlass::device_kernel<...>``) and its CuTe DSL kernels, whose names
are the Python class path run together
(``kernel_cutlass_kernel_flashinfernormkernels...FusedAddRMSNormKernel_object_at__tensorptrbf16gmemalign128...``).

Prefill, MLA and FA3 attention run on tensor cores; the decode kernels (``BatchDecode*``,
``SingleDecode*``) on CUDA cores, as FlashInfer's decode path does unless it is asked to reuse the
prefill kernels.
"""

from __future__ import annotations

import re

from .name import Draft
from .precision import alternation, precision_table
from .spelling import signature
from .stack import claim, element_types, snake

_FAMILY = "flashinfer"
# a profiler's table may cut the name before ``_object_at_``: the class path alone still decodes
_CUTE_DSL = re.compile(r"^kernel_cutlass_kernel_(?P<body>\w*?)(?:_object_at_(?P<args>\w*)|$)")
_DSL_PACKAGE = re.compile(r"flashinfer(norm|gemm|attention|quantization|activation|comm|moe)")
_DSL_ARCH = re.compile(r"[Ss]m_?(1\d\d|90)[af]?|(blackwell)", re.IGNORECASE)
#: a tensor argument's element type in a CuTe DSL kernel's argument digest (``tensorptrbf16...``)
_DSL_TYPES = precision_table("bf16", "f16", "f32", "f8e4m3fn", "f8e4m3", "f8e5m2", "f4e2m1fn", "i8")
_DSL_TYPE = re.compile(r"tensorptr(" + alternation(_DSL_TYPES) + ")", re.IGNORECASE)


def cute_dsl_types(args: str) -> tuple[str, ...]:
    """Element types of a CuTe DSL kernel's tensor arguments (``tensorptrbf16gmemalign128...``)."""
    return tuple(dict.fromkeys(_DSL_TYPES[m.group(1).lower()] for m in _DSL_TYPE.finditer(args)))


def decode_flashinfer(k: Draft, sym: str, full: str) -> bool:
    if "flashinfer" not in full:
        return False
    dsl = _CUTE_DSL.match(full)
    if dsl:
        body = dsl.group("body")
        cls = re.search(r"[A-Z]\w*$", body)
        words = snake(cls.group(0) if cls else body)
        # the module path run together: flashinfer.norm.kernels -> 'flashinfernormkernels'; its
        # subpackage names the op where a cut name has lost the class
        sub = _DSL_PACKAGE.match(body)
        if sub:
            words += "_" + sub.group(1)
        claim(
            k,
            family=_FAMILY,
            library="FlashInfer (CuTe DSL)",
            full=full,
            words=f"{snake(body)}_{words}",
            types=cute_dsl_types(dsl.group("args") or ""),
            label=cls.group(0) if cls else body[:60],
        )
        arch = _DSL_ARCH.search(body)
        if arch:
            k.set_arch("sm" + arch.group(1) if arch.group(1) else "sm100")
        return True
    path, leaf, args = signature(full)
    inner = leaf
    if leaf == "device_kernel":  # FA3-style kernels: cutlass::device_kernel<flashinfer::...>
        m = re.search(r"flashinfer::(?:\w+::)*(\w+)", args)
        inner = m.group(1) if m else leaf
    elif "flashinfer::" not in path:
        return False
    words = snake(inner)
    attention = (
        "prefill" in words
        or "decode" in words
        or "attention" in words
        or "_mla" in words
        or "pod_with" in words
        or "merge_state" in words
        or ("sm90" in words and leaf == "device_kernel")
    )
    op = "attention" if attention and "rotary" not in words and "append" not in words else None
    tensor_cores = None
    if op == "attention" and "merge" not in words:
        tensor_cores = not ("decode" in words and "mla" not in words)
    claim(
        k,
        family=_FAMILY,
        library="FlashInfer",
        full=full,
        words=words,
        op=op,
        tensor_cores=tensor_cores,
        label=inner,
        types=element_types(args),
    )
    if op == "attention" and "decode" in words:
        k.details["phase"] = "decode"
    elif op == "attention" and "prefill" in words:
        k.details["phase"] = "prefill"
    if "quantize" in words:  # MXFP8QuantizeLinearKernel: "linear" is its layout, not a GEMM
        _quantize(k, inner)
    return True


#: What a quantize kernel's name says it writes, most specific first.
_TARGETS = (
    ("nvfp4", "nvfp4"),
    ("mxfp8", "mxfp8"),
    ("mxfp4", "mxfp4"),
    ("fp4", "fp4"),
    ("fp8", "fp8"),
)


def _quantize(k: Draft, name: str) -> None:
    """A quantization kernel: its op, and the format it writes as its precision (its input's type
    stays in ``dtypes``)."""
    k.op = "quantize"
    k.tensor_cores = False
    low = name.lower()
    target = next((t for key, t in _TARGETS if key in low), None)
    if target:
        k.details["input"] = k.precision
        k.precision = target
    k.short = f"FlashInfer quantize to {(target or 'a narrower type').upper()}" + (
        f" (from {str(k.details['input']).upper()})" if k.details.get("input") else ""
    )
