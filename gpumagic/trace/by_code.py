"""Where the GPU time goes in the user's own code: every kernel and memory operation of a Trace put
on one module and one line, forward or backward (``Trace.by_module()``, ``Trace.by_line()``).

The chain, for each piece of GPU work:
- the CUDA call that launched it, by correlation id, and the innermost torch op around that call on
  its thread (:func:`gpumagic.trace.summaries.launching_op_rows`);
- forward or backward: work launched inside an op autograd runs for a backward node
  (``autograd::engine::evaluate_function: ...``, a "Sequence number" and a "Fwd thread id" above 0)
  is backward. Its forward op is the op that recorded the same sequence number going forward, and
  the backward work is put where that forward op ran: on its module and its line. So a layer's row
  holds its forward and its backward, and ``loss.backward()`` is not one line that costs everything;
- the module: the innermost ``nn.Module`` forward (a Python frame, recorded ``with_modules``) around
  the launch, or around the forward op for backward work;
- the line: the innermost ``gpumagic line N`` range around the launch (the ranges ``%%gpuprofile``
  pushes around each statement of a cell), else the innermost Python frame of the user's own files
  (recorded ``with_stack``; such a frame names its function's first line, so a loaded trace is told
  by function). Backward work is launched on autograd's own thread, where no line range is open: it
  goes to the line the cell's thread was running then (``loss.backward()``), and its forward work's
  line gets it as ``bwd_ns``.

Nothing is dropped: work no module or line holds is the "outside" row, which says what it was (the
optimizer's step, the loss, gradients accumulated, work before the first module). Each table's
rows sum exactly to the work's total. A capture on the CPU (no GPU) attributes its torch ops' CPU
time the same way, so a cell's view can be read (and tested) without a GPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..units import format_ns
from .code_frames import (
    LINE_RANGE,
    MODULE_PREFIX,
    MODULE_RANGE,
    Nest,
    code_tables,
    is_library_file,
    line_ranges,
    parse_frame,
)
from .graph_nodes import GraphOrigins, graph_origins
from .intervals import union_ns
from .line_tree import LineTree, line_tree, tree_order
from .summaries import launching_op_rows

if TYPE_CHECKING:  # named through the package: Trace's own module imports this one (lazily)
    from . import Trace

__all__ = [
    "NO_LINES",
    "NO_MODULES",
    "Attribution",
    "attribution",
    "module_frames",
    "module_paths",
    "range_names",
    "top_whats",
]

#: What a trace without module frames needs, said instead of a made-up split.
NO_MODULES = (
    "This trace has no module information, so its time is not split by module: record it with "
    "torch.profiler.profile(with_modules=True, with_stack=True) (%%gpuprofile records both)."
)
#: What a trace without Python frames or cell-line ranges needs.
NO_LINES = (
    "This trace has no Python stacks, so its time is not split by line: record it with "
    "torch.profiler.profile(with_stack=True) (%%gpuprofile marks each line of the cell)."
)
OUTSIDE_MODULES = "(outside every module)"
#: The autograd engine's op around each backward node it runs.
ENGINE = "autograd::engine::evaluate_function: "
OUTSIDE_LINES = "(outside the cell's lines)"


@dataclass
class Attribution:
    """One row per piece of work (``items``): ``start`` and ``dur`` (ns), ``backward``, ``module``
    (the path of instance names, "GPT_0.Block_1.Attention_1"; None outside every module),
    ``frame`` (the module frame: the forward call it ran in, or whose backward it is; -1),
    ``line`` (the line of the forward work, or the launching line for forward work),
    ``launch_line`` (the line whose execution launched it), ``what`` (its forward op or range,
    for the outside rows); and
    what the trace holds: ``unit`` ("GPU" or "CPU"), ``has_modules``, ``lines`` ("cell",
    "stack" or "")."""

    items: pd.DataFrame
    unit: str
    has_modules: bool
    lines: str
    #: line key -> its text (the cell's source, or "file(LINE): func" of a frame).
    line_text: dict[Any, str]
    #: Every module path, in the order their forwards first started.
    module_paths: list[str]
    #: Module path -> (span, busy) of its forward calls' GPU work, summed over the calls: each
    #: call's span from its first kernel's start to its last one's end, and the time its kernels
    #: kept the GPU busy in it. Where busy is a small part of the span, the GPU waited on the host
    #: between the module's kernels: launch-bound.
    forward_spans: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Cell line -> the line whose range held it (a loop's, a ``with``'s), None at the top level.
    line_parents: dict[Any, Any] = field(default_factory=dict)
    #: Cell lines that stopped pushing ranges after many runs (their later runs: the parent's).
    capped: set[Any] = field(default_factory=set)
    #: Line key -> the line's number in its own file (a function's call: its first line).
    line_numbers: dict[Any, int] = field(default_factory=dict)
    #: What the CUDA graph replays held, and how many of their kernels were traced back to the
    #: launches that captured their nodes (``graph_nodes``); None for CPU work.
    graphs: GraphOrigins | None = None

    @property
    def total_ns(self) -> int:
        return int(self.items["dur"].sum())


def attribution(trace: Trace, memops: bool = True) -> Attribution:
    """The attribution of ``trace``'s GPU work (kernels, and memory operations with ``memops``); of
    its torch ops' CPU time where it recorded no GPU work (a capture on the CPU). Kept per Trace."""
    found: Attribution = trace.memo(
        f"by_code.attribution.{memops}", lambda: _attribute(trace, memops)
    )
    return found


