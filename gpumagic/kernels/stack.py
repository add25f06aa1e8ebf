"""What the LLM stack's kernel names share: the words that say what a kernel does, and the element
types that say what it computes in.

The serving and training libraries (vLLM, SGLang, FlashInfer, TensorRT-LLM, DeepGEMM, DeepEP,
Transformer Engine, Liger, Mamba, xFormers, bitsandbytes, Apex, torchao) name their kernels after
what they do, in their own namespaces (``vllm::rms_norm_kernel<c10::BFloat16, 8>``,
``flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>``,
``deep_ep::internode_ll::dispatch<...>``) or, for Triton, by the Python function's name
(``_rms_norm_forward_kernel``). So each library's module only says which names are its own and what
is special about them; the kernel's operation is read here from the words of its name (``rms_norm``
-> norm, ``rotary`` -> rope, ``topk_softmax`` -> MoE routing, ``reshape_and_cache`` -> KV-cache
write, ``quant`` -> quantize), and its precision from the element types among its template arguments
(``__nv_fp8_e4m3``, ``cutlass::float_e2m1_t``, ``c10::BFloat16``, ...). A library's own vocabulary
overrides these where it differs.

Op vocabulary added for these libraries (beside gemm, attention, norm, elementwise, softmax, ...):
``rope``, ``quantize``, ``dequantize``, ``moe_routing`` (top-k gating, sorting tokens by expert),
``moe_permute`` (moving tokens to and from their experts' order), ``all_to_all`` (expert-parallel
dispatch and combine), ``kv_cache_write``, ``sampling``, ``loss``, ``scan`` (selective state-space
scan), ``conv`` (causal conv1d), ``communication`` (all-reduce outside NCCL). Weight-only GEMMs
(int4 / fp4 / int8 weights against 16-bit activations) give the weight type as ``precision``, the
activation type as ``details["activation"]`` and both in ``dtypes``.

Everything here reads a name once, left to right: word scans and substring tests, no backtracking
patterns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .name import Draft, squash, upper
from .precision import precision_table
from .spelling import signature, template_args

#: C++ element types -> canonical dtype. Index types (int, long) are left out: they size, they do
#: not compute. bitsandbytes' and vLLM's own types are theirs alone.
ELEMENT_TYPES = precision_table(
    "float",
    "double",
    "half",
    "__half",
    "__half2",
    "half2",
    "c10::Half",
    "at::Half",
    "cutlass::half_t",
    "nv_half",
    "c10::BFloat16",
    "at::BFloat16",
    "__nv_bfloat16",
    "__nv_bfloat162",
    "nv_bfloat16",
    "nv_bfloat162",
    "cutlass::bfloat16_t",
    "bfloat16",
    "cutlass::tfloat32_t",
    "__nv_fp8_e4m3",
    "__nv_fp8x4_e4m3",
    "__nv_fp8x2_e4m3",
    "c10::Float8_e4m3fn",
    "c10::Float8_e4m3fnuz",
    "cutlass::float_e4m3_t",
    "fp8e4m3",
    "__nv_fp8_e5m2",
    "c10::Float8_e5m2",
    "cutlass::float_e5m2_t",
    "fp8e5m2",
    "cutlass::float_e2m1_t",
    "cutlass::type_erased_dynamic_float4_t",
    "__nv_fp4_e2m1",
    "__nv_fp4x2_e2m1",
    "__nv_fp4x4_e2m1",
    "cutlass::nv_float4_t",
    "cutlass::mx_float4_t",
    "cutlass::float_ue8m0_t",
    "cutlass::float_ue4m3_t",
    "cutlass::int4b_t",
    "cutlass::uint4b_t",
    "cutlass::uint2b_t",
    "int8_t",
    "signed char",
    "uint8_t",
    "c10::Float4_e2m1fn_x2",
    aliases={
        "bnb_bfloat16": "bf16",
        "cutlass::vllm_uint4b8_t": "uint4",
        "cutlass::vllm_uint8b128_t": "uint8",
    },
)
_TYPE_WORD = re.compile(r"(?:signed char|[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)")
#: precisions that are narrower than the activations they meet in a weight-only GEMM
NARROW = (
    "int4",
    "uint4",
    "fp4e2m1",
    "int8",
    "uint8",
    "uint2",
    "fp8e4m3",
    "fp8e5m2",
    "nf4",
    "int3",
    "int2",
)
SIXTEEN = ("fp16", "bf16")


def element_types(text: str) -> tuple[str, ...]:
    """Canonical element types named in ``text``, in order of first appearance, each once."""
    out: dict[str, None] = {}
    for m in _TYPE_WORD.finditer(text):
        canon = ELEMENT_TYPES.get(m.group(0))
        if canon:
            out.setdefault(canon, None)
    return tuple(out)


def snake(name: str) -> str:
    """``FusedAddRMSNormKernel`` -> ``fused_add_rms_norm_kernel``; already-snake names are
    lower-cased. One pass over the characters (an upper-case run followed by a capitalised word
    splits before the word's capital)."""
    out: list[str] = []
    last = len(name) - 1
    for i, ch in enumerate(name):
        if ch.isupper() and i > 0:
            prev = name[i - 1]
            if (
                prev.islower()
                or prev.isdigit()
                or (prev.isupper() and i < last and name[i + 1].islower())
            ):
                out.append("_")
        out.append(ch.lower())
    return "".join(out).replace("rmsnorm", "rms_norm").replace("layernorm", "layer_norm")


#: (op, words): the first op with a word in a kernel's snake-cased name wins, so fused kernels read
#: as the operation their name puts first (rms_norm_static_fp8_quant -> norm, silu_and_mul_quant ->
#: elementwise)
#: words of a gated activation or activation kernel (SiLU / GELU and multiply, SwiGLU, ...)
_ACTIVATION_WORDS = (
    "and_mul",
    "silu",
    "gelu",
    "swiglu",
    "geglu",
    "relu",
    "activation",
    "act_kernel",
    "gated_act",
    "sigmoid",
    "swish",
)

OP_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "communication",
        (
            "allreduce",
            "all_reduce",
            "cross_device_reduce",
            "allgather",
            "all_gather",
            "reduce_scatter",
            "lamport",
            "oneshot",
            "twoshot",
            "one_shot",
            "two_shot",
            "custom_ar",
            "quickreduce",
        ),
    ),
    ("rope", ("rotary", "rope", "pos_encoding", "pos_ids", "mrope")),
    (
        "kv_cache_write",
        (
            "reshape_and_cache",
            "concat_and_cache",
            "append_paged_kv",
            "append_kv",
            "store_kv",
            "kvcache_store",
            "store_kvcache",
            "set_kv",
            "update_kv",
            "cache_write",
            "write_kv",
        ),
    ),
    (
        "attention",
        (
            "attention",
            "attn",
            "_mha",
            "mha_",
            "fmha",
            "_mla",
            "mla_",
            "prefill",
            "decode_with",
            "merge_state",
            "flash_fwd",
            "flash_bwd",
            "splitkv",
            "xqa",
            "paged_kv",
            "sdpa",
        ),
    ),
    (
        "norm",
        (
            "rms_norm",
            "layer_norm",
            "ln_fwd",
            "ln_bwd",
            "group_norm",
            "qknorm",
            "qk_norm",
            "l2norm",
            "l2_norm",
            "poly_norm",
            "norm_kernel",
            "_norm_",
            "batch_norm",
            "instance_norm",
            "dyt",
        ),
    ),
    (
        "moe_permute",
        (
            "expand_input_rows",
            "permute",
            "finalize_moe",
            "moe_sum",
            "shuffle_rows",
            "scatter_tokens",
            "gather_tokens",
            "moe_unpermute",
            "finalize_routing",
        ),
    ),
    (
        "moe_routing",
        (
            "topk_softmax",
            "topk_gating",
            "gating",
            "moe_align",
            "align_block_size",
            "count_and_sort",
            "expert_maps",
            "routing",
            "grouped_topk",
            "moe_topk",
            "moe_softmax",
            "router",
            "expert_count",
            "sort_tokens",
            "moe_fused_gate",
            "biased_grouped_topk",
            "dispatch_layout",
        ),
    ),
    ("dequantize", ("dequant",)),
    (
        "gemm",
        (
            "gemm",
            "gemv",
            "matmul",
            "marlin",
            "machete",
            "bmm",
            "grouped_mm",
            "_mm_",
            "scaled_mm",
            "mm_kernel",
            "mma_kernel",
            "_dot_",
            "linear",
        ),
    ),
    ("elementwise", _ACTIVATION_WORDS),
    (
        "quantize",
        (
            "quant",
            "to_fp8",
            "to_fp4",
            "cvt_fp16_to_fp4",
            "cast_transpose",
            "cast_fp8",
            "mxfp8",
            "nvfp4",
            "fp8_cast",
            "amax",
            "cast_kernel",
            "ue8m0",
        ),
    ),
    (
        "sampling",
        (
            "sampling",
            "sample",
            "top_p",
            "topp",
            "top_k_renorm",
            "min_p",
            "renorm_prob",
            "mask_logits",
            "penalt",
            "argmax",
        ),
    ),
    ("softmax", ("softmax",)),
    ("loss", ("cross_entropy", "jsd", "kl_div", "kldiv", "tvd", "loss", "logprob")),
    (
        "scan",
        (
            "selective_scan",
            "chunk_scan",
            "state_passing",
            "chunk_state",
            "ssd",
            "ssm",
            "cumsum",
            "scan",
        ),
    ),
    ("conv", ("conv1d", "conv")),
    ("optimizer", ("adam", "optimizer", "sgd", "lamb", "lion", "adagrad", "novograd")),
    ("transpose", ("transpose",)),
    ("embedding", ("embedding",)),
    ("reduce", ("reduction", "_reduce_", "absmax", "_sum_")),
    ("copy", ("copy", "gather", "scatter")),
)


