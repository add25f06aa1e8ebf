"""PyTorch's own CUDA kernels (ATen, and the CUB kernels it instantiates).

ATen's names are C++ signatures, not codes: the interesting part is buried in template arguments,
e.g. ``vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, ...>`` is an elementwise
add on fp32, four elements per vectorized load. The generic launchers (elementwise, reduce) are
labelled by the functor or lambda they run; other kernels by a table of known operations (softmax,
norms, random numbers, sort, indexing, ...) matched against the function path and template
arguments, falling back to the kernel's own name.
"""

from __future__ import annotations

import re

from .name import Draft
from .spelling import cpp_dtypes, signature, split_top, template_args

_WRAPPERS = {
    "gpu_kernel_impl",
    "gpu_kernel_impl_nocast",
    "gpu_kernel_with_scalars",
    "func_wrapper_t",
    "AUnaryFunctor",
    "BUnaryFunctor",
    "BinaryFunctor",
    "UnaryFunctor",
    "TrivialOffsetCalculator",
    "OffsetCalculator",
    "LoadWithoutCast",
    "StoreWithoutCast",
    "LoadWithCast",
    "StoreWithCast",
    "elementwise_kernel_helper",
    "opmath_gpu_kernel_with_scalars",
    "gpu_kernel",
    "ReduceOp",
    "array",
    "TensorIteratorBase",
    "TensorIterator",
    "Array",
    "GenericPackedTensorAccessor",
    "TensorAccessor",
    "ArrayRef",
    "TensorInfo",
    "IntDivider",
    "vectorized_elementwise_kernel",
    "unrolled_elementwise_kernel",
    "elementwise_kernel",
    "reduce_kernel",
    "index_elementwise_kernel",
    "operator",
}
_NOT_AN_OP = ("cuda", "impl", "kernel", "operator", "lambda", "func_wrapper")
_OP_NAME_PATTERNS = [
    re.compile(r"CUDAFunctor(?:OnSelf)?_(\w+?)<"),
    re.compile(r"\b(\w+?)_functor<"),
    re.compile(r"\b(\w+?)Ops<"),
    re.compile(
        r"::(\w+?)(?:_kernel_cuda|_kernel_impl|_kernel|KernelImpl|CUDAKernelImpl|_cuda_kernel)\b"
    ),
    re.compile(r"::(?:launch_)(\w+)\("),
    re.compile(r"\b(\w+?)Functor<"),
    re.compile(r"::([a-z]\w+?)\("),
]
_OPAQUE = re.compile(r"\bOpaqueType<(\d+)u?>")
# (regex on the function path or template args, op category, label)
_ATEN_SPECIAL = [
    (
        r"SoftMaxForward|softmax_warp_forward|SoftMaxForwardEpilogue|cunn_SpatialSoftMaxForward",
        "softmax",
        "softmax",
    ),
    (r"SoftMaxBackward|softmax_warp_backward", "softmax", "softmax backward"),
    (r"layer_norm|LayerNorm", "norm", "layer norm"),
    (r"RowwiseMoments|GroupNorm|group_norm", "norm", "group norm"),
    (r"batch_norm|BatchNorm", "norm", "batch norm"),
    (r"rms_norm|RmsNorm|RMSNorm", "norm", "RMS norm"),
    # the other kernels of ATen's layer / group norm: weight and bias gradients, the fused scale and
    # shift
    (r"GammaBeta\w*Backward", "norm", "norm backward (weight and bias gradients)"),
    (r"Compute(?:1d)?(?:Backward)?FusedParams|ComputeInternalGradients", "norm", "group norm"),
    (r"dropout", "random", "dropout"),
    (
        r"distribution_elementwise|distribution_nullary|bernoulli|randperm|multinomial|normal_kernel|uniform_kernel",
        "random",
        "random numbers",
    ),
    (r"CatArray", "copy", "concatenate"),
    (r"DeviceRadixSort|bitonicSort|[Ss]ort|[Tt]opK|topk", "sort", "sort / top-k"),
    (r"[Hh]istogram|histc|bincount", "histogram", "histogram"),
    (r"gather|scatter|index|embedding|take_kernel|put_kernel|masked", "index", "indexing"),
    (r"DeviceScan|cumsum|cumprod|scan", "scan", "scan"),
    (r"DeviceReduce|DeviceSelect|DeviceCompact|nonzero|write_indices", "reduce", "reduce / select"),
    (r"conv_depthwise|slow_conv|im2col|col2im", "conv", "convolution (ATen)"),
    (r"upsample|interpolate", "resample", "upsample"),
    (r"pool", "pool", "pooling"),
    (r"nll_loss|cross_entropy", "loss", "loss"),
    (r"triu_tril", "elementwise", "triangular mask"),
    (r"_assert_async", "assert", "device-side assert"),
]
_ELEMENTWISE = (
    "vectorized_elementwise_kernel",
    "unrolled_elementwise_kernel",
    "elementwise_kernel",
    "elementwise_kernel_with_index",
)
_ELEMENTWISE_MEANING = {
    "vectorized_elementwise_kernel": "elementwise, {vec} elements per thread-load (vectorized)",
    "unrolled_elementwise_kernel": "elementwise, unrolled (non-contiguous or casting)",
    "elementwise_kernel": "elementwise, generic strided loop",
}
_CUB_PATH = re.compile(r"(?:\w+::)?cub::")
_FUNCTION_PARAMS = re.compile(
    r"\(([^()]*)\)(?=::)"
)  # f(params)::{lambda..}: the enclosing function's parameters
_LAMBDA_PARAMS = re.compile(r"\{lambda\(([^()]*)\)#\d+\}")
_FOREACH = ("multi_tensor_apply_kernel", "lpnorm_cleanup")
_FOREACH_METADATA = re.compile(
    r"(?<!\w)\w*Metadata<[^<>]*>"
)  # word starts only: linear in a name's length
_FOREACH_FUNCTOR = re.compile(r"(?<!\w)(\w+?)Functor<([^,<>]+)")
_FOREACH_INNER = re.compile(r"::(\w+?)(?:Functor)?<")
_FUSED_OPTIMIZER = re.compile(r"(?<!\w)Fused(\w+?)(?:Math)?Functor")
_STD_OP = re.compile(r"std::(plus|minus|multiplies|divides)<")
_STD_OPS = {"plus": "add", "minus": "sub", "multiplies": "mul", "divides": "div"}
_ATEN = re.compile(
    r"\bat::|\bat_cuda_detail::|\bc10::|\(anonymous "
    r"namespace\)::(?:softmax|elementwise_kernel_with_index|randperm)"
)
_INDEX_TYPES = ("int32", "int64", "uint32", "uint64", "bool")
_RANDOM_KIND = re.compile(
    r"(normal|uniform|exponential|random_from_to|random|bernoulli|cauchy|geometric|log_normal)"
)


