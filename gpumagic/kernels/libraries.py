"""Names that are neither GEMMs nor math-library kernels: NCCL collectives, TorchInductor's Triton
kernels, and the memory operations profilers list among kernels.

Each has a small fixed grammar: ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` (collective, reduction,
dtype, algorithm, protocol: reduction, algorithm and protocol only nominal, see ``_NCCL_NOMINAL``);
``triton_poi_fused_add_gelu_mul_0`` (Inductor's kernel kind, the ATen ops it fused, an index);
``Memcpy HtoD (Pinned -> Device)`` (kind, direction, memory). Inductor joins op names with '_', and
many ATen op names contain '_' themselves, so the fused-op list is split against a table of
multi-word op names, longest first.
"""

from __future__ import annotations

import re

from .name import Draft, squash
from .precision import precision_table

_TRITON = re.compile(
    r"^triton_(?P<kind>poi|red|per|tem|mm|bmm|unk|for)_(?P<rest>.*?)(?:_(?P<n>\d+))?$"
)
_TRITON_KIND = {
    "poi": "pointwise",
    "red": "reduction",
    "per": "persistent reduction",
    "tem": "template (GEMM/conv)",
    "for": "foreach",
    "mm": "matmul",
    "bmm": "batched matmul",
    "unk": "unknown",
}
_TRITON_OP = {
    "poi": "elementwise",
    "red": "reduce",
    "per": "reduce",
    "tem": "gemm",
    "mm": "gemm",
    "bmm": "gemm",
}
# ATen ops whose names contain underscores, for splitting Inductor's fused-op lists (longest match
# wins).
_MULTI_WORD_OPS = tuple(
    tuple(op.split("_"))
    for op in sorted(
        [
            "_softmax",
            "_log_softmax",
            "prepare_softmax_online",
            "native_layer_norm",
            "native_batch_norm",
            "native_group_norm",
            "layer_norm",
            "batch_norm",
            "group_norm",
            "rms_norm",
            "embedding_dense_backward",
            "convolution_backward",
            "threshold_backward",
            "gelu_backward",
            "silu_backward",
            "sigmoid_backward",
            "tanh_backward",
            "_to_copy",
            "index_put",
            "index_select",
            "scatter_add",
            "scatter_reduce",
            "var_mean",
            "log_softmax",
            "constant_pad_nd",
            "avg_pool2d",
            "max_pool2d_with_indices",
            "upsample_nearest2d",
            "upsample_bilinear2d",
            "scaled_dot_product_attention",
            "_scaled_dot_product_flash_attention",
            "native_dropout",
            "clamp_min",
            "clamp_max",
            "bitwise_and",
            "bitwise_or",
            "bitwise_not",
            "logical_and",
            "logical_not",
            "masked_fill",
            "nll_loss",
            "nll_loss_forward",
            "nll_loss_backward",
            "cross_entropy",
            "_unsafe_view",
            "new_zeros",
            "zeros_like",
            "ones_like",
            "full_like",
            "fused_moving_avg_obs_fq_helper",
            # ATen ops Inductor's decompositions keep whole (torch/_decomp, native_functions.yaml)
            "_native_batch_norm_legit",
            "_native_batch_norm_legit_functional",
            "_native_batch_norm_legit_no_training",
            "native_batch_norm_backward",
            "native_layer_norm_backward",
            "native_group_norm_backward",
            "native_dropout_backward",
            "_softmax_backward_data",
            "_log_softmax_backward_data",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_cudnn_attention",
            "_adaptive_avg_pool2d",
            "_adaptive_avg_pool2d_backward",
            "adaptive_avg_pool2d",
            "avg_pool2d_backward",
            "max_pool2d_with_indices_backward",
            "upsample_nearest2d_backward",
            "upsample_bilinear2d_backward",
            "hardtanh_backward",
            "leaky_relu_backward",
            "hardswish_backward",
            "hardsigmoid_backward",
            "elu_backward",
            "mse_loss",
            "mse_loss_backward",
            "nll_loss2d_forward",
            "nll_loss2d_backward",
            "binary_cross_entropy",
            "binary_cross_entropy_with_logits",
            "select_backward",
            "slice_backward",
            "slice_scatter",
            "select_scatter",
            "index_add",
            "index_copy",
            "index_fill",
            "masked_scatter",
            "scatter_reduce",
            "embedding_dense_backward",
            "as_strided",
            "as_strided_scatter",
            "_unsafe_index",
            "_unsafe_index_put",
            "_reshape_alias",
            "unsafe_split",
            "split_with_sizes",
            "empty_like",
            "rand_like",
            "randn_like",
            "inductor_lookup_seed",
            "inductor_random",
            "inductor_seeds",
            "reflection_pad2d",
            "replication_pad2d",
            "addcmul",
            "addcdiv",
            "linalg_vector_norm",
            "_foreach_add",
            "_foreach_mul",
            "max_pool2d",
            "grid_sampler_2d",
            "_fused_rms_norm",
        ],
        key=lambda s: -s.count("_"),
    )
)