def _work(trace: Trace, memops: bool) -> tuple[pd.DataFrame, str]:
    """The pieces of work: dur, thread and time of the launch, the launching op's row; and the
    unit. GPU work where the trace recorded kernels; else the outermost torch ops (CPU time)."""
    ops, api = trace.ops, trace.api
    if trace.recorded("kernels") or not trace.kernels.empty:
        tables = [trace.kernels] + ([trace.memops] if memops and not trace.memops.empty else [])
        gpu = pd.concat(
            [
                t[["name", "start", "end", "correlation"]].assign(
                    stream=t.get("stream"), kernel=k == 0
                )
                for k, t in enumerate(tables)
            ],
            ignore_index=True,
        )
        launch = (
            api.dropna(subset=["correlation"])
            .drop_duplicates("correlation")
            .set_index("correlation")
            if not api.empty
            else pd.DataFrame(columns=["start", "thread"])
        )
        found = gpu["correlation"].map(launch["start"]) if len(launch) else None
        return (
            pd.DataFrame(
                {
                    "name": gpu["name"].astype(str),
                    "start": gpu["start"].astype("int64"),
                    "dur": (gpu["end"] - gpu["start"]).astype("int64"),
                    "at": found if found is not None else np.nan,
                    "thread": gpu["correlation"].map(launch["thread"]) if len(launch) else None,
                    "op": launching_op_rows(ops, gpu, api),
                    "correlation": gpu["correlation"],
                    "stream": gpu["stream"],
                    "kernel": gpu["kernel"],
                }
            ),
            "GPU",
        )
    top = ops[ops["depth"] == 0] if not ops.empty else ops
    return (
        pd.DataFrame(
            {
                "name": top["name"].astype(str).to_numpy(),
                "start": top["start"].astype("int64").to_numpy(),
                "dur": (top["end"] - top["start"]).astype("int64").to_numpy(),
                "at": top["start"].to_numpy(),
                "thread": top["thread"].to_numpy(),
                "op": np.flatnonzero((ops["depth"] == 0).to_numpy()) if not ops.empty else [],
            }
        ),
        "CPU",
    )