def _aten_functor(args: str) -> str | None:
    """The operation an ATen kernel applies, from its template arguments (the functor or the
    lambda's function)."""
    for pat in _OP_NAME_PATTERNS:
        for m in pat.finditer(args):
            name = m.group(1).split("::")[-1]
            if name in _WRAPPERS or name + "Functor" in _WRAPPERS or name.startswith("gpu_kernel"):
                continue
            if name.lower() in _NOT_AN_OP:
                continue
            return _snake(name)
    return None


def _snake(name: str) -> str:
    name = re.sub(r"CUDA$|Cuda$", "", name)
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    name = re.sub(r"_nan$", "", name)
    name = re.sub(r"(?:_cuda_out|_cuda|_out|_kernel|_impl)+$", "", name)
    return name.strip("_")


def decode_aten(k: Draft, sym: str, full: str) -> bool:
    """PyTorch's own kernels (and the CUB kernels it instantiates): the launcher's functor or the
    table of known operations says the op, the template arguments the element type."""
    if not _ATEN.search(full):
        return False
    k.family = "aten"
    path, leaf, _ = signature(full)
    # CUB's device algorithms as PyTorch instantiates them (namespace at_cuda_detail::cub): CUB's
    # kernels, not ATen's
    k.library = "CUB (in PyTorch)" if _CUB_PATH.match(path) else "PyTorch ATen"
    args = template_args(full)
    k.dtypes = _data_types(args)
    k.precision = k.dtypes[0] if k.dtypes else None
    functor = _aten_functor(args)
    special = next(((op, label) for pat, op, label in _ATEN_SPECIAL if re.search(pat, args)), None)
    if leaf in _FOREACH:
        _foreach(k, leaf, args)
        k.add(leaf, "op", k.short)
    elif leaf in _ELEMENTWISE and special and special[0] in ("norm", "random", "softmax"):
        # an elementwise launcher running a norm / random-number lambda: say what it computes
        k.op, k.short = special
        k.details["functor"] = functor
        k.add(leaf, "op", f"{special[1]} (elementwise launcher)")
    elif leaf in _ELEMENTWISE:
        _elementwise(k, leaf, functor, split_top(args))
    elif leaf == "reduce_kernel":
        k.op = "reduce"
        k.details["functor"] = functor
        k.short = f"reduce {(functor or '').replace('_', ' ')}".strip()
        k.add(leaf, "op", "reduction")
        if functor:
            k.add(functor, "functor", f"reduces with {functor}")
    else:
        _named_kernel(k, path, leaf, args, full, functor)
        k.add(leaf, "op", k.short)
    if k.precision:
        k.add(k.precision, "dtype", f"{k.precision} data")
    return True


