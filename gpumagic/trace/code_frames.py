"""The user's code as a trace records it: Python frames, ``nn.Module`` forwards, the cell-line
ranges of ``%%gpuprofile``, and the autograd entries that tie a backward op to its forward op; and
the one question asked of each: which of these intervals, on this thread, is the innermost one
holding this instant.

A torch.profiler trace names a Python frame ``file.py(LINE): func``, where LINE is the function's
first line (not the line running: the profiler records calls, not lines), and a module's forward
``nn.Module: Block_1`` (one number per class, in the order the profiler first met the instances).
Lines of a cell come from ranges the magic pushes around each statement (``gpumagic line N``):
the frames alone cannot say them.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..edges import JsonValue

if TYPE_CHECKING:  # named through the package: Trace's own module reaches this one (lazily)
    from . import Trace

__all__ = [
    "CODE_LINE_RANGE",
    "FUNCTION_LINE_RANGE",
    "FUNCTION_RANGE",
    "LINE_RANGE",
    "MODULE_PREFIX",
    "MODULE_RANGE",
    "Nest",
    "code_tables",
    "is_library_file",
    "line_ranges",
    "parse_frame",
    "thread_key",
]

#: How a module's forward is named among the Python frames.
MODULE_PREFIX = "nn.Module: "
#: The record_function range the magic pushes around each statement of a cell (capture/cell_lines).
LINE_RANGE = re.compile(r"^gpumagic line (\d+)$")
#: A call of a function the cell reaches, and one of its statements (capture/function_ranges).
FUNCTION_RANGE = re.compile(r"^gpumagic function (\d+) (.+)$")
FUNCTION_LINE_RANGE = re.compile(r"^gpumagic fline (\d+) (\d+)$")
#: Any of the three: the ranges of the line tree.
CODE_LINE_RANGE = re.compile(r"^gpumagic (?:line \d+|function \d+ .+|fline \d+ \d+)$")
#: The range the magic opens around each forward of the cell's models (capture/module_ranges):
#: a token unique in the capture ("Block_1") and the module's dotted name.
MODULE_RANGE = re.compile(r"^gpumagic module (\S+) (.+)$")
_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<func>.+)$")
#: Packages whose files are never the user's own code, beside the standard library's.
_LIBRARIES = {
    "torch",
    "torchvision",
    "torchaudio",
    "triton",
    "transformers",
    "accelerate",
    "numpy",
    "IPython",
    "ipykernel",
    "traitlets",
    "gpumagic",
    "functorch",
    "sympy",
    "einops",
    "timm",
    "lightning",
    "pytorch_lightning",
    "apex",
    "deepspeed",
    "peft",
    "diffusers",
    "xformers",
    "flash_attn",
    "site-packages",
    "dist-packages",
}


def thread_key(value: JsonValue) -> int | str:
    """A thread id as one type (kineto writes ints; a column may hold numpy ints or text)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return str(value)


def parse_frame(name: str) -> tuple[str, int, str] | None:
    """(file, first line, function) of a frame named ``file.py(LINE): func``; None for any other
    name (a module's forward, a built-in)."""
    m = _FRAME.match(name)
    return (m["file"], int(m["line"]), m["func"]) if m else None


def is_library_file(path: str) -> bool:
    """Whether a frame's file is a library's (torch, the standard library, an installed package)
    rather than the user's script, module or cell. kineto writes paths relative to the entry of
    ``sys.path`` that holds them, so a library file starts with its package (``torch/nn/...``)
    or is a standard-library module (``contextlib.py``); code Inductor or ``exec`` generated is
    not the user's either."""
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    if not parts or any(p in _LIBRARIES or p.startswith("torchinductor") for p in parts):
        return bool(parts)
    if parts[0].startswith("<"):  # generated code ("<string>", "<eval_with_key>"), not a cell's
        return not parts[0].startswith("<ipython-input")
    top = parts[0][:-3] if parts[0].endswith(".py") else parts[0]
    return top in sys.stdlib_module_names or top.startswith("<frozen") or _installed(top)


@lru_cache(maxsize=4096)
def _installed(top: str) -> bool:
    """Whether ``top`` is a package installed here (its files under site-packages), found without
    importing it: a trace's ``tqdm/_monitor.py`` is tqdm's, not the user's."""
    try:
        spec = importlib.util.find_spec(top) if top.isidentifier() else None
    except (ImportError, ValueError):
        return False
    where = str(getattr(spec, "origin", None) or "")
    return "site-packages" in where or "dist-packages" in where