def _attribute(trace: Trace, memops: bool) -> Attribution:
    """The module's chain (see its docstring) on every piece of work: its launch, forward or
    backward and the place it counts from, then its module and its line."""
    work, unit = _work(trace, memops)
    launched_at = work["at"].to_numpy(dtype=np.float64)
    launched_by = work["thread"].tolist()
    # a graph replay's kernel: where the capture launched its node, where the trace holds it
    graphs = graph_origins(trace, work) if unit == "GPU" else None
    at, threads = launched_at, launched_by
    if graphs is not None and graphs.traced:
        traced = ~np.isnan(graphs.at)
        at = np.where(traced, graphs.at, launched_at)
        threads = [g if t else w for g, t, w in zip(graphs.thread, traced, launched_by)]
    origin = _origins(trace, threads, at)
    mods, mod_nest, paths = module_frames(trace)
    held = mod_nest.innermost(origin.thread, origin.at)
    lines = _lines(trace)
    items = pd.DataFrame(
        {
            "name": work["name"],
            "start": work["start"].astype("int64"),
            "dur": work["dur"].astype("int64"),
            "backward": origin.backward,
            "seq": origin.seq,
            "module": [paths[i] if i >= 0 else None for i in held.tolist()],
            "frame": held,
            "line": lines.of(origin.thread, origin.at) if lines.kind else None,
            "launch_line": lines.of(launched_by, launched_at.tolist()) if lines.kind else None,
            "what": _what(trace, work, origin.backward, origin.seq, origin.forward_names),
        }
    )
    spans = _forward_spans(items, mod_nest, paths)
    attr = Attribution(
        items, unit, bool(len(mods)), lines.kind, lines.text, module_paths(trace), spans
    )
    attr.graphs = graphs
    if lines.tree is not None:
        attr.line_parents = lines.tree.parents
        attr.line_numbers = lines.tree.number
        attr.capped = lines.tree.capped
    return attr


@dataclass
class _Origin:
    """Per piece of work: whether it is backward, the sequence number of its backward node (-1:
    none), and the thread and time it counts from (a backward piece's: its forward op's; None and
    NaN where that op was not recorded). ``forward_names``: sequence number -> forward op name."""

    backward: np.ndarray
    seq: np.ndarray
    thread: list[Any]
    at: list[float]
    forward_names: dict[int, str]


def _origins(trace: Trace, threads: list[Any], at: np.ndarray) -> _Origin:
    """Forward or backward for work launched on ``threads`` at ``at``: backward inside an op
    autograd ran for a backward node (its forward op by sequence number), or inside the engine's
    other work (AccumulateGrad: gradients summed into .grad, of no forward op)."""
    _, auto = code_tables(trace)
    bwd = auto[auto["fwd_thread"] > 0].reset_index(drop=True)
    fwd = auto[auto["fwd_thread"] <= 0].sort_values("start").drop_duplicates("seq")
    inside = Nest(bwd["start"], bwd["end"], bwd["thread"]).innermost(threads, at)
    seq = np.append(bwd["seq"].to_numpy(dtype=np.int64), -1)[inside]  # -1 picks the -1
    fwd_at = dict(zip(fwd["seq"], zip(fwd["thread"], fwd["start"])))
    ops = trace.ops
    engine = ops[ops["name"].astype(str).str.startswith(ENGINE)] if len(ops) else ops
    in_engine = Nest(engine["start"], engine["end"], engine["thread"]).innermost(threads, at)
    backward = (inside >= 0) | (in_engine >= 0)
    origin = [
        fwd_at.get(s, (None, np.nan)) if b else (t, a)
        for b, s, t, a in zip(backward.tolist(), seq.tolist(), threads, at.tolist())
    ]
    return _Origin(
        backward=backward,
        seq=seq,
        thread=[o[0] for o in origin],
        at=[o[1] for o in origin],
        forward_names=dict(zip(fwd["seq"], fwd["name"])),
    )


@dataclass
class _Lines:
    """How work is put on lines: ``kind`` ("cell": the cell's line ranges; "stack": the user's own
    frames; "": neither), the intervals (``nest``) and each one's line ``keys``, each key's
    ``text``, and the cell's line tree where the ranges make one."""

    kind: str
    nest: Nest
    keys: list[Any]
    text: dict[Any, str]
    tree: LineTree | None = None

    def of(self, thread: list[Any], when: list[float]) -> list[Any]:
        """The line of work running on ``thread`` at ``when``; work on another thread (autograd's)
        goes to the line the main thread was running then."""
        found = self.nest.innermost(thread, when)
        main = self.nest.threads()[:1]
        if main:
            lost = np.flatnonzero(found < 0)
            if len(lost):
                found[lost] = self.nest.innermost(main * len(lost), [when[i] for i in lost])
        return [self.keys[i] if i >= 0 else None for i in found.tolist()]