#: Words that never name an op on their own in Inductor's fused-op lists: they finish the op before
#: them (``gelu_backward``, ``_softmax_backward_data``) and, for ``with`` / ``no``, begin a phrase
#: that joins the next word too (``max_pool2d_with_indices``, ``legit_no_training``).
_SUFFIX_WORDS = frozenset(
    (
        "backward",
        "forward",
        "functional",
        "legit",
        "data",
        "training",
        "indices",
        "like",
        "nd",
        "helper",
    )
)
_JOINING_WORDS = frozenset(("with", "no"))


def triton_signature_suffix(name: str) -> int:
    """Where the Triton 2.x specialisation suffix starts in a kernel name, or -1.

    Triton before 3.0 named a compiled kernel after its Python function plus its argument
    specialisation: each argument's index, with ``d`` (divisible by 16), ``e`` (divisible by 8)
    or ``c`` (constant) after it (``triton_(...)`` in ``triton/compiler/compiler.py``, the
    ``instance_descriptor``): ``triton__0d1d2d3de4de``, ``rope_fw_bw_kernel_0d1d2d3d4d5d6d``,
    ``triton_per_fused_layer_norm_0_0d1d2d3d4d``. The suffix begins with argument 0, so it reads
    ``0d``, ``0e``, ``0c`` or ``01``: an Inductor kernel index (``_0``, ``_12``) never does.
    """
    at = name.rfind("_")
    if at < 0:
        return -1
    tail = name[at + 1 :]
    if len(tail) < 2 or tail[0] != "0" or tail[1] not in "cde1":
        return -1
    if any(ch not in "0123456789cde" for ch in tail):
        return -1
    return at


def split_fused(rest: str) -> list[str]:
    """'fused_add_native_layer_norm_0' -> ['add', 'native_layer_norm']: Inductor's fused ops, one
    name each."""
    if rest.startswith("fused_"):
        rest = rest[6:]
    elif rest == "fused":
        return []
    parts = rest.split("_")
    ops: list[str] = []
    i = 0
    while i < len(parts):
        matched = next(
            (cand for cand in _MULTI_WORD_OPS if tuple(parts[i : i + len(cand)]) == cand), None
        )
        if matched:
            ops.append("_".join(matched))
            i += len(matched)
        elif parts[i] == "" and i + 1 < len(parts):
            # a double underscore: the next op's name starts with '_' (e.g. _softmax) but is not in
            # the list
            ops.append("_" + parts[i + 1])
            i += 2
        elif parts[i] in _SUFFIX_WORDS and ops and ops[-1] != "_":
            ops[-1] += "_" + parts[i]
            i += 1
        elif parts[i] in _JOINING_WORDS and ops and i + 1 < len(parts):
            ops[-1] += f"_{parts[i]}_{parts[i + 1]}"
            i += 2
        else:
            if parts[i]:
                ops.append(parts[i])
            i += 1
    return ops