def op_of(words: str) -> str | None:
    """The operation a kernel's snake-cased name says it does, or None."""
    padded = f"_{words}_"
    for op, keys in OP_WORDS:
        if any(key in padded for key in keys):
            return op
    return None


#: ops whose kernels are matrix multiplies on tensor cores unless a library says otherwise
MMA_OPS = ("gemm",)
_LABEL = {
    "gemm": "GEMM",
    "kv_cache_write": "KV-cache write",
    "moe_routing": "MoE routing",
    "moe_permute": "MoE permute",
    "all_to_all": "all-to-all",
    "rope": "RoPE",
}


def op_label(op: str) -> str:
    return _LABEL.get(op, op.replace("_", " "))


def set_types(k: Draft, types: tuple[str, ...], op: str) -> None:
    """Precision and dtypes from the element types a kernel names. A quantize or dequantize kernel's
    precision is the narrow type it converts to or from; a GEMM that pairs a narrow weight type with
    16-bit activations is weight-only: its precision is the weight type, the activations' type goes
    to ``details["activation"]``."""
    if not types:
        return
    k.dtypes = types
    narrow = next((t for t in types if t in NARROW), None)
    wide = next((t for t in types if t in SIXTEEN), None)
    if op in ("quantize", "dequantize") and narrow:
        k.precision = narrow
    elif op == "gemm" and narrow and wide and narrow not in ("fp8e4m3", "fp8e5m2"):
        k.precision = narrow
        k.details["activation"] = wide
        k.details["weight_only"] = True
    elif op == "gemm" and narrow and narrow.startswith("fp8"):
        k.precision = narrow
    else:
        k.precision = types[0]


