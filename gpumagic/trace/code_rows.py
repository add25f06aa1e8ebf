"""The by-code tables: ``Trace.by_module()`` and ``Trace.by_line()`` as DataFrames, from the
attribution of :mod:`.by_code`.

Both sum exactly to the work's total: every piece of work is on one row, the "outside" row included
(its ``why`` says what that work was). In the module table ``fwd_ns``/``bwd_ns`` include the
module's children (a tree), ``self_fwd_ns``/``self_bwd_ns`` do not: the top-level rows' totals, or
every row's self time, plus the outside row make the total. In the line table ``fwd_ns``/``bwd_ns``
are the line's forward work and the backward of that work wherever it ran; ``launched_ns`` is what
the line's own execution launched (``loss.backward()`` launches the backward), ``launched_bwd_ns``
the backward part of it: each column sums to the total on its own.

Module names: a trace names instances (``Block_1``: the profiler numbers each class's instances in
the order it first met them). Given the live model, :func:`dotted_names` matches the trace's module
tree to ``named_children()``: under each module, the k-th instance of a class that its forward
called is the k-th child of that class (containers that are never called, such as a ModuleList,
looked through), so the rows read as the code does (``blocks.1.attn``). It costs nothing at run
time, which hooks on every module's forward would not (and a hook would change what torch.compile
traces).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..edges import TorchValue
from ..units import format_ns
from .by_code import (
    NO_LINES,
    NO_MODULES,
    OUTSIDE_LINES,
    OUTSIDE_MODULES,
    Attribution,
    attribution,
    range_names,
    top_whats,
)
from .graph_nodes import graph_note

if TYPE_CHECKING:  # named through the package: Trace's own module imports this one (lazily)
    from . import Trace

__all__ = [
    "LINE_COLUMNS",
    "MODULE_COLUMNS",
    "NO_MODULE_RAN",
    "by_line",
    "by_module",
    "dotted_names",
    "line_rows",
    "module_rows",
]

MODULE_COLUMNS = [
    "module",
    "instance",
    "depth",
    "fwd_ns",
    "bwd_ns",
    "total_ns",
    "self_fwd_ns",
    "self_bwd_ns",
    "kernels",
    "share",
    "fwd_span_ns",
    "fwd_busy_ns",
    "launch_bound",
    "why",
]
#: A module's forward is launch-bound where its kernels kept the GPU busy for less than this part
#: of their span (the rest, the GPU waited for the host to launch the next one), over at least
#: LAUNCH_BOUND_SPAN_NS.
LAUNCH_BOUND_BUSY = 0.5
LAUNCH_BOUND_SPAN_NS = 20_000
LINE_COLUMNS = [
    "line",
    "source",
    "fwd_ns",
    "bwd_ns",
    "total_ns",
    "launched_ns",
    "launched_bwd_ns",
    "kernels",
    "share",
    "why",
    "depth",
    "key",
    "parent",
    "incl_ns",
]


#: What a line that stopped marking its runs says (``capture/marks/cell_lines.py``'s ``LINE_RUNS``).
CAPPED_LINE = "ran more than 20,000 times: its later runs are on the line around it"
#: A capture that recorded modules where none ran.
NO_MODULE_RAN = (
    "No forward of a model that the namespace held when the cell started ran, so the time is "
    "split by line only (a model the cell itself creates is not marked: create it in an earlier "
    "cell)."
)
#: How a loaded trace's line rows read.
STACK_LINES = (
    "By function: a trace's Python frames name each function's first line, not the line that "
    "ran (%%gpuprofile marks each line of a cell)."
)


def by_module(trace: Trace, model: TorchValue = None, memops: bool = True) -> pd.DataFrame:
    """``Trace.by_module``: the module table of ``trace`` (:func:`module_rows`), its rows named by
    ``model`` (the live module, or name -> module: :func:`dotted_names`) where given, else by the
    names the capture found (``meta["module_names"]``), else by instance."""
    attr = attribution(trace, memops)
    if not attr.has_modules and trace.meta.get("with_modules"):
        return _graphs(_empty(MODULE_COLUMNS, NO_MODULE_RAN), attr)
    if model is not None:
        names: Mapping[str, str] | None = dotted_names(attr.module_paths, model)
    else:
        names = range_names(trace) or trace.meta.get("module_names")
    return _graphs(module_rows(attr, names), attr)


def by_line(trace: Trace, memops: bool = True) -> pd.DataFrame:
    """``Trace.by_line``: the line table of ``trace`` (:func:`line_rows`)."""
    attr = attribution(trace, memops)
    return _graphs(line_rows(attr), attr)


def _graphs(df: pd.DataFrame, attr: Attribution) -> pd.DataFrame:
    """``df`` with ``attrs["graphs"]``: what it could not say of CUDA graph replays' kernels."""
    note = graph_note(attr.graphs) if attr.graphs is not None else ""
    if note:
        df.attrs["graphs"] = note
    return df