def code_tables(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(frames, autograd) of a Trace from ``meta["code"]`` (``capture/chrome/code_text.py``): frames
    with name, start, end, thread; autograd entries with name, start, end, thread, seq, fwd_thread.
    Empty frames where the trace did not record them."""

    def compute() -> tuple[pd.DataFrame, pd.DataFrame]:
        code = trace.meta.get("code") or {}
        cols = ["name", "start", "end", "thread"]
        frames = pd.DataFrame(code.get("frames") or {c: [] for c in cols})
        auto = pd.DataFrame(code.get("autograd") or {c: [] for c in [*cols, "seq", "fwd_thread"]})
        for df in (frames, auto):
            for c in ("start", "end"):
                df[c] = df[c].astype("int64")
            df["thread"] = [thread_key(t) for t in df["thread"]]
            df["name"] = df["name"].astype(str)
        return frames, auto

    found: tuple[pd.DataFrame, pd.DataFrame] = trace.memo("code_frames.tables", compute)
    return found


def line_ranges(trace: Trace) -> pd.DataFrame:
    """The ranges of a cell's lines (text, start, end, thread): kept apart from the NVTX table by
    the capture (``meta["code"]["lines"]``), or among the ranges of a trace read from a file."""
    kept = (trace.meta.get("code") or {}).get("lines")
    if kept:
        return pd.DataFrame(kept)
    nvtx = trace.nvtx
    if nvtx.empty:
        return pd.DataFrame({"text": [], "start": [], "end": [], "thread": []})
    return nvtx[nvtx["text"].astype(str).str.match(CODE_LINE_RANGE.pattern)][
        ["text", "start", "end", "thread"]
    ]


class Nest:
    """Intervals that nest per thread (a call stack, ranges pushed and popped), asked which one is
    the innermost holding an instant. Sorted once per thread, each interval's parent found by one
    sweep; a question is a binary search for the last interval starting at or before the instant,
    then a walk up its parents to the first that has not ended (start <= t < end)."""

    def __init__(self, start: Iterable[int], end: Iterable[int], thread: Iterable[Any]) -> None:
        self.start = np.asarray(list(start), dtype=np.int64)
        self.end = np.asarray(list(end), dtype=np.int64)
        threads = [thread_key(t) for t in thread]
        self.parent = np.full(len(self.start), -1, dtype=np.int64)
        self._by_thread: dict[Any, tuple[np.ndarray, np.ndarray]] = {}
        groups: dict[Any, list[int]] = {}
        for i, t in enumerate(threads):
            groups.setdefault(t, []).append(i)
        for t, rows in groups.items():
            idx = np.asarray(rows, dtype=np.int64)
            idx = idx[np.lexsort((-self.end[idx], self.start[idx]))]
            stack: list[int] = []
            for i in idx.tolist():
                while stack and self.end[stack[-1]] <= self.start[i]:
                    stack.pop()
                self.parent[i] = stack[-1] if stack else -1
                stack.append(i)
            self._by_thread[t] = (self.start[idx], idx)

    def __len__(self) -> int:
        return len(self.start)

    def threads(self) -> list[Any]:
        """The threads, those holding the most intervals first."""
        return sorted(self._by_thread, key=lambda t: -len(self._by_thread[t][1]))

    def innermost(self, thread: Iterable[Any], at: Iterable[float]) -> np.ndarray:
        """Per question (thread, instant), the innermost interval holding it, or -1. One binary
        search per thread for all its questions, then the walk up taken a level at a time for all
        the questions still walking."""
        when_all = np.asarray(list(at), dtype=np.float64)
        out = np.full(len(when_all), -1, dtype=np.int64)
        groups: dict[Any, list[int]] = {}
        for i, t in enumerate(thread):
            groups.setdefault(thread_key(t), []).append(i)
        for t, rows in groups.items():
            found = self._by_thread.get(t)
            if found is None:
                continue
            starts, idx = found
            q = np.asarray(rows, dtype=np.int64)
            q = q[~np.isnan(when_all[q])]
            when = when_all[q]
            pos = np.searchsorted(starts, when, side="right") - 1
            j = np.where(pos >= 0, idx[np.maximum(pos, 0)], -1)
            while True:
                ended = (j >= 0) & (self.end[np.maximum(j, 0)] <= when)
                if not ended.any():
                    break
                j[ended] = self.parent[j[ended]]
            out[q] = j
        return out

    def ancestors(self, i: int) -> list[int]:
        """``i`` and the intervals holding it, innermost first."""
        chain = []
        while i >= 0:
            chain.append(i)
            i = int(self.parent[i])
        return chain
