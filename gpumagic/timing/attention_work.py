"""FLOPs of a fused attention op counted as its kernel does them: over the (query, key) pairs it
computes.

PyTorch's own formulas (``torch.utils.flop_counter``) count every attention op dense: ``B*H*Lq*Lk``
pairs times the head dims. The fused kernels do not: a causal FlashAttention, cuDNN or CPU-flash
kernel skips the tiles above the diagonal, so a dense count of ``is_causal=True`` reads twice the
work that ran (an H100 line once said "904 TFLOP/s fp16 = 91% of peak" for a kernel doing about half
that). And with grouped-query attention (``enable_gqa``, fewer key heads than query heads) the
formula's shape check fails and nothing is counted. So for the fused attention ops this module
counts:

- every query head against its group's key head (GQA/MQA computes ``Hq`` heads' worth of scores);
- ``is_causal``: the pairs with key index <= query index, diagonal included, top-left aligned as
  SDPA's ``is_causal`` (``torch.ones(L, S).tril()``): L(L+1)/2 of L^2 for a square one;
- a sliding window (``window_size_left``/``right`` of the flash ops, ``window_size`` of the
  efficient ones): the pairs inside it;
- an attention mask or bias tensor: the share of its entries that keep a pair (True in a boolean
  mask; in an additive one, entries above :data:`MASKED_BELOW`: ``-inf``, ``finfo.min``, -1e9 and
  the -65504 that PyTorch's cuDNN path turns a boolean mask into all remove a pair, since exp(-1e4)
  is 0 in every float format); broadcasting repeats every entry equally, so that share is the mask's
  own. This is the *useful* work: a kernel that masks inside dense tiles (the memory-efficient
  kernel with an arbitrary bias) does more, and says so in no name;

``flex_attention`` is not counted: even in eager mode it runs through ``torch.compile``, which finds
nothing to compile under a dispatch mode, so a statement that calls it gets no FLOPs and a note that
says why.

Where the kept share cannot be read (a mask on the meta device, a reduction that fails), the count
is dense and the :class:`AttentionCount` says so: the line then tells the user that the figure
assumes dense attention.

Forward: ``2*B*Hq*pairs*(Dqk + Dv)`` (scores and the weighted sum). Backward: ``2*B*Hq*pairs*(3*Dqk
+ 2*Dv)`` (PyTorch's convention, as the fused kernels do it: the scores recomputed, then the
gradients of the scores, of V, of Q and of K).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..edges import TorchValue

__all__ = [
    "MASKED_BELOW",
    "AttentionCount",
    "attention_count",
    "bind",
    "causal_pairs",
    "window_pairs",
]

#: An additive mask entry below this removes its pair: its weight, exp(entry - max), is 0 in every
#: float format.
MASKED_BELOW = -1e4

#: The fused attention ops whose tensors are (batch, heads, length, head dim).
_BHLD = {
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_fused_attention_overrideable",
}
#: ... and those whose tensors are (batch, length, heads, head dim), or (total length, heads, head
#: dim) when variable-length sequences are packed (``cum_seq_q``/``cu_seqlens_q``).
_BLHD = {"_flash_attention", "_efficient_attention"}


@dataclass(frozen=True)
class AttentionCount:
    """The FLOPs of one attention op and how they were counted.

    ``kept``: the share of the dense (query, key) pairs counted; ``how``: "dense", "causal",
    "window", "mask", or "dense (mask of unknown sparsity)"; ``gqa``: query heads per key head (1
    without GQA).
    """

    flops: int
    kept: float
    how: str
    gqa: int = 1

    @property
    def assumed_dense(self) -> bool:
        return self.how.startswith("dense (")


def causal_pairs(lq: int, lk: int) -> int:
    """(query, key) pairs with key index <= query index, top-left aligned: sum of min(i + 1, lk)
    over i < lq."""
    if lq <= 0 or lk <= 0:
        return 0
    if lq <= lk:
        return lq * (lq + 1) // 2
    return lk * (lk + 1) // 2 + (lq - lk) * lk


def window_pairs(lq: int, lk: int, left: int | None, right: int | None) -> int:
    """Pairs with ``i - left <= j <= i + right`` (None or a negative size: unbounded on that side),
    0 <= j < lk."""
    import numpy as np

    i = np.arange(lq, dtype=np.int64)
    lo = np.zeros(lq, dtype=np.int64) if left is None or left < 0 else np.maximum(i - left, 0)
    hi = (
        np.full(lq, lk - 1, dtype=np.int64)
        if right is None or right < 0
        else np.minimum(i + right, lk - 1)
    )
    return int(np.clip(hi - lo + 1, 0, None).sum())


def bind(
    schema: TorchValue, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> dict[str, Any]:  # Any: a torch op's tensors and scalars
    """An op's arguments by name, from its schema: positional ones in order, then keywords, then
    defaults."""
    out: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(args) and not arg.kwarg_only:
            out[arg.name] = args[i]
        elif arg.name in kwargs:
            out[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            out[arg.name] = arg.default_value
    return out


def _family(name: str) -> tuple[str, bool] | None:
    """("bhld" | "blhd", backward?) for a fused attention op's name; None for any other op."""
    backward = name.endswith("_backward")
    base = name.removesuffix("_backward")
    if base in _BHLD:
        return "bhld", backward
    if base.removesuffix("_forward") in _BLHD:
        return "blhd", backward
    return None


