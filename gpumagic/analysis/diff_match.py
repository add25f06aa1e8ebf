"""Which kernel of run B is which kernel of run A: matching by what a kernel is, not only by its
name.

A run that turns TF32 on, upgrades cuBLAS or compiles a model launches kernels with other names for
the same work: matched by name alone, the diff would read "a 52.9 ms GEMM vanished, a 14.1 ms GEMM
appeared". Here, within one rank, kernels are matched in stages, each tried only on what the stages
before left unmatched:

1. the same kernel: the name in one spelling (torch.profiler and nsys spell template arguments
   differently);
2. the same launching op with the same input shapes (torch.profiler records them): the work is the
   same;
3. the same kind of kernel with other template parameters (family, op, precision and the words of
   its label equal: another tile, another vector width);
4. the same op (gemm, attention, ...) launched by the same torch op;
5. the same heavy op (GEMM, convolution, attention), in the order the kernels first ran.

Where a stage finds several candidates on both sides, they are paired in the order they first ran.
Stages 2-5 are "loose": the row says how it was matched. What is left is new (in B only) or vanished
(in A only).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

import pandas as pd

from ..kernels import KernelName, decode, normalize

__all__ = ["HEAVY_OPS", "MATCH_COLUMNS", "PAIR_COLUMNS", "identity", "kind_words", "match_kernels"]

#: What a matched row holds of each side: the kernel's name, calls and GPU time in A and in B.
PAIR_COLUMNS = ["name_a", "name_b", "calls_a", "calls_b", "ns_a", "ns_b"]
#: How the row was matched ("same", "loose", "new", "vanished"; a loose match's stage), the
#: launching op and its shapes, and the kernel's place among its rank's kernels by first launch.
MATCH_COLUMNS = ["match", "how", "op", "shapes", "first"]

#: Ops whose kernel a library picks at run time (by shape, precision, heuristics): matched by op in
#: stage 5.
HEAVY_OPS = frozenset(
    {"gemm", "conv_fprop", "conv_dgrad", "conv_wgrad", "attention", "batched_gemm", "grouped_gemm"}
)
_ARGS = re.compile(r"\)\s*$")
_SPACE = re.compile(r"\s+")
_GEOMETRY = re.compile(r"^[\d×x.]+$|^(?:nn|nt|tn|tt)$", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][\w.]*|\d[\w×.]*")
#: Spellings that differ between torch.profiler (the demangler's) and nsys for the same symbol, made
#: one.
_SPELLINGS = (
    (re.compile(r"\{lambda\(([^(){}]*)\)#(\d+)\}"), r"lambda(\1)#\2"),
    (re.compile(r"\[lambda\(([^()\[\]]*)\)\(instance(\d+)\)\]"), r"lambda(\1)#\2"),
    (re.compile(r"<unnamed>"), "(anonymousnamespace)"),
    (re.compile(r"(?<=[<,])0(?=[,>])"), "false"),
    (re.compile(r"(?<=[<,])1(?=[,>])"), "true"),
)


@lru_cache(maxsize=65536)
def identity(name: str) -> str:
    """A kernel's name in one spelling: normalised, its argument list dropped (torch.profiler writes
    the argument types out, nsys writes ``T2, T3``), spaces removed."""
    text = normalize(str(name))
    if _ARGS.search(text):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            c = text[i]
            depth += c == ")"
            depth -= c == "("
            if depth == 0:
                head = text[:i]
                if head.rstrip().endswith(">") or re.search(r"[\w>]$", head.rstrip()):
                    text = head
                break
    text = _SPACE.sub("", text)
    for pattern, spelled in _SPELLINGS:
        text = pattern.sub(spelled, text)
    return text


@lru_cache(maxsize=65536)
def kind_words(name: str) -> tuple[str, ...]:
    """What kind of kernel it is, without its template parameters: family, op, precision,
    tensor-core use and the words of its label less tile sizes, layouts and numbers."""
    d = decode(str(name))
    words = tuple(
        w for w in _WORD.findall(d.short or "") if not _GEOMETRY.match(w) and not w[0].isdigit()
    )
    return (d.family, d.op, str(d.precision), str(d.tensor_cores), *words)


def _decoded(name: str) -> KernelName:
    return decode(str(name))


#: (how the row was matched, the key a row gives in that stage, or None where the stage does not
#: apply to it)
Stage = tuple[str, Callable[[pd.Series], object]]


def _stages() -> list[Stage]:
    def same_launch(r: pd.Series) -> object:
        return (r["op"], r["shapes"], _decoded(r["name"]).op) if r["op"] and r["shapes"] else None

    def same_kind(r: pd.Series) -> object:
        d = _decoded(r["name"])
        return kind_words(r["name"]) if d.family != "other" or d.op else None

    def same_op_and_launch(r: pd.Series) -> object:
        d = _decoded(r["name"])
        return (d.op, r["op"]) if d.op and r["op"] else None

    def heavy(r: pd.Series) -> object:
        op = _decoded(r["name"]).op
        return op if op in HEAVY_OPS else None

    return [
        ("same launching op and input shapes", same_launch),
        ("same kind of kernel, other template parameters", same_kind),
        ("same op, launched by the same torch op", same_op_and_launch),
        ("same kind of work, in launch order", heavy),
    ]


def _grouped(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel identity: calls and time summed, the first launch, the name and launching
    op of the spelling that took the most time."""
    if rows.empty:
        return rows.assign(key=pd.Series(dtype=object))
    rows = rows.assign(key=rows["name"].map(identity)).sort_values(
        "ns", ascending=False, kind="stable"
    )
    g = rows.groupby("key", sort=False)
    out = g.agg(
        name=("name", "first"), calls=("calls", "sum"), ns=("ns", "sum"), first=("first", "min")
    )
    out = out.join(g[["op", "shapes"]].first())
    return out.reset_index()