def _lines(trace: Trace) -> _Lines:
    """The cell's line ranges where the capture pushed them, else the user's own Python frames."""
    ranges = line_ranges(trace)
    if len(ranges):
        nest = Nest(ranges["start"], ranges["end"], ranges["thread"])
        code = trace.meta.get("code") or {}
        tree = line_tree(
            ranges,
            nest,
            str(trace.meta.get("cell_source") or ""),
            code.get("functions") or (),
            code.get("capped") or (),
            code.get("cells"),
        )
        text = {k: tree.text[k] for k in tree_order(list(dict.fromkeys(tree.keys)), tree)}
        return _Lines("cell", nest, tree.keys, text, tree)
    frames, _ = code_tables(trace)
    mine = {}  # each distinct frame name: is it a function of the user's own files
    for name in pd.unique(frames["name"]):
        p = parse_frame(name)
        mine[name] = p is not None and not is_library_file(p[0])
    user_frames = frames[frames["name"].map(mine).to_numpy(dtype=bool)].reset_index(drop=True)
    keys = user_frames["name"].tolist()  # "file.py(LINE): func"
    nest = Nest(user_frames["start"], user_frames["end"], user_frames["thread"])
    return _Lines("stack" if len(user_frames) else "", nest, keys, {k: k for k in keys})


def _forward_spans(items: pd.DataFrame, nest: Nest, paths: list[str]) -> dict[str, tuple[int, int]]:
    """Per module path, (span, busy) of its forward calls' work (``Attribution.forward_spans``)."""
    fwd = items[~items["backward"].to_numpy() & (items["frame"].to_numpy() >= 0)]
    calls: dict[int, list[tuple[int, int]]] = {}
    for s, d, f in zip(fwd["start"].tolist(), fwd["dur"].tolist(), fwd["frame"].tolist()):
        for a in nest.ancestors(int(f)):
            calls.setdefault(a, []).append((s, s + d))
    out: dict[str, tuple[int, int]] = {}
    for f, work in calls.items():
        starts = np.array([w[0] for w in work], dtype=np.int64)
        ends = np.array([w[1] for w in work], dtype=np.int64)
        span, busy = out.get(paths[f], (0, 0))
        out[paths[f]] = (span + int(ends.max() - starts.min()), busy + union_ns(starts, ends))
    return out


def module_frames(trace: Trace) -> tuple[pd.DataFrame, Nest, list[str]]:
    """The trace's module forwards (frames), their nesting, and each one's path of instance names
    ("GPT_0.Block_1"). Kept per Trace."""

    def compute() -> tuple[pd.DataFrame, Nest, list[str]]:
        marked = (trace.meta.get("code") or {}).get("modules")
        nvtx = trace.nvtx
        in_nvtx = nvtx["text"].astype(str).str.match(MODULE_RANGE.pattern) if len(nvtx) else None
        if not marked and in_nvtx is not None and in_nvtx.any():  # a written capture, read back
            marked = nvtx.loc[in_nvtx, ["text", "start", "end", "thread"]].to_dict("list")
        if marked:  # the ranges %%gpuprofile opened around the forwards
            mods = pd.DataFrame(marked)
            tokens = [_range_match(t)[1] for t in mods["text"]]
        else:  # the Python tracer's frames
            frames, _ = code_tables(trace)
            mods = frames[frames["name"].str.startswith(MODULE_PREFIX)].reset_index(drop=True)
            tokens = [n[len(MODULE_PREFIX) :] for n in mods["name"]]
        nest = Nest(mods["start"], mods["end"], mods["thread"])
        return mods, nest, _paths(nest, tokens)

    found: tuple[pd.DataFrame, Nest, list[str]] = trace.memo("by_code.module_frames", compute)
    return found