def decode_triton(k: Draft, sym: str, full: str) -> bool:
    """``triton_poi_fused_add_mul_0``: an Inductor-generated Triton kernel (its kind, fused ops and
    index), or, by Triton 2.x's specialisation suffix, any other ``@triton.jit`` function."""
    cut = triton_signature_suffix(sym) if sym[:1] in _IDENT_START else -1
    if cut > 0 and not _IDENT.fullmatch(sym):
        cut = -1
    if not sym.startswith("triton_"):
        # any other @triton.jit function compiled by Triton 2.x: the suffix names it as Triton's
        # (a C++ kernel's name never ends in one), where it has a d / e / c letter, not just digits
        if cut > 0 and any(ch in "cde" for ch in sym[cut:]):
            return decode_user_triton(k, sym, launched=False)
        return False
    if cut > 0:
        k.details["specialization"] = sym[cut + 1 :]
        if sym[:cut] == "triton_":
            return _triton_anonymous(k, sym[:cut])
        sym = sym[:cut]
    m = _TRITON.match(sym)
    if not m:
        return False
    kind = m.group("kind")
    k.identify("triton", "Triton (TorchInductor)", _TRITON_OP.get(kind, kind))
    fused = split_fused(m.group("rest"))
    k.details["fused_ops"] = fused
    if kind == "tem":  # a template's op is what it templates: flex attention, a convolution, a GEMM
        rest = m.group("rest") or ""
        if "flex_attention" in rest or "flex_decoding" in rest:
            k.op = "attention"
        elif "convolution" in rest or "conv" in fused:
            k.op = "conv"
    kind_text = {"attention": "template (attention)", "conv": "template (convolution)"}
    k.details["kind"] = (
        kind_text.get(k.op, _TRITON_KIND[kind]) if kind == "tem" else _TRITON_KIND[kind]
    )
    k.add("triton_" + kind, "kind", f"Inductor-generated Triton kernel: {k.details['kind']}")
    if fused:
        k.add(m.group("rest"), "fused ops", ", ".join(fused))
    if m.group("n"):
        k.add(m.group("n"), "index", "kernel number within the compiled graph")
    _add_specialization(k)
    k.short = f"Triton {k.details['kind']}" + (f": {' + '.join(fused)}" if fused else "")
    return True


def _add_specialization(k: Draft) -> None:
    spec = k.details.get("specialization")
    if spec:
        k.add(str(spec), "specialization", "Triton 2.x argument specialisation (index + d/e/c)")


def _triton_anonymous(k: Draft, sym: str) -> bool:
    """``triton__0d1d2de``: an Inductor kernel from before Inductor named its kernels (PyTorch
    2.0), only Triton's specialisation suffix after ``triton_``."""
    k.identify("triton", "Triton (TorchInductor)", "other")
    k.details["kind"] = "unknown"
    k.add(
        "triton_", "kind", "Inductor-generated Triton kernel (PyTorch 2.0: no kind, no ops named)"
    )
    _add_specialization(k)
    k.short = "Triton kernel (Inductor, unnamed)"
    return True


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IDENT_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
#: launch APIs a profiler records, that launch a kernel from a module loaded at run time: the
#: driver API (CUDA's cuLaunchKernel / cuLaunchKernelEx, which Triton's launcher calls) and HIP's
#: module launches (hipModuleLaunchKernel, which Triton uses on ROCm)
DRIVER_LAUNCHES = frozenset(
    (
        "driver",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "hipModuleLaunchKernel",
        "hipExtModuleLaunchKernel",
    )
)


def is_driver_launch(launch: str | None) -> bool:
    """Whether a launch API name (as a trace records it, e.g. ``cuLaunchKernel``) is the driver
    API's (or HIP's module launch), through which Triton's launcher starts every kernel."""
    if not launch:
        return False
    launch = launch.strip()
    return launch in DRIVER_LAUNCHES or launch.startswith(("cuLaunchKernel", "hipModuleLaunch"))


def decode_user_triton(k: Draft, full: str, *, launched: bool = True) -> bool:
    """A kernel launched through the driver API whose name is a bare identifier: a ``@triton.jit``
    function (vLLM's, SGLang's, flash-linear-attention's, a user's own), named after its Python
    function (``_fwd_kernel``, ``rotary_kernel``, ``chunk_gated_delta_rule_fwd_kernel_h``),
    perhaps with Triton 2.x's specialisation suffix. CUDA C++ kernels launched that way (a
    ``cuModuleLaunch`` of a cubin) have C++ signatures, so their names are not bare identifiers."""
    name = full.strip()
    if not _IDENT.fullmatch(name):
        return False
    cut = triton_signature_suffix(name)
    if cut > 0:
        k.details["specialization"] = name[cut + 1 :]
        name = name[:cut]
    from .stack import op_label, op_of, snake

    k.identify("triton", "Triton", op_of(snake(name)) or "other")
    k.details["kind"] = "user kernel (@triton.jit)"
    how = "launched through the driver API" if launched else "named by Triton 2.x's compiler"
    if launched:
        k.details["launch"] = "driver API"
    k.add(name, "op", f"@triton.jit kernel: {op_label(k.op)} ({how})")
    _add_specialization(k)
    if k.op in ("gemm", "attention"):
        k.tensor_cores = None  # tl.dot may or may not run on tensor cores: the name cannot tell
    k.short = f"Triton {name}"[:80]
    return True