def claim(
    k: Draft,
    *,
    family: str,
    library: str,
    full: str,
    words: str | None = None,
    op: str | None = None,
    label: str | None = None,
    tensor_cores: bool | None = None,
    types: tuple[str, ...] | None = None,
) -> None:
    """Fill a draft for a kernel of the LLM stack: family and library, the op (given, or read from
    ``words`` or from the kernel's own name), precision from its template arguments, one explanation
    row, a short label."""
    path, leaf, args = signature(full)
    if not leaf:
        leaf = full.split("(")[0].strip()
    k.identify(family, library, op or op_of(words if words is not None else snake(leaf)) or "other")
    if types is None:
        # the template arguments first; a kernel without typed ones is read from its parameters
        # (c10::BFloat16*)
        types = element_types(args or template_args(full)) or element_types(full[len(path) :])
    set_types(k, types, k.op)
    _categorise(k, words if words is not None else snake(leaf) + "_" + snake(args[:300]))
    if tensor_cores is None and k.op in MMA_OPS:
        tensor_cores = True
    if tensor_cores is not None:
        k.tensor_cores = tensor_cores
        k.math = "tensor cores" if tensor_cores else "CUDA cores (no tensor cores)"
    what = label or leaf
    k.add(path or leaf, "op", f"{library}: {op_label(k.op)} ({what})")
    if k.precision:
        meaning = f"{k.precision} data"
        if k.details.get("weight_only"):
            meaning = f"{k.precision} weights, {k.details['activation']} activations (weight-only)"
        k.add(", ".join(k.dtypes), "dtype", meaning)
    k.short = squash(f"{library.split(' (')[0]} {precision_label(k)} {what}")[:110]