def match_kernels(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The kernels of one rank of A and of B (``ProfileSummary.kernels`` rows), matched: one row per
    pair, new and vanished kernel, with ``name_a``, ``name_b`` (None where absent), ``calls_a``,
    ``calls_b``, ``ns_a``, ``ns_b``, ``match`` ("same", "loose", "new", "vanished"), ``how`` (the
    stage, for a loose match), ``op`` and ``shapes`` (the launching op where known), ``first`` (the
    place it first ran, in B where it ran there)."""
    ga, gb = _grouped(a), _grouped(b)
    rows: list[dict[str, object]] = []
    both = ga.merge(gb, on="key", suffixes=("_a", "_b"))
    for _, r in both.iterrows():
        rows.append(_row(r, r, "same", ""))
    left = ga[~ga["key"].isin(both["key"])].sort_values("first", kind="stable")
    right = gb[~gb["key"].isin(both["key"])].sort_values("first", kind="stable")
    for how, key_of in _stages():
        if left.empty or right.empty:
            break
        ka, kb = left.apply(key_of, axis=1), right.apply(key_of, axis=1)
        used_a, used_b = [], []
        for key in dict.fromkeys(k for k in ka if k is not None):
            ia = [i for i in ka.index if ka[i] == key]
            ib = [i for i in kb.index if kb[i] == key]
            for i, j in zip(ia, ib):
                rows.append(_row(left.loc[i], right.loc[j], "loose", how, pair=True))
                used_a.append(i)
                used_b.append(j)
        left, right = left.drop(index=used_a), right.drop(index=used_b)
    for _, r in left.iterrows():
        rows.append(_one(r, "a"))
    for _, r in right.iterrows():
        rows.append(_one(r, "b"))
    return pd.DataFrame(rows, columns=[*PAIR_COLUMNS, *MATCH_COLUMNS])


def _row(
    ra: pd.Series, rb: pd.Series, match: str, how: str, pair: bool = False
) -> dict[str, object]:
    get_a = (lambda c: ra[c]) if pair else (lambda c: ra[f"{c}_a"])
    get_b = (lambda c: rb[c]) if pair else (lambda c: rb[f"{c}_b"])
    return {
        "name_a": get_a("name"),
        "name_b": get_b("name"),
        "calls_a": int(get_a("calls")),
        "calls_b": int(get_b("calls")),
        "ns_a": int(get_a("ns")),
        "ns_b": int(get_b("ns")),
        "match": match,
        "how": how,
        "op": get_b("op") or get_a("op"),
        "shapes": get_b("shapes") or get_a("shapes"),
        "first": int(get_b("first")),
    }


def _one(r: pd.Series, side: str) -> dict[str, object]:
    there = side == "a"
    return {
        "name_a": r["name"] if there else None,
        "name_b": None if there else r["name"],
        "calls_a": int(r["calls"]) if there else 0,
        "calls_b": 0 if there else int(r["calls"]),
        "ns_a": int(r["ns"]) if there else 0,
        "ns_b": 0 if there else int(r["ns"]),
        "match": "vanished" if there else "new",
        "how": "",
        "op": r["op"],
        "shapes": r["shapes"],
        "first": int(r["first"]),
    }
