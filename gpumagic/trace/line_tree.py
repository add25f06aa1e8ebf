"""The by-line view's tree, read from the ranges of a capture: the cell's lines (``gpumagic line
N``), and below a line that calls a function of the user's (defined in an earlier cell or a file of
theirs) that call (``gpumagic function K NAME``) with the function's own lines (``gpumagic fline K
LINE``), at any depth of calls.

A cell line is one row however often it runs, and its parent is the ``for``/``with``/``if`` that
held it most often. A function's call and its lines are rows per place they were called from: the
same ``helper()`` called from two lines of the cell is two rows, each under its line, so that a
line's row with its body always sums what that line caused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .code_frames import FUNCTION_LINE_RANGE, FUNCTION_RANGE, LINE_RANGE, Nest

__all__ = ["LineTree", "line_tree", "tree_order"]


@dataclass
class LineTree:
    """Per range of the capture its row's ``keys`` (a cell line's number; a negative number for a
    function's call or line, one per place it ran from: ints sort and group as the cell's do), and
    per key its ``text``, ``number`` (the line in its own file; a call's: the function's first
    line) and ``parents``; ``capped``: the keys of lines that stopped marking their runs."""

    keys: list[Any]
    text: dict[Any, str] = field(default_factory=dict)
    number: dict[Any, int] = field(default_factory=dict)
    parents: dict[Any, Any] = field(default_factory=dict)
    capped: set[Any] = field(default_factory=set)


def _where(entry: Mapping[str, Any], cells: Mapping[str, Any]) -> str:
    """Where a function was defined, as a notebook user says it: ``In [3]`` for a cell IPython
    numbered, else the file's last part and the line."""
    file = str(entry.get("file", ""))
    number = cells.get(file)
    if number is not None:
        return f"In [{number}]"
    if file.startswith("<ipython-input-"):
        return f"In [{file.split('-')[2]}]"
    return f"{file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{entry.get('first', '?')}"


def line_tree(
    ranges: pd.DataFrame,
    nest: Nest,
    cell_source: str,
    functions: Sequence[Mapping[str, Any]] = (),
    capped: Sequence[Any] = (),
    cells: Mapping[str, Any] | None = None,
) -> LineTree:
    """The :class:`LineTree` of the ranges (``text`` per range, in ``nest``'s order), the cell's
    source, the marked ``functions`` (``capture/function_ranges.function_table``), the ``capped``
    lines and ``cells`` (a cell file's IPython number)."""
    texts = [str(t) for t in ranges["text"]]
    source = cell_source.splitlines()
    by_token = {int(f["token"]): f for f in functions}
    capped_set = set(capped)
    cells = cells or {}
    tree = LineTree(keys=[None] * len(texts))
    order = (
        np.lexsort((-np.asarray(nest.end), np.asarray(nest.start)))
        if len(texts)
        else np.empty(0, dtype=np.int64)
    )
    votes: dict[Any, dict[Any, int]] = {}
    made: dict[tuple[Any, ...], int] = {}

    def numbered(place: tuple[Any, ...]) -> int:
        return made.setdefault(place, -1 - len(made))

    for i in [int(j) for j in order]:  # a parent starts first: its key is made before its child's
        parent = int(nest.parent[i])
        up = tree.keys[parent] if parent >= 0 else None
        text = texts[i]
        if m := LINE_RANGE.match(text):
            key = int(m[1])
            tree.number[key] = key
            tree.text[key] = source[key - 1].strip() if 0 < key <= len(source) else ""
            if up != key:  # a line's range inside its own (a loop body calling back): no parent
                mine = votes.setdefault(key, {})
                mine[up] = mine.get(up, 0) + 1
            if key in capped_set:
                tree.capped.add(key)
        elif m := FUNCTION_RANGE.match(text):
            token, entry = int(m[1]), by_token.get(int(m[1]), {})
            key = numbered(("call", token, up))
            tree.number[key] = int(entry.get("first", 0))
            tree.text[key] = f"{m[2]}()  [{_where(entry, cells)}]" if entry else f"{m[2]}()"
            tree.parents[key] = up
        elif m := FUNCTION_LINE_RANGE.match(text):
            token, line = int(m[1]), int(m[2])
            entry = by_token.get(token, {})
            key = numbered(("line", token, line, up))
            lines, first = list(entry.get("lines", [])), int(entry.get("first", 0))
            tree.number[key] = line
            tree.text[key] = lines[line - first].strip() if 0 <= line - first < len(lines) else ""
            tree.parents[key] = up
            if text in capped_set:
                tree.capped.add(key)
        else:
            continue
        tree.keys[i] = key
    for key, v in votes.items():
        tree.parents[key] = max(v, key=lambda parent: v[parent])
    return tree


def tree_order(keys: Sequence[Any], tree: LineTree) -> list[Any]:
    """``keys`` in the tree's reading order: the cell's lines by number, each followed by what it
    holds, in the order of their lines (a call at its function's first line)."""
    children: dict[Any, list[Any]] = {}
    for key in keys:
        children.setdefault(tree.parents.get(key), []).append(key)
    out: list[Any] = []
    seen: set[Any] = set()

    def walk(parent: int | None) -> None:
        for key in sorted(children.get(parent, []), key=lambda k: tree.number.get(k, 0)):
            if key not in seen:
                seen.add(key)
                out.append(key)
                walk(key)

    walk(None)
    out += [k for k in keys if k not in seen]  # a parent not among the keys: kept, at the end
    return out
