"""TensorRT-LLM's kernels: its generated attention kernels (fmha_v2, XQA, trtllm-gen FMHA), its
trtllm-gen GEMMs and the ``tensorrt_llm::kernels::`` templates (MoE routing and permutation, RoPE
with KV-cache update, quantization, all-reduce fusions).

fmha_v2 names are assembled by ``cpp/kernels/fmha_v2/setup.py``:
``fmha_v2_[flash_attention_]{dtype}[_{output dtype}]_{q step}_{kv step}_S_{layout}_{head
size}[_{options}]_sm{arch} _kernel[_nl][_tiled]``, e.g.
``fmha_v2_flash_attention_fp16_64_32_S_qkv_128_causal_sm86_kernel_nl``. Precompiled XQA kernels read
``xqa_kernel_dt_{dtype}_d_{head dim}_beam_{n}_kvt_{kv dtype}_..._sm_{arch}``; the JIT-compiled XQA
kernel is plainly ``kernel_mha``. trtllm-gen kernels spell their types in CamelCase:
``bmm_E4m3_E4m3E4m3_Fp32_t128x8x128u2_s6_...``, ``fmhaSm100aKernel_QE4m3KvE2m1OE4m3H128PagedKv...``.
"""

from __future__ import annotations

import re

from .name import Draft, add_layout, add_tile, squash, upper
from .precision import alternation, precision_table
from .spelling import signature
from .stack import claim, set_types, snake

_FAMILY = "trtllm"
_LIB = "TensorRT-LLM"
_FMHA_V2 = re.compile(r"^fmha_v2_(?P<body>\w+?)_sm(?P<sm>\d+)_kernel(?P<tail>\w*)$")
#: the element types fmha_v2's names spell (setup.py's dtype words)
_V2_TYPES = precision_table("fp16", "bf16", "e4m3", "fp32", "int8", "e5m2")
_XQA = re.compile(r"^xqa_kernel_(?P<body>\w+)$")
#: XQA's ``dt_`` (inputs) and ``kvt_`` (KV cache) types; its ``fp8`` is E4M3
_XQA_TYPES = precision_table("fp16", "bf16", "e4m3", "int8", aliases={"fp8": "fp8e4m3"})
#: trtllm-gen's CamelCase types; an ``Mx`` type is the element of an MX (block-scaled) format
_GEN_CANON = precision_table(
    "E4m3",
    "E5m2",
    "E2m1",
    "Bfloat16",
    "Bf16",
    "Fp16",
    "Fp32",
    "Int8",
    aliases={"MxE4m3": "fp8e4m3", "MxE2m1": "fp4e2m1", "MxInt4": "int4"},
)
_GEN_TYPE = re.compile("(" + alternation(_GEN_CANON) + ")")
_GEN_GEMM = re.compile(r"^(?:bmm|gemm|batchedGemm|gemmGatedAct|bmmGatedAct)_(?P<rest>\w+)$")
_GEN_FMHA = re.compile(r"^fmhaSm(?P<sm>\d+)[af]?Kernel_(?P<rest>\w+)$")
_KNOWN_BARE = ("kernel_mha", "kernel_mha_impl")


def _claim(
    k: Draft,
    full: str,
    op: str | None,
    label: str,
    *,
    part: str | None = None,
    tensor_cores: bool | None = None,
    words: str | None = None,
) -> None:
    """Claim a TensorRT-LLM kernel. A generated one (``part``: fmha_v2, XQA, trtllm-gen) is named
    after its part, and its element types are left to its reader: the name spells them its own way
    (``e4m3``, ``E4m3``) and has no C++ template arguments to read them from."""
    claim(
        k,
        family=_FAMILY,
        library=f"{_LIB} ({part})" if part else _LIB,
        full=full,
        words=words,
        op=op,
        tensor_cores=tensor_cores,
        types=() if part else None,
        label=label,
    )


