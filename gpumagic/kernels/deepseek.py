"""DeepSeek's own builds of its training kernels, as its published profiles name them
(deepseek-ai/profile-data, ``train.json``: DeepSeek-V3 training on H800s, kineto trace).

Those builds put DeepEP and the grouped FP8 GEMMs under ``dpsk::`` namespaces, and their helper
kernels under a bare ``cuda::`` namespace:

- ``dpsk::ep::internode::{dispatch,combine,notify_dispatch,cached_notify}<...>``,
  ``dpsk::ep::internode::{dispatch_ll,combine_ll}`` and ``dpsk::ep::cuda::get_dispatch_layout``:
  DeepEP (deepseek-ai/DeepEP ``csrc/kernels/internode.cu``, ``layout.cu``) under another namespace;
  dispatch / combine are the MoE all-to-all, notify / cached_notify exchange the counts it needs.
- ``cutlass::device_kernel<dpsk::grouped_gemm::cuda::{fp8_ptp128c, fp8_dptp128c_acc,
  m_grouped_fp8_ptp128c}::GemmKernel>``: FP8 GEMMs on Hopper's CUTLASS 3 device kernel, the
  predecessor of DeepGEMM (deepseek-ai/DeepGEMM): ``fp8`` inputs, ``ptp128c`` per-token (A) and
  per-128-channel scales as DeepGEMM's 1D/2D scaling has them, ``m_grouped`` the MoE experts'
  GEMMs grouped along M, ``acc`` accumulating into the output (the weight-gradient GEMM).
  ``dpsk::grouped_gemm::cuda::utils::{transpose, fill_tensormaps_kernel}`` prepare their operands.
- ``cuda::per_token_cast_to_fp8_*``, ``cuda::per_channel_cast_and_transpose``,
  ``cuda::cast_back_impl``: FP8 quantisation (and back) with per-token / per-channel scales, as in
  DeepGEMM's ``per_token_cast_to_fp8`` test helpers; ``cuda::swiglu_*``: the SwiGLU activation,
  some fused with the FP8 cast; ``cuda::topk_sum_and_topk_idx``, ``cuda::get_fused_mapping``,
  ``cuda::clean_and_count_expert``, ``cuda::unique_group_indices_impl``, ``cuda::aux_fi_impl``:
  MoE routing (group-limited top-k, token-to-expert maps, expert counts, the auxiliary-loss
  statistic); ``cuda::expand_to_fused_with_scales_impl`` / ``cuda::reduce_fused_impl``: moving
  tokens into and out of the experts' order.

The ``cuda::`` namespace is generic (libcu++ uses ``cuda::std::``), so only a bare
``cuda::<name>`` whose words say what a DeepSeek helper does is claimed here.
"""

from __future__ import annotations

from .deepep import SCOPES, add_phase_and_scope
from .name import Draft, squash, upper
from .spelling import signature
from .stack import claim, element_types, op_label, set_types, snake

#: (words in a bare cuda:: helper's name, op, category) — first match wins
_HELPERS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("swiglu",), "elementwise", "activation"),
    (("cast_back",), "dequantize", ""),
    (("cast_to_fp8", "cast_and_transpose", "per_token_cast", "per_channel_cast"), "quantize", ""),
    (("topk_sum", "topk_idx", "clean_and_count_expert", "get_fused_mapping"), "moe_routing", ""),
    (("unique_group_indices", "count_expert", "aux_fi"), "moe_routing", ""),
    (("expand_to_fused", "reduce_fused"), "moe_permute", ""),
    (("batched_transpose",), "transpose", ""),
)


def decode_deepseek(k: Draft, sym: str, full: str) -> bool:
    """DeepSeek's own builds: ``dpsk::`` DeepEP and grouped FP8 GEMMs, and the ``cuda::``
    helpers."""
    if "dpsk::" in full:
        return _dpsk(k, full)
    if "cuda::" in full:
        return _helper(k, full)
    return False


