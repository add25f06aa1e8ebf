"""The ranges the by-code view reads (a cell's lines, its models' forwards, autograd's backward
nodes), taken out of a trace's range table into ``meta["code"]``; and, under Nsight Systems, the
same ranges made NVTX ranges so that nsys records them.

In process, torch.profiler records the line and module ranges as ops and autograd's nodes with
their sequence numbers (``capture/chrome/code_text.py``). nsys records none of that, only NVTX. So
around a ``--nsys`` cell's captured runs (:func:`nvtx_code_marks`): the line ranges and module
hooks push NVTX ranges (``cell_lines.nvtx_ranges``), and torch's ``emit_nvtx`` names every op's
NVTX range with its sequence number (``aten::addmm, seq = 12, op_id = 40``; a backward node's
``autograd::engine::evaluate_function: AddmmBackward0, seq = 12, ...``), which ties each
backward node to the forward op that made it, as the profiler's "Sequence number" does. Read back
(:func:`code_from_nvtx`), the ranges become the same ``meta["code"]`` tables the in-process path
fills, so ``by_module``/``by_line`` (and ``--counters`` per module and line) give one answer on
either path. The op ranges leave the NVTX table: they are torch's, not the user's ranges.

Their cost: an NVTX range per op and per line and module (about 1 µs each) inside the captured
runs only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from ...trace import Trace

__all__ = ["OP_RANGE", "code_from_nvtx", "moved_ranges", "nvtx_code_marks"]

#: An op's range as ``emit_nvtx`` names it: the op, its sequence number where it has one, its id.
OP_RANGE = re.compile(r"^(?P<name>.+?)(?:, seq = (?P<seq>-?\d+))?, op_id = \d+")
#: The autograd engine's range around each backward node it runs.
ENGINE = "autograd::engine::evaluate_function: "


@contextmanager
def nvtx_code_marks(
    namespace: Mapping[str, Any], functions: list[dict[str, Any]] | None = None
) -> Iterator[None]:
    """Inside the block (a ``--nsys`` cell's captured runs): lines, module forwards and the calls
    and lines of ``functions`` (``function_ranges.function_table``) as NVTX ranges, and torch's
    ops in NVTX ranges with their sequence numbers; all undone after it."""
    from .cell_lines import nvtx_ranges
    from .function_ranges import function_ranges, with_their_globals
    from .module_ranges import module_ranges

    with ExitStack() as stack:
        stack.enter_context(nvtx_ranges())
        stack.enter_context(module_ranges(with_their_globals(namespace, functions or [])))
        stack.enter_context(function_ranges(namespace, functions or []))
        import torch

        if torch.cuda.is_available():
            stack.enter_context(torch.autograd.profiler.emit_nvtx(record_shapes=False))
        yield


def moved_ranges(
    table: pd.DataFrame, column: str, code: dict[str, Any], ops: bool = False
) -> pd.DataFrame:
    """``table`` without the rows of the view's ranges (a cell's lines, the models' forwards; and
    with ``ops``, ``emit_nvtx``'s op ranges), which go to ``code["lines"]``, ``code["modules"]``
    and ``code["autograd"]``; the rest's depth less the ranges that held them."""
    from ...trace.code_frames import CODE_LINE_RANGE, MODULE_RANGE, Nest

    if table.empty:
        return table
    # an nsys export names a range "domain:text"; the view's are in the default domain (":text")
    text = table[column].astype(str).str.replace(r"^:", "", regex=True)
    moved = np.zeros(len(table), dtype=bool)
    for key, pattern in (("lines", CODE_LINE_RANGE), ("modules", MODULE_RANGE)):
        marks = text.str.match(pattern.pattern).to_numpy()
        if marks.any():
            part = table[marks]
            kept = code.get(key) or {"text": [], "start": [], "end": [], "thread": []}
            kept["text"] += text[marks].tolist()
            kept["start"] += part["start"].astype("int64").tolist()
            kept["end"] += part["end"].astype("int64").tolist()
            kept["thread"] += part["thread"].tolist()
            code[key] = kept
            moved |= marks
    if ops:
        marks = text.str.contains(r", op_id = \d+", regex=True).to_numpy()
        if marks.any():
            code["autograd"] = _autograd(table[marks].assign(**{column: text[marks]}), column)
            moved |= marks
    if not moved.any():
        return table
    ranges, rest = table[moved], table[~moved].reset_index(drop=True)
    nest = Nest(ranges["start"], ranges["end"], ranges["thread"])
    held = nest.innermost(rest["thread"].tolist(), rest["start"].tolist())
    levels = np.array([len(nest.ancestors(j)) for j in range(len(nest))] + [0], dtype=np.int64)
    rest["depth"] = (rest["depth"].to_numpy() - levels[held]).clip(min=0)
    return rest


def _autograd(ops: pd.DataFrame, column: str) -> dict[str, list[Any]]:
    """The autograd table (name, start, end, thread, seq, fwd_thread) from op ranges: each
    backward node the engine ran (``fwd_thread`` 1: backward), with the sequence number of the
    node it applied (its own, or that of the first range inside it that has one: torch 2.11 puts
    it on the node's ``apply`` range, ``MeanBackward0, seq = 53``), and each forward op that
    recorded a sequence number on a thread the engine did not run on (``fwd_thread`` 0). A node
    without a number gets -1: backward, of no forward op."""
    found = ops[column].astype(str).str.extract(OP_RANGE)
    frame = pd.DataFrame(
        {
            "name": found["name"].astype(str).to_numpy(),
            "start": ops["start"].astype("int64").to_numpy(),
            "end": ops["end"].astype("int64").to_numpy(),
            "thread": ops["thread"].to_numpy(),
            "seq": pd.to_numeric(found["seq"], errors="coerce").to_numpy(),
        }
    )
    engine = frame["name"].str.startswith(ENGINE).to_numpy()
    engine_threads = set(frame.loc[engine, "thread"].tolist())
    backward = frame[engine].copy()
    for thread, idx in backward.groupby("thread").groups.items():
        mine = frame[(frame["thread"] == thread) & ~engine & frame["seq"].notna()]
        mine = mine.sort_values("start")
        starts = mine["start"].to_numpy()
        for i in idx:
            if backward.at[i, "seq"] == backward.at[i, "seq"]:
                continue  # the node's range carries its own
            j = int(np.searchsorted(starts, backward.at[i, "start"], side="left"))
            if j < len(mine) and mine["end"].iloc[j] <= backward.at[i, "end"]:
                backward.at[i, "seq"] = mine["seq"].iloc[j]
    forward = frame[~engine & frame["seq"].notna() & ~frame["thread"].isin(engine_threads)]
    # a node with no sequence number (AccumulateGrad: gradients summed into .grad) is backward
    # work of no forward op, as in process
    backward["seq"] = backward["seq"].fillna(-1)
    out = pd.concat([backward.assign(fwd_thread=1), forward.assign(fwd_thread=0)]).sort_values(
        "start", kind="stable"
    )
    out["seq"] = out["seq"].astype("int64")
    return {c: out[c].tolist() for c in ["name", "start", "end", "thread", "seq", "fwd_thread"]}


def code_from_nvtx(
    trace: Trace,
    cell_source: str | None,
    marked: bool = True,
    functions: list[dict[str, Any]] | None = None,
) -> None:
    """A ``--nsys`` trace's by-code ranges, marked by :func:`nvtx_code_marks`, read back from its
    NVTX table into ``meta["code"]`` (the cell's source for its lines' text), as the in-process
    path leaves them. ``marked``: the capture marked them (a cell that ran no model says so);
    else (a report loaded from a file) only where ranges were found. ``functions``: the table of
    the functions marked (their names, files and lines, for the rows' text)."""
    code: dict[str, Any] = {"functions": functions} if functions else {}
    trace.nvtx = moved_ranges(trace.nvtx, "text", code, ops=True)
    if code:
        trace.meta.setdefault("code", {}).update(code)
    if marked or code.get("modules"):
        trace.meta["with_modules"] = True
    if cell_source:
        trace.meta.setdefault("cell_source", cell_source)