_NCCL = re.compile(r"\bnccl(?:Symk)?(?:Dev)?Kernel_(\w+)")
#: the data types in NCCL's kernel names: its own codes (``f16``, ``f8e4m3``) and C type names
_NCCL_DT = precision_table(
    "i8",
    "u8",
    "i32",
    "u32",
    "i64",
    "u64",
    "f16",
    "f32",
    "f64",
    "bf16",
    "f8e4m3",
    "f8e5m2",
    "int8_t",
    "uint8_t",
    "bfloat16",
    "float16",
    "float32",
    "int32_t",
    "uint32_t",
    "int64_t",
    "uint64_t",
    "half",
    "float",
    "double",
    "__nv_bfloat16",
)
_NCCL_ALGO = (
    "COLLNET_DIRECT",
    "COLLNET_CHAIN",
    "NVLS_TREE",
    "COLLNET",
    "RING",
    "TREE",
    "NVLS",
    "PAT",
)  # longest first
_NCCL_PROTO = ("LL", "LL128", "SIMPLE")
_NCCL_REDUCTIONS = ("Sum", "Prod", "Max", "Min", "Avg", "PreMulSum", "SumPostDiv")
#: NCCL 2.27's symmetric-memory kernels (``src/device/symmetric/generate.py``):
#: ``ncclSymkDevKernel_{Collective}_{algorithm}_{reduction}_{type}``, e.g.
#: ``ncclSymkDevKernel_AllReduce_AGxLL_R_sum_f8e5m2``; the algorithm names its steps
#: (RS / AG: reduce-scatter, all-gather; LL, LD / ST, LDMC / STMC: protocol, loads / stores and
#: NVLink SHARP multimem ones) and each kernel serves one reduction and type.
_SYMK_REDUCTIONS = ("sum", "prod", "max", "min", "avg", "premulsum", "sumpostdiv")
#: What the name's tokens after the data type mean. NCCL compiles one entry kernel per collective
#: and data type and runs every algorithm and protocol through it (``src/device/generate.py``,
#: ``best_kernel``; NVIDIA/nccl #1246, #1595, #2196): the name ends in ``LL`` whatever protocol
#: runs, says ``Sum`` for every reduction operator, and ``RING`` for every algorithm but the tree.
#: So they are decoded as what the name says, and the short label keeps only what the name can tell:
#: the collective, the data type, and a tree.
_NCCL_NOMINAL = {
    "protocol": "the entry kernel's protocol suffix (LL, LL128 or Simple is chosen at run "
    "time, not told by the name)",
    "reduction": "the entry kernel's reduction suffix (one kernel serves every reduction operator)",
    "RING": "ring or another non-tree algorithm (NVLS, CollNet, PAT run through the same kernel)",
}


def decode_nccl(k: Draft, sym: str, full: str) -> bool:
    """``ncclDevKernel_AllReduce_Sum_f32_RING_LL``: the collective and data type, and the algorithm,
    protocol and reduction words as the entry kernel's name gives them (:data:`_NCCL_NOMINAL`)."""
    m = _NCCL.search(full)
    if not m:
        return False
    k.identify("nccl", "NCCL", "communication")
    toks = m.group(1).split("_")
    coll = toks[0]
    k.details["collective"] = coll
    k.add(m.group(0).split("_")[0] + "_" + coll, "collective", coll)
    rest = "_".join(toks[1:])
    if m.group(0).startswith("ncclSymk"):
        return _nccl_symmetric(k, coll, toks[1:])
    for algo in _NCCL_ALGO:
        if re.search(r"(?:^|_)" + algo + r"(?:_|$)", rest):
            k.details["algorithm"] = algo
            k.add(
                algo,
                "algorithm",
                _NCCL_NOMINAL.get(algo, f"{algo.lower().replace('_', ' ')} algorithm"),
            )
            rest = re.sub(r"(?:^|_)" + algo + r"(?=_|$)", "", rest)
            break
    for t in [t for t in rest.split("_") if t]:
        if t in _NCCL_PROTO:
            k.details["protocol"] = t
            k.add(t, "protocol", _NCCL_NOMINAL["protocol"])
        elif t in _NCCL_REDUCTIONS:
            k.details["reduction"] = t
            k.add(t, "reduction", _NCCL_NOMINAL["reduction"])
        elif t in _NCCL_DT:
            _nccl_dtype(k, t)
        else:
            k.add(t, "raw", "not decoded")
    tree = "tree" if "TREE" in str(k.details.get("algorithm", "")) else ""
    k.short = "NCCL " + " ".join(p for p in (coll, k.precision or "", tree) if p)
    return True