def _dpsk(k: Draft, full: str) -> bool:
    path, leaf, args = signature(full)
    if path.startswith("cutlass::device_kernel") or leaf == "device_kernel":
        inner = args.split("::GemmKernel", 1)[0]
        if "dpsk::grouped_gemm" not in inner:
            return False
        return _grouped_gemm(k, inner)
    parts = path.split("::")
    if parts[:1] != ["dpsk"] and "dpsk" not in parts[:-1]:
        return False
    if "ep" in parts:
        _ep(k, full, parts, leaf, args)
        return True
    if "grouped_gemm" in parts:
        op = "transpose" if "transpose" in leaf else "other"
        if "tensormap" in leaf:
            op = "other"
        claim(k, family="deepgemm", library="DeepSeek grouped GEMM", full=full, op=op, label=leaf)
        k.short = f"DeepSeek grouped GEMM helper: {leaf}"
        return True
    return False


def _grouped_gemm(k: Draft, inner: str) -> bool:
    variant = inner.rsplit("::", 1)[-1]
    claim(
        k,
        family="deepgemm",
        library="DeepSeek grouped GEMM",
        full=inner,
        op="gemm",
        label=variant,
        tensor_cores=True,
        types=(),
    )
    words = f"_{variant}_"
    if "fp8" in words:
        set_types(k, ("fp8e4m3", "bf16"), "gemm")
        k.add("fp8", "dtype", "FP8 (e4m3) inputs, BF16 output")
    k.set_arch("sm90")
    grouped = variant.startswith("m_grouped")
    if grouped:
        k.details["grouped"] = "grouped (M)"
        k.add("m_grouped", "grouping", "MoE experts' GEMMs grouped along M")
    if "ptp128c" in words:
        k.details["scaling"] = "per-token × per-128-channel"
        k.add("ptp128c", "scaling", "per-token (A) and per-128-channel (B) scales")
    if "_acc_" in words:
        k.epilogue = "accumulate"
        k.add("acc", "epilogue", "accumulates into the output (weight gradient)")
    k.short = squash(
        f"DeepSeek {upper(k.precision)} {'grouped GEMM' if grouped else 'GEMM'} ({variant})"
    )
    return True


def _ep(k: Draft, full: str, parts: list[str], leaf: str, args: str) -> None:
    scope = next((p for p in parts if p in SCOPES), None)
    if leaf.endswith("_ll") and scope == "internode":
        scope = "internode_ll"
    low = leaf.lower()
    if "layout" in low:
        phase, op = None, "moe_routing"
    elif "notify" in low:
        phase, op = "notify", "all_to_all"
    elif "dispatch" in low:
        phase, op = "dispatch", "all_to_all"
    elif "combine" in low:
        phase, op = "combine", "all_to_all"
    else:
        phase, op = None, None
    # the token type is a template argument where the kernel is typed (combine<..., __nv_bfloat16,
    # ...>); dispatch's is chosen at run time (FP8 when scales are passed), so it stays unknown
    claim(
        k,
        family="deepep",
        library="DeepEP (DeepSeek build)",
        full=full,
        op=op,
        label=leaf,
        types=element_types(args),
    )
    where = add_phase_and_scope(k, phase, scope)
    what = leaf if phase == "notify" or not phase else phase
    k.short = squash(f"DeepEP {what} {where} {upper(k.precision)}")


def _helper(k: Draft, full: str) -> bool:
    path, leaf, args = signature(full)
    if not path.startswith("cuda::") or path.count("::") != 1:
        return False
    words = snake(leaf)
    hit = next(((op, cat) for keys, op, cat in _HELPERS if any(w in words for w in keys)), None)
    if hit is None:
        return False
    op, category = hit
    types = element_types(args) or element_types(full[len(path) :])
    quantizes = op in ("quantize", "dequantize") or "_cast" in words
    if quantizes:  # the FP8 side travels as bytes (unsigned char*, void*): the name says FP8
        types = tuple(dict.fromkeys(("fp8e4m3", *(t for t in types if t != "fp32"))))
    claim(
        k,
        family="deepep" if op in ("moe_routing", "moe_permute") else "deepgemm",
        library="DeepSeek (cuda:: helpers)",
        full=full,
        op=op,
        label=leaf,
        types=types,
    )
    if quantizes and op == "elementwise":
        k.details["fused"] = "quantize to fp8e4m3"
        k.precision = "fp8e4m3"
    if category:
        k.details["category"] = category
    k.short = squash(f"DeepSeek {upper(k.precision)} {op_label(k.op)}: {leaf}")[:80]
    return True