def _mask_share(mask: TorchValue) -> tuple[int, int] | None:
    """(entries that keep a pair, entries) of a mask; None where it cannot be read."""
    import torch

    try:
        if mask.device.type == "meta" or mask.numel() == 0:
            return None
        if mask.dtype == torch.bool:
            kept = int(mask.sum())
        elif mask.is_floating_point():
            kept = int((mask >= MASKED_BELOW).sum())
        else:
            return None
        return kept, int(mask.numel())
    except (RuntimeError, TypeError, ValueError):
        return None


def _lengths(cum: TorchValue) -> list[int] | None:  # a tensor of cumulative lengths
    try:
        bounds = [int(x) for x in cum.tolist()]
    except (RuntimeError, AttributeError, TypeError):
        return None
    return [b - a for a, b in itertools.pairwise(bounds)]


def attention_count(
    name: str, bound: Mapping[str, Any]
) -> AttentionCount | None:  # Any: the op's torch arguments
    """The FLOPs of the fused attention op ``name`` (an ATen op's name, no namespace) with arguments
    ``bound`` (by name, as :func:`bind` gives them); None for an op that is not one of them or whose
    tensors it cannot read."""
    family = _family(name)
    if family is None:
        return None
    layout, backward = family
    q, k, v = bound.get("query"), bound.get("key"), bound.get("value")
    if q is None or k is None or v is None or q.dim() < 3:
        return None
    if layout == "bhld":
        b = 1
        for size in q.shape[:-3]:
            b *= int(size)
        hq, lq, dqk = (int(x) for x in q.shape[-3:])
        hk, lk, dv = int(k.shape[-3]), int(k.shape[-2]), int(v.shape[-1])
        seqs = [(lq, lk)] * b
    else:
        hq, dqk, hk, dv = int(q.shape[-2]), int(q.shape[-1]), int(k.shape[-2]), int(v.shape[-1])
        cum_q = bound.get("cum_seq_q", bound.get("cu_seqlens_q"))
        cum_k = bound.get("cum_seq_k", bound.get("cu_seqlens_k"))
        lens_q = _lengths(cum_q) if cum_q is not None else None
        lens_k = _lengths(cum_k) if cum_k is not None else None
        if lens_q is not None and lens_k is not None and len(lens_q) == len(lens_k):
            seqs = list(zip(lens_q, lens_k))
        else:
            b = int(q.shape[0]) if q.dim() == 4 else 1
            seqs = [(int(q.shape[-3]), int(k.shape[-3]))] * b
    dense = sum(lq * lk for lq, lk in seqs)
    causal = bool(bound.get("is_causal", False)) or int(bound.get("custom_mask_type", 0) or 0) > 0
    left = bound.get("window_size_left")
    right = bound.get("window_size_right")
    if (
        bound.get("window_size") is not None
    ):  # the efficient ops' one size: a causal window of that many keys
        left, right = int(bound["window_size"]), 0
    mask = next(
        (bound[n] for n in ("attn_bias", "attn_mask", "bias") if bound.get(n) is not None), None
    )
    how, pairs = "dense", dense
    windowed = (left is not None and left >= 0) or (right is not None and right >= 0)
    if windowed:
        right = 0 if causal and (right is None or right < 0) else right
        pairs, how = sum(window_pairs(lq, lk, left, right) for lq, lk in seqs), "window"
    elif causal:
        pairs, how = sum(causal_pairs(lq, lk) for lq, lk in seqs), "causal"
    if mask is not None and hasattr(mask, "numel"):
        share = _mask_share(mask)
        if share is None:
            how = "dense (mask of unknown sparsity)" if how == "dense" else how
        else:
            kept, entries = share
            pairs, how = pairs * kept // entries, "mask" if how == "dense" else f"{how} and mask"
    per_pair = 2 * ((3 * dqk + 2 * dv) if backward else (dqk + dv))
    flops = hq * pairs * per_pair
    return AttentionCount(flops, pairs / dense if dense else 0.0, how, max(1, hq // max(hk, 1)))