def range_names(trace: Trace) -> dict[str, str]:
    """Module path -> the dotted name its range gave (a capture's module ranges); {} otherwise."""
    mods, _, paths = module_frames(trace)
    if "text" not in mods:
        return {}
    return {p: _range_match(t)[2] for p, t in zip(paths, mods["text"])}


def _range_match(text: str) -> re.Match[str]:
    """A module range's name taken apart (the caller picked ranges that match)."""
    found = MODULE_RANGE.match(text)
    assert found is not None, text
    return found


def module_paths(trace: Trace) -> list[str]:
    """Every module path of the trace, in the order their forwards first started."""
    mods, _, paths = module_frames(trace)
    first = pd.Series(mods["start"].to_numpy(), index=paths).groupby(level=0).min()
    return list(first.sort_values(kind="stable").index)


def _paths(nest: Nest, names: list[str]) -> list[str]:
    """Each module frame's path of instance names, outermost first ("GPT_0.Block_1")."""
    return [".".join(names[j] for j in reversed(nest.ancestors(i))) for i in range(len(names))]


def _what(
    trace: Trace,
    work: pd.DataFrame,
    backward: np.ndarray,
    seq: np.ndarray,
    fwd_name: dict[Any, Any],
) -> list[str]:
    """What each piece of work was, as the outside rows say it: the torch range around it (the
    optimizer's ``Optimizer.step#AdamW.step``; not a range around a module's forward, such as the
    cell's own, too coarse to say anything), else its forward op for backward work ("backward of
    aten::nll_loss"), else the outermost op that launched it."""
    ops, nvtx = trace.ops, trace.nvtx
    named = nvtx[~nvtx["text"].astype(str).str.match(LINE_RANGE.pattern)] if len(nvtx) else nvtx
    named = named.reset_index(drop=True)
    rng = Nest(named["start"], named["end"], named["thread"])
    mods, _, _ = module_frames(trace)
    held = rng.innermost(mods["thread"].tolist(), mods["start"].tolist())
    coarse = {a for j in set(held.tolist()) if j >= 0 for a in rng.ancestors(j)}
    texts = [None if i in coarse else t for i, t in enumerate(named["text"].astype(str))]
    inside = rng.innermost(work["thread"].tolist(), work["at"].tolist())
    # the outermost op around each launch, and the engine's op around backward work
    tops = ops[ops["depth"] == 0] if len(ops) else ops
    top_names = tops["name"].astype(str).tolist() if len(tops) else []
    threads, when = work["thread"].tolist(), work["at"].tolist()
    top = Nest(tops["start"], tops["end"], tops["thread"]).innermost(threads, when)
    engine = tops[tops["name"].astype(str).str.startswith(ENGINE)] if len(tops) else tops
    engine_names = engine["name"].astype(str).tolist() if len(engine) else []
    in_engine = Nest(engine["start"], engine["end"], engine["thread"]).innermost(threads, when)
    out = []
    for i, (b, s, r) in enumerate(zip(backward, seq, inside.tolist())):
        while r >= 0 and texts[r] is None:
            r = int(rng.parent[r])
        if r >= 0:
            out.append(texts[r])
        elif b and s in fwd_name:
            out.append(f"backward of {fwd_name[s]}")
        elif b and in_engine[i] >= 0:
            out.append("backward: " + engine_names[in_engine[i]].split(": ", 1)[-1])
        elif b:
            out.append("backward of an op before the capture")
        elif top[i] >= 0:
            out.append(top_names[top[i]])
        else:
            out.append(str(work["name"].iat[i])[:60] + " (no launching op)")
    return out


def top_whats(items: pd.DataFrame, n: int = 3) -> str:
    """The largest things in ``items`` by time, as a phrase ("Optimizer.step#AdamW.step 4.1 ms,
    ...")."""
    if items.empty:
        return ""
    by = items.groupby("what")["dur"].sum().sort_values(ascending=False)
    parts = [f"{w} {format_ns(ns)}" for w, ns in by.head(n).items()]
    rest = len(by) - n
    return ", ".join(parts) + (f" and {rest} more" if rest > 0 else "")
