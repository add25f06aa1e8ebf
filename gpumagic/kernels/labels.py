"""Labels that tell a report's kernels apart.

A decoded ``short`` says what a kernel is, not which of its siblings it is: a profile often holds
several kernels with one short form (an elementwise ``mul`` for float and for int, a GEMM and its
split-K twin, the same template at two tile sizes). Within one report each distinct name must read
differently, so the labels of such a group carry what differs between its members: first the decoded
fields that differ (precision, tile, layout, ...), else the part of the names themselves that
differs, else a variant number.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping

from .decode import decode

__all__ = ["distinct_labels"]

#: Decoded fields that tell siblings apart, in the order they are named.
_FIELDS = (
    "precision",
    "dtypes",
    "tile",
    "stages",
    "layout",
    "epilogue",
    "alignment",
    "cluster",
    "arch",
)
_TOKEN = re.compile(
    r"[A-Za-z]+[0-9]*|\d+"
)  # words split at '_' too: execute_split_k_kernel -> split, k
_NOISE = set("<>(),:*&[]{}#")
_FILLER = {
    "c10",
    "at",
    "native",
    "std",
    "cuda",
    "detail",
    "void",
    "const",
    "unsigned",
    "anonymous",
    "namespace",
}
_MAX_DIFF = 32


def distinct_labels(
    names: Iterable[str], launches: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A readable label for each distinct name: its ``short``, with what differs added where shorts
    collide. ``launches``: name -> the API call that launched it, where a trace says (the decoder's
    ``launch`` hint)."""
    launches = launches or {}
    groups: dict[str, list[str]] = defaultdict(list)
    for name in dict.fromkeys(names):
        groups[decode(name, launches.get(name)).short or name].append(name)
    labels: dict[str, str] = {}
    for short, members in groups.items():
        if len(members) == 1:
            labels[members[0]] = short
            continue
        for name, extra in zip(members, _differences(members, launches)):
            labels[name] = f"{short} [{extra}]"
    return labels


def _differences(members: list[str], launches: Mapping[str, str]) -> list[str]:
    decoded = [decode(n, launches.get(n)) for n in members]
    differing = [f for f in _FIELDS if len({_text(getattr(d, f)) for d in decoded}) > 1]
    for n in range(1, len(differing) + 1):  # the fewest fields that tell every member apart
        extras = [
            ", ".join(_field(f, getattr(d, f)) for f in differing[:n] if getattr(d, f))
            for d in decoded
        ]
        if _unique(extras):
            return extras
    tokens = [_TOKEN.findall(d.demangled or d.name) for d in decoded]
    common = set.intersection(*(set(t) for t in tokens))
    extras = [_shorten(_own_tokens(t, common)) or "base" for t in tokens]
    if _unique(extras):
        return extras
    return [f"variant {i + 1}" for i in range(len(members))]


def _field(name: str, value: object) -> str:
    """A field as a label part: precisions by value alone ("bf16"), the rest named ("tile
    128x64")."""
    return _text(value) if name in ("precision", "dtypes") else f"{name} {_text(value)}"


def _text(value: object) -> str:
    return ", ".join(dict.fromkeys(map(str, value))) if isinstance(value, tuple) else str(value)


def _unique(extras: list[str]) -> bool:
    return all(extras) and len(set(extras)) == len(extras)


def _own_tokens(tokens: list[str], common: set[str]) -> list[str]:
    """This name's tokens that not every sibling has, once each, in order; words before bare
    numbers."""
    own = [
        t for t in dict.fromkeys(tokens) if t not in common and t not in _NOISE and t not in _FILLER
    ]
    words = [t for t in own if not t.isdigit()]
    return words or own


def _shorten(tokens: list[str]) -> str:
    text = " ".join(tokens)
    return text if len(text) <= _MAX_DIFF else text[: _MAX_DIFF - 1] + "…"