def _empty(columns: list[str], note: str) -> pd.DataFrame:
    df = pd.DataFrame({c: [] for c in columns})
    df.attrs["note"] = note
    return df


def _share(ns: int, total: int) -> float:
    return ns / total if total else 0.0


def module_rows(attr: Attribution, names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per module (tree order: each module before its children, children in the order
    they first ran), then the outside row. ``names``: instance path -> the name to show
    (:func:`dotted_names`); the instance path where it has none. A trace without module frames
    gives no rows and says why in ``attrs["note"]``."""
    if not attr.has_modules:
        return _empty(MODULE_COLUMNS, NO_MODULES)
    items, total = attr.items, attr.total_ns
    names = names or {}
    fwd: dict[str, int] = defaultdict(int)
    bwd: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    held = items[items["module"].notna()]
    own = held.groupby(["module", "backward"])["dur"].agg(["sum", "count"])
    self_fwd: dict[str, int] = defaultdict(int)
    self_bwd: dict[str, int] = defaultdict(int)
    for (path, backward), row in own.iterrows():
        (self_bwd if backward else self_fwd)[path] += int(row["sum"])
        parts = path.split(".")
        for i in range(1, len(parts) + 1):
            p = ".".join(parts[:i])
            (bwd if backward else fwd)[p] += int(row["sum"])
            count[p] += int(row["count"])
    rows = []
    for path in _tree_order(attr.module_paths):
        rows.append(
            {
                "module": names.get(path, path),
                "instance": path,
                "depth": path.count("."),
                "fwd_ns": fwd[path],
                "bwd_ns": bwd[path],
                "total_ns": fwd[path] + bwd[path],
                "self_fwd_ns": self_fwd[path],
                "self_bwd_ns": self_bwd[path],
                "kernels": count[path],
                "share": _share(fwd[path] + bwd[path], total),
                **_launch_bound(attr.forward_spans.get(path, (0, 0))),
            }
        )
    out = items[items["module"].isna()]
    rows.append(_outside(OUTSIDE_MODULES, out, total, {"instance": "", "depth": 0}, "self_"))
    return pd.DataFrame(rows, columns=MODULE_COLUMNS)


def _outside(
    label: str, out: pd.DataFrame, total: int, extra: dict[str, Any], self_prefix: str
) -> dict[str, Any]:
    f = int(out.loc[~out["backward"], "dur"].sum())
    b = int(out.loc[out["backward"], "dur"].sum())
    row = {
        "fwd_ns": f,
        "bwd_ns": b,
        "total_ns": f + b,
        "kernels": len(out),
        "share": _share(f + b, total),
        "why": top_whats(out),
        "fwd_span_ns": 0,
        "fwd_busy_ns": 0,
        "launch_bound": False,
        **extra,
    }
    if self_prefix:
        row |= {"module": label, "self_fwd_ns": f, "self_bwd_ns": b}
    else:
        row |= {"line": pd.NA, "source": label}
    return row


def _launch_bound(span_busy: tuple[int, int]) -> dict[str, Any]:
    """The launch-bound columns of a module row, and the words that say it in ``why``."""
    span, busy = span_busy
    bound = span >= LAUNCH_BOUND_SPAN_NS and busy < LAUNCH_BOUND_BUSY * span
    why = (
        f"launch-bound: its forward kept the GPU busy {format_ns(busy)} of {format_ns(span)} "
        f"({busy / span:.0%}); the GPU waited on the host between its kernels"
        if bound
        else ""
    )
    return {"fwd_span_ns": span, "fwd_busy_ns": busy, "launch_bound": bound, "why": why}


def _tree_order(paths: list[str]) -> list[str]:
    """Each path before its children, siblings in ``paths``' order (first run first)."""
    rank = {p: i for i, p in enumerate(paths)}
    children: dict[str, list[str]] = defaultdict(list)
    for p in paths:
        children[p.rsplit(".", 1)[0] if "." in p else ""].append(p)
    out: list[str] = []

    def walk(p: str) -> None:
        for c in sorted(children.get(p, []), key=rank.__getitem__):
            out.append(c)
            walk(c)

    walk("")
    return out


def line_rows(attr: Attribution) -> pd.DataFrame:
    """One row per line of the cell (in order; lines that ran and launched nothing show 0), or per
    function of the user's files in a loaded trace (largest first), then the outside row. A trace
    with neither cell-line ranges nor Python stacks gives no rows and says why in
    ``attrs["note"]``."""
    if not attr.lines:
        return _empty(LINE_COLUMNS, NO_LINES)
    items, total = attr.items, attr.total_ns
    keys = list(dict.fromkeys(attr.line_text))
    got = items[items["line"].notna()].groupby(["line", "backward"])["dur"].agg(["sum", "count"])
    launched = items[items["launch_line"].notna()].groupby(["launch_line", "backward"])["dur"].sum()
    rows, cell = [], attr.lines == "cell"
    for key in keys:
        f = int(got["sum"].get((key, False), 0))
        b = int(got["sum"].get((key, True), 0))
        lf = int(launched.get((key, False), 0))
        lb = int(launched.get((key, True), 0))
        n = int(got["count"].get((key, False), 0) + got["count"].get((key, True), 0))
        rows.append(
            {
                "line": attr.line_numbers.get(key, key)
                if attr.lines == "cell"
                else _first_line(key),
                "source": attr.line_text[key],
                "fwd_ns": f,
                "bwd_ns": b,
                "total_ns": f + b,
                "launched_ns": lf + lb,
                "launched_bwd_ns": lb,
                "kernels": n,
                "share": _share(f + b, total),
                "why": CAPPED_LINE if key in attr.capped else "",
                "depth": _depth(key, attr.line_parents),
                "key": key if cell else None,
                "parent": attr.line_parents.get(key),
            }
        )
    _inclusive(rows, keys, attr.line_parents)
    df = pd.DataFrame(rows, columns=LINE_COLUMNS)
    if not cell:  # the functions that ran GPU work, largest first: the frames around them add
        # nothing (a cell's rows stay in the tree's order, line_text's)
        df = df[(df["total_ns"] > 0) | (df["launched_ns"] > 0)]
        df = df.sort_values("total_ns", ascending=False, kind="stable")
    out = items[items["line"].isna()]
    row = _outside(OUTSIDE_LINES, out, total, {"depth": 0, "key": None, "parent": None}, "")
    row["incl_ns"] = row["total_ns"]
    not_launched = items[items["launch_line"].isna()]
    row["launched_ns"] = int(not_launched["dur"].sum())
    row["launched_bwd_ns"] = int(not_launched.loc[not_launched["backward"], "dur"].sum())
    df = pd.concat([df, pd.DataFrame([row], columns=LINE_COLUMNS)], ignore_index=True)
    for column in ("line", "key", "parent"):
        df[column] = df[column].astype("Int64")
    if attr.lines == "stack":
        df.attrs["note"] = STACK_LINES
    return df


def _depth(key: int | str | None, parents: Mapping[Any, Any]) -> int:
    """How many lines enclose ``key`` (0 at the top level)."""
    depth, seen = 0, {key}
    while (key := parents.get(key)) is not None and key not in seen:
        seen.add(key)
        depth += 1
    return depth


def _inclusive(rows: list[dict[str, Any]], keys: list[Any], parents: Mapping[Any, Any]) -> None:
    """Each row's ``incl_ns`` (``rows[i]`` is line ``keys[i]``): its own work and that of every
    line inside it (a loop's line sums its body), so the top-level rows' ``incl_ns`` and the
    outside row make the total."""
    incl = {key: r["total_ns"] for key, r in zip(keys, rows)}
    for key, r in zip(keys, rows):
        seen = {key}
        up = parents.get(key)
        while up is not None and up not in seen and up in incl:
            seen.add(up)
            incl[up] += r["total_ns"]
            up = parents.get(up)
    for key, r in zip(keys, rows):
        r["incl_ns"] = incl[key]


def _first_line(key: str) -> int:
    """The function's first line of a frame key ``file.py(LINE): func``."""
    return int(key.rsplit("(", 1)[1].split(")", 1)[0])


def dotted_names(paths: list[str], roots: Mapping[str, Any] | Any) -> dict[str, str]:
    """Instance path -> dotted name (``"GPT_0.Block_1.Attention_1"`` -> ``"blocks.1.attn"``), for
    the module ``paths`` of a trace (:func:`~gpumagic.trace.by_code.module_paths`), from the live
    modules (``roots``: one module, or name -> module). A top-level module is named by its key in
    ``roots`` (its instance name where it has none); where one top-level module matched, its
    children are named as under it (``blocks.1.attn``), where several did, with their key first
    (``model.blocks.1.attn``). A top-level module matches the first root of its class not matched
    yet. Paths that match nothing keep their instance name."""
    if not isinstance(roots, Mapping):
        roots = {"": roots}
    children: dict[str, list[str]] = defaultdict(list)
    for p in paths:
        children[p.rsplit(".", 1)[0] if "." in p else ""].append(p)
    found: dict[str, tuple[str, dict[str, str]]] = {}
    used: set[int] = set()
    for path in children[""]:
        for key, mod in roots.items():
            if type(mod).__name__ == _class(path) and id(mod) not in used:
                used.add(id(mod))
                below: dict[str, str] = {}
                _match(path, mod, "", children, below)
                found[path] = (key, below)
                break
    out: dict[str, str] = {}
    for path, (key, below) in found.items():
        out[path] = key or path
        prefix = f"{key}." if key and len(found) > 1 else ""
        out |= {p: prefix + name for p, name in below.items()}
    return out


def _match(
    path: str, mod: TorchValue, dotted: str, children: dict[str, list[str]], out: dict[str, str]
) -> None:
    """Name the instance paths under ``path`` (the live ``mod``, named ``dotted``) in ``out``."""
    kids = children.get(path, [])
    classes = {_class(k) for k in kids}
    found: dict[str, list[tuple[str, Any]]] = defaultdict(list)

    def look(m: TorchValue, prefix: str) -> None:
        for name, child in m.named_children():
            full = f"{prefix}{name}"
            if type(child).__name__ in classes:
                found[type(child).__name__].append((full, child))
            else:  # a container never called (a ModuleList): looked through
                look(child, full + ".")

    look(mod, f"{dotted}." if dotted else "")
    taken: dict[str, int] = defaultdict(int)
    for k in kids:
        cls = _class(k)
        if taken[cls] < len(found[cls]):
            name, child = found[cls][taken[cls]]
            taken[cls] += 1
            out[k] = name
            _match(k, child, name, children, out)


def _class(path: str) -> str:
    """The class of an instance path's last module ("GPT_0.Block_1" -> "Block")."""
    return path.rsplit(".", 1)[-1].rsplit("_", 1)[0]