def _fmha_v2(k: Draft, m: re.Match[str]) -> None:
    toks = m.group("body").split("_")
    _claim(k, m.group(0), "attention", "fmha_v2 attention", part="fmha_v2", tensor_cores=True)
    k.set_arch(f"sm{m.group('sm')}")
    i = 0
    if toks[:2] == ["flash", "attention"]:
        k.details["variant"] = "flash attention"
        i = 2
    types = []
    while i < len(toks) and toks[i] in _V2_TYPES:
        types.append(_V2_TYPES[toks[i]])
        i += 1
    if types:
        k.precision, k.dtypes = types[0], tuple(types)
        k.add(
            "_".join(toks[i - len(types) : i]),
            "dtype",
            f"{types[0]} Q/K/V" + (f", {types[1]} output/accumulate" if len(types) > 1 else ""),
        )
    nums: list[str] = []
    while i < len(toks) and toks[i].isdigit() and len(nums) < 2:
        nums.append(toks[i])
        i += 1
    if len(nums) == 2:
        add_tile(k, f"{nums[0]}x{nums[1]}", f"{nums[0]}_{nums[1]}")
    if i < len(toks) and toks[i] == "S":
        i += 1
    layout = []
    while i < len(toks) and not toks[i][:1].isdigit():
        layout.append(toks[i])
        i += 1
    if layout:
        k.layout = "_".join(layout)
        k.add(
            k.layout,
            "layout",
            f"inputs as {k.layout.replace('_', ' ').upper()} (packed / paged layout)",
        )
    if i < len(toks):
        k.details["head_dim"] = toks[i]
        k.add(toks[i], "head dim", f"head size {toks[i]}")
        i += 1
    opts = toks[i:]
    if opts:
        k.details["options"] = "_".join(opts)
        k.add("_".join(opts), "options", ", ".join(opts).replace("causal", "causal mask"))
    tail = m.group("tail").strip("_")
    if tail:
        k.add(
            tail,
            "variant",
            {"nl": "no-loop", "nl_tiled": "no-loop, tiled"}.get(tail, tail.replace("_", ", ")),
        )
    k.short = squash(f"TRT-LLM fmha_v2 {upper(k.precision)} attention") + (
        f" d{k.details['head_dim']}" if "head_dim" in k.details else ""
    )


def _xqa(k: Draft, m: re.Match[str]) -> None:
    toks = m.group("body").split("_")
    _claim(k, m.group(0), "attention", "XQA decode attention", part="XQA", tensor_cores=True)
    pairs = dict(zip(toks[::2], toks[1::2]))
    canon = _XQA_TYPES
    if pairs.get("dt") in canon:
        k.precision = canon[pairs["dt"]]
        k.dtypes = (k.precision,)
    if pairs.get("kvt") in canon:
        k.details["kv_cache"] = canon[pairs["kvt"]]
        k.dtypes += (canon[pairs["kvt"]],)
    if pairs.get("d"):
        k.details["head_dim"] = pairs["d"]
    if pairs.get("sm"):
        k.set_arch(f"sm{pairs['sm']}")
    k.short = squash(f"TRT-LLM XQA {upper(k.precision)} decode attention")


def _gen_fmha_types(rest: str) -> tuple[str, str, str, str] | None:
    """'QE4m3KvE2m1OE4m3H128PagedKv...' -> ('E4m3', 'E2m1', 'E4m3', '128'), by position (no
    backtracking pattern); 'QkvBfloat16OBfloat16H128...' (Q, K and V of one type) -> ('Bfloat16',
    'Bfloat16', 'Bfloat16', '128')."""
    if rest.startswith("Qkv"):
        o = rest.find("O", 3)
        h = rest.find("H", o + 1) if o > 0 else -1
        if min(o, h) < 0:
            return None
        digits = re.match(r"\d+", rest[h + 1 : h + 8])
        return rest[3:o], rest[3:o], rest[o + 1 : h], digits.group(0) if digits else ""
    kv = rest.find("Kv", 1)
    o = rest.find("O", kv + 2) if kv > 0 else -1
    h = rest.find("H", o + 1) if o > 0 else -1
    if not rest.startswith("Q") or min(kv, o, h) < 0:
        return None
    digits = re.match(r"\d+", rest[h + 1 : h + 8])
    return rest[1:kv], rest[kv + 2 : o], rest[o + 1 : h], digits.group(0) if digits else ""


def _gen_types(text: str) -> tuple[str, ...]:
    return tuple(_GEN_CANON[t] for t in _GEN_TYPE.findall(text))


_WORD = re.compile(r"\w+")


def decode_trtllm(k: Draft, sym: str, full: str) -> bool:
    """TensorRT-LLM's generated kernels (one word each) and its namespaced templates."""
    s = full.strip()
    # the generated names are one word; their patterns assume it
    if _WORD.fullmatch(s) is not None and _generated(k, s):
        return True
    path, leaf, _args = signature(full)
    if not _is_trtllm_path(path, full):
        return False
    _template(k, full, path, leaf)
    return True


