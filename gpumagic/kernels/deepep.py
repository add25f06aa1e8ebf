"""DeepEP (deepseek-ai/DeepEP): expert-parallel all-to-all for MoE, dispatch (tokens to their
experts' ranks) and combine (results back), over NVLink within a node (``deep_ep::intranode::``),
NVLink + RDMA across nodes (``deep_ep::internode::``) and the low-latency RDMA path for decoding
(``deep_ep::internode_ll::``). The ``notify_dispatch`` / ``cached_notify`` kernels exchange the
token counts a dispatch needs; ``layout::get_dispatch_layout`` counts tokens per rank and expert.
The low-latency dispatch's first template argument says whether tokens travel as FP8
(``internode_ll::dispatch<true, ...>``).
"""

from __future__ import annotations

from .name import Draft, squash, upper
from .spelling import signature, split_top
from .stack import claim

#: DeepEP's transports, as its namespaces name them (DeepSeek's own builds too), and what each is
SCOPES = {
    "intranode": "within a node (NVLink)",
    "internode": "across nodes (NVLink + RDMA)",
    "internode_ll": "across nodes, low latency (RDMA)",
}
_SCOPE_WORD = {"intranode": "intranode", "internode": "internode", "internode_ll": "low-latency"}


def add_phase_and_scope(k: Draft, phase: str | None, scope: str | None) -> str:
    """Record a DeepEP kernel's phase (dispatch, combine, notify) and scope (its transport), as
    DeepEP's releases and DeepSeek's own builds both name them; returns the scope's word for the
    short label ('' where the name gives none)."""
    if phase:
        k.details["phase"] = phase
    if scope:
        k.details["scope"] = scope
        k.add(scope, "scope", SCOPES[scope])
    return _SCOPE_WORD.get(scope or "", "")


def decode_deepep(k: Draft, sym: str, full: str) -> bool:
    """DeepEP's ``deep_ep::`` kernels: dispatch, combine and their notify steps, by scope
    (intranode, internode, low-latency)."""
    if "deep_ep::" not in full:
        return False
    path, leaf, args = signature(full)
    parts = path.split("::")
    if "deep_ep" not in parts[:-1]:
        return False
    scope = next((p for p in parts if p in SCOPES), None)
    if "dispatch" in leaf and "layout" not in leaf:
        phase = "notify" if "notify" in leaf else "dispatch"
    elif "combine" in leaf:
        phase = "notify" if "notify" in leaf else "combine"
    elif "notify" in leaf:
        phase = "notify"
    else:
        phase = None
    if phase:
        op = "all_to_all"
    elif "layout" in leaf or "layout" in parts:
        op = "moe_routing"
    elif "clean" in leaf:
        op = "memset"
    else:
        op = None
    claim(k, family="deepep", library="DeepEP", full=full, op=op, label=leaf, types=())
    where = add_phase_and_scope(k, phase, scope)
    top = split_top(args)
    if scope == "internode_ll" and phase == "dispatch" and top and top[0] in ("true", "1"):
        k.precision, k.dtypes = "fp8e4m3", ("fp8e4m3",)
        k.add(top[0], "dtype", "tokens sent as FP8 (e4m3) with per-128-channel scales")
    what = {"dispatch": "dispatch", "combine": "combine", "notify": f"notify ({leaf})"}.get(
        phase or "", leaf
    )
    k.short = squash(f"DeepEP {what} {where} {upper(k.precision)}")
    return True