def _nccl_dtype(k: Draft, t: str) -> None:
    """The data type an NCCL kernel is compiled for: one kernel per type, so it is the precision."""
    k.precision = _NCCL_DT[t]
    k.dtypes = (k.precision,)
    k.add(t, "dtype", k.precision)


def _nccl_symmetric(k: Draft, coll: str, toks: list[str]) -> bool:
    k.details["symmetric"] = True
    algo: list[str] = []
    for t in toks:
        if t in _SYMK_REDUCTIONS:
            k.details["reduction"] = t
            k.add(t, "reduction", f"{t} reduction")
        elif t in _NCCL_DT:
            _nccl_dtype(k, t)
        else:
            algo.append(t)
    if algo:
        k.details["algorithm"] = "_".join(algo)
        k.add("_".join(algo), "algorithm", "symmetric-memory algorithm (steps and transports)")
    k.short = squash(f"NCCL {coll} {k.precision or ''} (symmetric memory)")
    return True


_MEMOP = re.compile(r"^\[?(?:CUDA )?(memcpy|memset|Memcpy|Memset)\b\s*(.*?)\]?$", re.IGNORECASE)
_DIRECTION = re.compile(
    r"\b(HtoD|DtoH|DtoD|HtoH|PtoP|Host-to-Device|Device-to-Host|Device-to-Device|Host-to-Host|Peer-to-Peer)\b"
)
_DIRECTION_SHORT = {
    "Host-to-Device": "HtoD",
    "Device-to-Host": "DtoH",
    "Device-to-Device": "DtoD",
    "Host-to-Host": "HtoH",
    "Peer-to-Peer": "PtoP",
}


def decode_memop(k: Draft, sym: str, full: str) -> bool:
    """``[CUDA memcpy HtoD]``, ``Memset (Device)``: a profiler's row for a copy or memset, with its
    direction and memory kind where the row names them."""
    s = full.strip()
    m = _MEMOP.match(s)
    if not m:
        return False
    kind = m.group(1).lower()
    rest = m.group(2)
    dm = _DIRECTION.search(rest)
    direction = _DIRECTION_SHORT.get(dm.group(1), dm.group(1)) if dm else None
    k.identify("memop", "CUDA runtime", kind + (f"_{direction.lower()}" if direction else ""))
    k.details["kind"] = kind
    if direction:
        k.details["direction"] = direction
    mem = re.match(
        r"[^(]*\(([^)]*)\)", rest
    )  # anchored: a search would rescan from every '(' (quadratic)
    if mem:
        k.details["memory"] = mem.group(1)
    k.short = (
        kind.capitalize()
        + (f" {direction}" if direction else "")
        + (f" ({mem.group(1)})" if mem else "")
    )
    k.add(s, "op", "memory set" if kind == "memset" else f"memory copy {direction or ''}".strip())
    return True


# torch.optim wraps each step in a profiler range named "Optimizer.step#<class>.step" (and zero_grad
# likewise); torch.profiler reports such ranges on the GPU timeline too (kineto's
# gpu_user_annotation), among the kernels.
_OPTIMIZER_RANGE = re.compile(r"Optimizer\.(step|zero_grad)#(\w+)\.(?:step|zero_grad)")


def decode_profiler_range(k: Draft, sym: str, full: str) -> bool:
    """``Optimizer.step#AdamW.step``: not a kernel but torch.optim's profiler range, as it spans the
    GPU's work."""
    m = _OPTIMIZER_RANGE.fullmatch(full.strip())
    if not m:
        return False
    what, cls = m.groups()
    k.library = "PyTorch (profiler range)"
    k.op = "optimizer"
    k.details["kind"] = "profiler range, not a kernel"
    k.details["optimizer"] = cls
    k.add(
        full.strip(),
        "range",
        f"torch.optim's record_function range around {cls}.{what}() on the GPU timeline",
    )
    k.short = f"{cls}.{what} (profiler range)"
    return True