def _generated(k: Draft, s: str) -> bool:
    """The generated kernels, one word each: fmha_v2, XQA (precompiled and JIT), trtllm-gen's FMHA,
    its multi-CTA reduction and its GEMMs."""
    for pattern, read in ((_FMHA_V2, _fmha_v2), (_XQA, _xqa), (_GEN_FMHA, _gen_fmha)):
        m = pattern.match(s)
        if m:
            read(k, m)
            return True
    if s in _KNOWN_BARE:
        _claim(k, s, "attention", "XQA attention (JIT)", part="XQA", tensor_cores=True)
        return True
    if s == "fmhaReductionKernel":  # trtllm-gen's multi-CTA KV reduction (fmhaReduction.cu)
        label = "trtllm-gen attention: multi-CTA reduction"
        _claim(k, s, "attention", label, part="trtllm-gen", tensor_cores=False)
        return True
    m = _GEN_GEMM.match(s)
    if m and _GEN_TYPE.match(m.group("rest")):
        _gen_gemm(k, m)
        return True
    return False


def _gen_fmha(k: Draft, m: re.Match[str]) -> None:
    """``fmhaSm100aKernel_QE4m3KvE2m1OE4m3H128PagedKv...``: the types of Q, the KV cache and O, and
    the head dimension."""
    _claim(k, m.group(0), "attention", "trtllm-gen FMHA", part="trtllm-gen", tensor_cores=True)
    k.set_arch(f"sm{m.group('sm')}")
    q_kv_o = _gen_fmha_types(m.group("rest"))
    if q_kv_o:
        q, kv, o, head = q_kv_o
        types = tuple(dict.fromkeys(_gen_types(q) + _gen_types(kv) + _gen_types(o)))
        if types:
            k.precision, k.dtypes = types[0], types
        if _gen_types(kv):
            k.details["kv_cache"] = _gen_types(kv)[0]
        if head:
            k.details["head_dim"] = head
    k.short = f"TRT-LLM trtllm-gen {upper(k.precision)} attention"


def _gen_gemm(k: Draft, m: re.Match[str]) -> None:
    """``bmm_E4m3_E4m3E4m3_Fp32_t128x8x128u2_s6_...``: the types, then tile, stages, cluster,
    architecture and layout tokens in any order."""
    s = m.group(0)
    toks = m.group("rest").split("_")
    types = _gen_types(toks[0]) + _gen_types(toks[1] if len(toks) > 1 else "")
    _claim(k, s, "gemm", "trtllm-gen GEMM", part="trtllm-gen", tensor_cores=True)
    set_types(k, types, "gemm")
    for t in toks[2:]:
        _gen_gemm_token(k, t)
    if s.startswith("bmm"):
        k.details["grouped"] = "batched (MoE experts)"
    k.short = f"TRT-LLM trtllm-gen {upper(k.precision)} GEMM" + (f" {k.tile}" if k.tile else "")


def _gen_gemm_token(k: Draft, t: str) -> None:
    """One of a trtllm-gen GEMM's geometry tokens: the first tile and stage count win."""
    tm = re.fullmatch(r"t(\d+)x(\d+)x(\d+)\w*", t)
    if tm and k.tile is None:
        add_tile(k, "x".join(tm.groups()), t)
    elif re.fullmatch(r"s\d+", t) and k.stages is None:
        k.stages = int(t[1:])
        k.add(t, "stages", f"{t[1:]}-stage pipeline")
    elif t.startswith("cga") and re.fullmatch(r"cga\d+x\d+x\d+", t):
        k.cluster = t[3:]
        k.add(t, "cluster", f"thread-block cluster {t[3:]}")
    elif re.fullmatch(r"sm\d+[af]?", t):
        k.set_arch(t)
    elif re.fullmatch(r"[TN]{2}", t) and k.layout is None:
        add_layout(k, t, "AB")


_NAMESPACES = ("tensorrt_llm::", "moe::dev::", "fused_moe::", "batchedGemm::", "gemm::")


def _is_trtllm_path(path: str, full: str) -> bool:
    """Whether a template's function path is TensorRT-LLM's: its namespaces (a bare ``gemm::`` only
    where the name says trtllm)."""
    if not (path.startswith(_NAMESPACES) or "::tensorrt_llm::" in path):
        return False
    return not (path.startswith("gemm::") and "trtllm" not in full)


def _template(k: Draft, full: str, path: str, leaf: str) -> None:
    """A TensorRT-LLM template: the fused MoE GEMM, masked multi-head attention (on CUDA cores), or
    a kernel whose op its words say (all-reduce fusions and MoE routing by their namespace)."""
    if path.startswith("fused_moe::"):
        _claim(k, full, "gemm", "fused MoE GEMM", tensor_cores=True)
        k.details["grouped"] = "MoE experts"
        return
    words = snake(leaf)
    if "::mmha::" in full or "masked_multihead" in words:
        _claim(k, full, "attention", leaf, tensor_cores=False)
        return
    op = None
    if "::ar_fusion::" in full or "allreduce" in words or "::lamport" in full:
        op = "communication"
    elif "moe::dev::routing" in path or "::routing" in path:
        op = "moe_routing"
    _claim(k, full, op, leaf, words=words)