def _data_types(args: str) -> tuple[str, ...]:
    """The data types an ATen kernel computes in, from its template arguments.

    Elements moved as raw bytes (``OpaqueType<N>``) are N-byte words, unless a type comes first
    (CUB's radix sort of float or int64 keys carries its values as opaque words). The parameter
    lists of functions named inside the arguments (``batch_norm_update_stats_and_invert(..., double
    momentum, double eps)::{lambda(float, ...)}``) hold scalars, not data, so they are left out.
    Index types (int, long, ...) count only where no other type is named: then the type a lambda is
    applied to (``arange_cuda_out(..)::{lambda(long)}``) is the data, else the first."""
    clean = _FUNCTION_PARAMS.sub("()", args)
    opaque = _OPAQUE.search(clean)
    if opaque and not cpp_dtypes(clean[: opaque.start()]):
        return (f"{8 * int(opaque.group(1))}-bit",)
    named = cpp_dtypes(clean)
    values = tuple(d for d in named if d not in _INDEX_TYPES)
    if values:
        return values
    lam = next(
        (
            m.group(1)
            for m in _LAMBDA_PARAMS.finditer(clean)
            if m.group(1).strip() not in ("", "int")
        ),
        None,
    )
    return (cpp_dtypes(lam) if lam else ()) or named[:1]


def _foreach(k: Draft, leaf: str, args: str) -> None:
    """``multi_tensor_apply_kernel``: one launch over lists of tensors, for the ``_foreach_*`` ops
    and the fused optimizers; ``lpnorm_cleanup``: the second pass of ``_foreach_norm``. The data
    type is the functor's first template argument (the metadata's scalar type is the scalars', e.g.
    fp32 steps for bf16 tensors)."""
    body = _FOREACH_METADATA.sub("", args)
    fm = _FOREACH_FUNCTOR.search(body)
    if fm and cpp_dtypes(fm.group(2)):
        k.dtypes = cpp_dtypes(fm.group(2))
        k.precision = k.dtypes[0]
    fused = _FUSED_OPTIMIZER.search(body)
    if fused:
        k.op = "optimizer"
        name = {"Sgd": "SGD"}.get(fused.group(1), fused.group(1))
        if name == "Adam" and re.search(
            r"ADAM_MODE\)1\b", body
        ):  # ADAM_MODE::ADAMW: decoupled weight decay
            name = "AdamW"
        k.details["optimizer"] = name
        k.short = f"fused {name} step (multi-tensor)"
        return
    k.op = "foreach"
    if leaf == "lpnorm_cleanup":
        what = "norm (second pass)"
    elif fm and fm.group(1) == "LpNorm":
        what = "norm"
    else:
        std = _STD_OP.search(body)
        inner = _FOREACH_INNER.search(body[fm.end() :] if fm else body)
        what = _STD_OPS[std.group(1)] if std else _snake(inner.group(1)) if inner else "op"
        if fm and fm.group(1).startswith("PointwiseOp") and what in ("mul", "div"):
            what = "addc" + what
    k.details["functor"] = what
    k.short = f"foreach {what}" + (" (multi-tensor)" if leaf == "multi_tensor_apply_kernel" else "")


def _elementwise(k: Draft, leaf: str, functor: str | None, top: list[str]) -> None:
    k.op = "elementwise"
    if functor and re.fullmatch(
        r"(?:direct_|float16_|bfloat16_|float8_|)copy(?:_device_to_device)?", functor
    ):
        k.op = "copy"
    vec = (
        int(top[0])
        if leaf == "vectorized_elementwise_kernel" and top and top[0].isdigit()
        else None
    )
    k.details["functor"] = functor
    if vec:
        k.details["vector_width"] = vec
    label = (functor or "op").replace("_", " ")
    how = (
        f" (vectorized \u00d7{vec})"
        if vec
        else " (unrolled)"
        if leaf.startswith("unrolled")
        else ""
    )
    k.short = f"elementwise {label}{how}"
    if k.op == "copy":
        k.short = f"copy ({label})" + (f" (vectorized \u00d7{vec})" if vec else "")
    k.add(leaf, "op", _ELEMENTWISE_MEANING.get(leaf, "elementwise with index").format(vec=vec))
    if functor:
        k.add(functor, "functor", f"applies {label}")


def _named_kernel(
    k: Draft, path: str, leaf: str, args: str, full: str, functor: str | None
) -> None:
    """A kernel with its own name (softmax, norms, sort, ...): the table first, the kernel's name
    otherwise."""
    for pat, op, label in _ATEN_SPECIAL:
        if re.search(pat, path) or (
            op in ("softmax", "norm", "random", "copy") and re.search(pat, args)
        ):
            k.op = op
            k.short = label
            if op == "softmax" and re.search(r"LogSoftMax|log_softmax", full):
                k.short = "log-softmax"
            if op == "random" and functor and label == "random numbers":
                kind = _RANDOM_KIND.search(full)
                if kind:
                    k.short = f"random {kind.group(1).replace('_', ' ')}"
            return
    if re.match(
        r"(?:fill|iota|arange)(?:_|$)", leaf
    ):  # fill_reverse_indices_kernel: writes index values
        k.op = "elementwise"
        k.short = f"elementwise {_snake(leaf).replace('_', ' ')}"
        return
    k.op = _snake(leaf) or "other"
    k.short = _snake(leaf).replace("_", " ") or leaf
