"""A diff in sentences: what differs between the two runs' setups (said first), and the largest
changes, one each.

"cuBLAS FP32 GEMM (FFMA) 256×128×8, nn 52.9 ms → nvjet TF32 GEMM 14.1 ms: TF32 enabled" says what a
reader would otherwise work out from two rows: which kernel replaced which, both times, and why,
where the decoded names tell (precision, tensor cores, library, a compiled kernel). A change the
names cannot explain says what they do tell: the calls, or the time per call.
"""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from ..edges import JsonValue
from ..kernels import KernelName, decode
from ..kernels.labels import distinct_labels
from ..units import format_time
from .diff_match import identity
from .profile_summary import ENV_KEYS, ProfileSummary

__all__ = [
    "MEMOP_NOUN",
    "calls",
    "change_sentences",
    "environment",
    "gemm_precision",
    "row_labels",
    "sentence",
]

#: The ops whose precision a diff states when it changed.
_MATH_OPS = (
    "gemm",
    "batched_gemm",
    "grouped_gemm",
    "conv_fprop",
    "conv_dgrad",
    "conv_wgrad",
    "attention",
)
_LOW = {"bf16", "fp16", "fp8", "fp8e4m3", "fp8e5m2", "int8", "fp4e2m1"}


def t(ns: float) -> str:
    return format_time(ns * 1e-9)


def _env_value(key: str, value: JsonValue) -> str:
    if key == "cuda_driver_version" and isinstance(value, int) and value > 1000:
        return f"{value // 1000}.{value % 1000 // 10}"  # 13000 -> 13.0, as CUDA spells it
    return str(value)


def _precision_of(d: KernelName) -> str:
    if d.precision is None:
        return ""
    where = {True: " on tensor cores", False: " on CUDA cores"}.get(d.tensor_cores, "")  # type: ignore[arg-type]
    return f"{d.precision}{where}"


def gemm_precision(s: ProfileSummary) -> dict[str, float]:
    """The share of GEMM, convolution and attention kernel time per precision ("tf32 on tensor
    cores": 0.98)."""
    by: dict[str, float] = defaultdict(float)
    for name, ns in zip(s.kernels["name"], s.kernels["ns"]):
        d = decode(str(name))
        if d.op in _MATH_OPS and d.precision:
            by[_precision_of(d)] += float(ns)
    total = sum(by.values())
    return {k: v / total for k, v in sorted(by.items(), key=lambda kv: -kv[1])} if total else {}


def _mix(shares: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.0%}" for k, v in list(shares.items())[:2])


def environment(a: ProfileSummary, b: ProfileSummary, ranks: int) -> list[str]:
    """What differs between the two runs' setups: device, compute capability, driver, CUDA, torch,
    capture and nsys versions, the number of ranks, and the precision of their
    GEMM/convolution/attention time."""
    out = []
    for key, name in ENV_KEYS.items():
        va, vb = a.env.get(key), b.env.get(key)
        if va is not None and vb is not None and str(va) != str(vb):
            out.append(f"{name}: {_env_value(key, va)} \u2192 {_env_value(key, vb)}")
    na, nb = len(a.ranks), len(b.ranks)
    if na != nb:
        out.append(f"ranks: {na} \u2192 {nb} (compared rank by rank where both have one)")
    pa, pb = gemm_precision(a), gemm_precision(b)
    if pa and pb and next(iter(pa)) != next(iter(pb)):
        out.append(
            f"GEMM/conv/attention precision: {_mix(pa)} \u2192 {_mix(pb)} of their kernel time"
        )
    return out


def row_labels(rows: pd.DataFrame) -> dict[str, str]:
    """A readable label for every kernel name in the rows, distinct across both runs; two spellings
    of one kernel (torch.profiler's and nsys') share theirs."""
    k = rows[rows["kind"] == "kernel"]
    names = list(dict.fromkeys(str(n) for n in pd.concat([k["name_a"], k["name_b"]]).dropna()))
    first: dict[str, str] = {}
    for n in names:
        first.setdefault(identity(n), n)
    labels = distinct_labels(first.values())
    return {n: labels[first[identity(n)]] for n in names}