def claim_listed(
    k: Draft,
    name: str,
    full: str,
    *,
    family: str,
    library: str,
    ops: Mapping[str, str],
    mma_op: str | None = None,
    types: tuple[str, ...] | None = None,
) -> None:
    """Claim one of a library's Triton kernels from its list (``ops``: the Python function's name
    -> op). A profiler shows such a kernel by its function's name alone, so the name is the label
    and the list says the op; the kernels of the library's ``mma_op`` (vLLM's and Mamba's GEMMs,
    SGLang's attention) run ``tl.dot`` on tensor cores, of which the name says nothing."""
    op = ops[name]
    claim(
        k,
        family=family,
        library=library,
        full=full,
        op=op,
        label=name,
        types=types,
        tensor_cores=True if op == mma_op else None,
    )


def precision_label(k: Draft) -> str:
    """The precision as a short label says it: ``FP8E4M3``, or for a weight-only GEMM the weight
    and activation widths, ``WINT4A16`` (what decides its rate is both)."""
    if k.details.get("weight_only"):
        return f"W{upper(k.precision)}A{str(k.details['activation'])[-2:]}"
    return upper(k.precision)


def _categorise(k: Draft, words: str) -> None:
    """What kind of a broad op a kernel is, where its words say: an elementwise kernel that applies
    an activation (SiLU-and-mul, GELU-and-mul, SwiGLU) is op ``activation`` (an MLP's gate, not
    generic elementwise work; ``details["category"]`` says so too); a GEMM over MoE experts
    (``fused_moe_kernel``, grouped GEMMs) is ``details["grouped"]``."""
    padded = f"_{words}_"
    if k.op == "elementwise" and any(w in padded for w in _ACTIVATION_WORDS):
        k.op = "activation"
        k.details["category"] = "activation"
    elif k.op == "gemm" and ("moe" in padded or "grouped" in padded or "expert" in padded):
        k.details.setdefault("grouped", "grouped (MoE experts)")


def tile_from_numbers(
    k: Draft, m: str, n: str, kk: str | None = None, spelled: str | None = None
) -> None:
    tile = f"{m}x{n}" + (f"x{kk}" if kk else "")
    k.tile = tile
    k.add(
        spelled or tile, "tile", f"block tile {'M×N×K' if kk else 'M×N'} = {tile.replace('x', '×')}"
    )