def _why(da: KernelName, db: KernelName) -> str:
    """What the two decoded names say changed, where they say it."""
    pa, pb = da.precision or "", db.precision or ""
    if pa == "fp32" and pb == "tf32":
        return "TF32 enabled"
    if pa == "tf32" and pb == "fp32":
        return "TF32 disabled"
    if pb in _LOW and pa not in _LOW and pa:
        return f"{pb.upper() if pb.startswith('fp') else pb} instead of {pa.upper()}"
    if pa and pb and pa != pb:
        return f"precision {pa} \u2192 {pb}"
    if da.tensor_cores is False and db.tensor_cores:
        return "now on tensor cores"
    if da.tensor_cores and db.tensor_cores is False:
        return "no longer on tensor cores"
    if db.family == "triton" and da.family != "triton":
        return "compiled (a Triton kernel)"
    if da.library and db.library and da.library != db.library:
        return f"{da.library} \u2192 {db.library}"
    return ""


#: How a memory-operation kind is named in a sentence.
MEMOP_NOUN = {
    "HtoD": "host-to-device copies",
    "DtoH": "device-to-host copies",
    "DtoD": "device-to-device copies",
    "HtoH": "host-to-host copies",
    "PtoP": "peer-to-peer copies",
    "memset": "memsets",
}


def calls(n: int) -> str:
    return f"{n} call{'' if n == 1 else 's'}"


def _calls(ca: int, cb: int) -> str:
    return f"{ca} \u2192 {calls(cb)}"


def _per_call(r: pd.Series) -> str:
    if not (r["calls_a"] and r["calls_b"] and r["ns_a"] and r["ns_b"]):
        return ""
    per = (r["ns_b"] / r["calls_b"]) / (r["ns_a"] / r["calls_a"])
    if abs(per - 1) < 0.02:
        return "the same time per call"
    factor = per if per > 1 else 1 / per
    text = f"{factor:,.0f}" if factor >= 100 else f"{factor:.2f}"
    return f"{text}\u00d7 {'slower' if per > 1 else 'faster'} per call"


def sentence(r: pd.Series, labels: dict[str, str]) -> str:
    """One row of the diff as a sentence."""
    if r["kind"] == "overlap":
        return f"concurrent work counted once: {t(-r['ns_a'])} \u2192 {t(-r['ns_b'])}"
    if r["kind"] == "memop":
        kind = str(r["name_b"] if pd.isna(r["name_a"]) else r["name_a"])
        noun = MEMOP_NOUN.get(kind, kind).capitalize()
        return f"{noun} {t(r['ns_a'])} \u2192 {t(r['ns_b'])} ({_calls(r['calls_a'], r['calls_b'])})"
    la = labels.get(str(r["name_a"]), str(r["name_a"]))
    lb = labels.get(str(r["name_b"]), str(r["name_b"]))
    if r["match"] == "new":
        return f"new: {lb} {t(r['ns_b'])} ({calls(r['calls_b'])})"
    if r["match"] == "vanished":
        return f"gone: {la} {t(r['ns_a'])} ({calls(r['calls_a'])})"
    why = []
    if r["match"] == "loose":
        why.append(
            _why(decode(str(r["name_a"])), decode(str(r["name_b"])))
            or "another kernel for the same work"
        )
    if r["calls_a"] != r["calls_b"]:
        why.append(_calls(r["calls_a"], r["calls_b"]))
    elif r["match"] == "same" or not why[0]:
        why.append(_per_call(r))
    reason = "; ".join(w for w in why if w)
    head = (
        f"{la} {t(r['ns_a'])} \u2192 {t(r['ns_b'])}"
        if r["match"] == "same"
        else (f"{la} {t(r['ns_a'])} \u2192 {lb} {t(r['ns_b'])}")
    )
    return f"{head}: {reason}" if reason else head


def change_sentences(rows: pd.DataFrame, multi: bool = False, top: int = 3) -> list[str]:
    """The ``top`` largest changes (by the size of the time moved), a sentence each; with several
    ranks, each says which rank."""
    if rows.empty:
        return []
    moved = rows[rows["delta_ns"] != 0]
    moved = moved.assign(_size=moved["delta_ns"].abs()).sort_values(
        "_size", ascending=False, kind="stable"
    )
    labels = row_labels(rows)
    out = []
    for _, r in moved.head(top).iterrows():
        text = sentence(r, labels)
        out.append(f"{r['rank']}: {text}" if multi and r["rank"] else text)
    return out
