"""The analysis window of a loaded trace: the span its figures are taken over, chosen once and said
in the report.

A trace from elsewhere has no cell. Its first CUDA API call may come seconds before the work of
interest (model load, warm-up, the profiler's own start), so a window from there would call a busy
GPU idle: a V100 training trace whose GPU is 99% busy over its steps read "idle 58%". By default a
loaded torch.profiler trace is read over its profiler steps (the ``ProfilerStep#N`` ranges
torch.profiler's schedule records, first step's start to last step's end); without steps, over the
span of its GPU activity (first kernel or memory operation to the last one's end). ``window=``
chooses another:

- ``"steps"`` (every step), or a step range: ``"3-5"``, ``"#3-#5"``, ``"ProfilerStep#3-5"``,
  ``"7"``;
- a range's name (an NVTX or record_function / user-annotation range, every instance of it: first
  start to last end), e.g. ``"## forward ##"``;
- ``"gpu"``: the span of the GPU activity;
- ``"capture"``: everything the trace holds.

:func:`in_window` gives the Trace of what the window holds: the host's events (API calls, torch ops,
ranges) that start in it (its end excluded: a launch at the boundary of two steps belongs to the
second), and the GPU work they launched (matched by correlation id, so a kernel launched in the last
step and ending after it still counts, and the window's end moves to its end); GPU work with no
launch record counts where it starts in the window. Every table, summary and finding is then taken
over that one window: no whole-capture CPU figure is set beside a windowed GPU figure. A live
``%%gpuprofile`` capture keeps its cell's NVTX range (``Trace.analysis_window``) unless a window is
asked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InvalidOptionError
from .model import Trace, id_column

__all__ = ["STEP", "Window", "WindowError", "choose", "in_window", "steps"]

#: The range torch.profiler records for each step of its schedule.
STEP = re.compile(r"^ProfilerStep#(\d+)$")
_STEP_RANGE = re.compile(
    r"^\s*(?:ProfilerStep)?#?(\d+)\s*(?:(?:-|–|\.\.|:)\s*(?:ProfilerStep)?#?(\d+))?\s*$"
)


class WindowError(InvalidOptionError):
    """A ``window=`` the trace has nothing for: the message names what it has instead."""


@dataclass(frozen=True)
class Window:
    """A span of the trace's clock (ns), what kind of span it is ("steps", "range", "gpu",
    "capture"), and how the report says it."""

    start: int
    end: int
    kind: str
    text: str


def steps(trace: Trace) -> pd.DataFrame:
    """The trace's ``ProfilerStep#N`` ranges (host side), with their step number in ``step``, in
    step order."""
    nv = trace.nvtx
    if nv.empty:
        return nv.assign(step=pd.Series(dtype="int64"))
    found = nv["text"].astype(object).map(lambda s: STEP.match(s) if isinstance(s, str) else None)
    hit = found.notna().to_numpy()
    out = nv[hit].assign(step=[int(m.group(1)) for m in found[hit]])
    return out.sort_values(["step", "start"]).reset_index(drop=True)


def _gpu_span(trace: Trace) -> tuple[int, int] | None:
    parts = [df for df in (trace.kernels, trace.memops) if not df.empty]
    if not parts:
        return None
    return int(min(df["start"].min() for df in parts)), int(max(df["end"].max() for df in parts))


def _step_text(chosen: pd.DataFrame) -> str:
    first, last = int(chosen["step"].min()), int(chosen["step"].max())
    n = chosen["step"].nunique()
    if first == last:
        return f"profiler step ProfilerStep#{first}"
    return f"the profiler steps ProfilerStep#{first}\u2013#{last} ({n} steps)"


def choose(trace: Trace, choice: str | None = None) -> Window | None:
    """The window ``choice`` names in ``trace`` (module doc); ``None``/"auto": the trace's default.
    None where the default is the Trace's own (a live capture's cell range, an nsys export's CUDA
    span). Raises :class:`WindowError` for a range or step the trace does not have."""
    choice = (choice or trace.meta.get("window_choice") or "auto").strip()
    lo, hi = trace.window()
    if choice == "auto":
        if trace.meta.get("label") or trace.meta.get("backend") != "torch.profiler":
            return None
        choice = "steps" if not steps(trace).empty else "gpu"
    if choice == "capture":
        return Window(lo, hi, "capture", "the whole capture")
    if choice == "gpu":
        span = _gpu_span(trace)
        if span is None:
            return Window(lo, hi, "capture", "the whole capture (it has no GPU activity)")
        return Window(span[0], span[1], "gpu", "the span of its GPU activity")
    st = steps(trace)
    if choice == "steps":
        if st.empty:
            raise WindowError(
                option="window=",
                value=choice,
                reason=_none("no profiler steps (ProfilerStep#N)", trace),
            )
        return Window(int(st["start"].min()), int(st["end"].max()), "steps", _step_text(st))
    numbered = _STEP_RANGE.match(choice)
    if numbered and not _named(trace, choice):
        first = int(numbered.group(1))
        last = int(numbered.group(2) or first)
        chosen = st[(st["step"] >= min(first, last)) & (st["step"] <= max(first, last))]
        if chosen.empty:
            raise WindowError(
                option="window=", value=choice, reason=_none("no such profiler step", trace)
            )
        return Window(
            int(chosen["start"].min()), int(chosen["end"].max()), "steps", _step_text(chosen)
        )
    ranges = _named(trace, choice)
    if ranges is None:
        raise WindowError(
            option="window=", value=choice, reason=_none("no range of that name", trace)
        )
    n = len(ranges)
    text = f"the range {choice!r}" + (f" ({n} instances, first start to last end)" if n > 1 else "")
    return Window(int(ranges["start"].min()), int(ranges["end"].max()), "range", text)


def _named(trace: Trace, name: str) -> pd.DataFrame | None:
    nv = trace.nvtx
    if nv.empty:
        return None
    hit = nv[nv["text"].astype(object) == name]
    return hit if len(hit) else None


def _none(what: str, trace: Trace) -> str:
    """Why a choice finds nothing, and what to pass instead."""
    return f"finds {what} in this trace ({_what_it_has(trace)})"


def _what_it_has(trace: Trace) -> str:
    """What a user may pass instead: the trace's steps and its most common range names."""
    st = steps(trace)
    say = ['"gpu"', '"capture"']
    if len(st):
        first, last = int(st["step"].min()), int(st["step"].max())
        say.insert(
            0,
            f'"steps" (ProfilerStep#{first}\u2013#{last}) or a step range such as "{first}-{last}"',
        )
    nv = trace.nvtx
    if not nv.empty:
        names = nv["text"].astype(object)
        names = names[~names.map(lambda s: bool(STEP.match(s)) if isinstance(s, str) else True)]
        common = names.value_counts().head(5).index.tolist()
        if common:
            say.append("a range name (" + ", ".join(repr(c) for c in common) + ")")
    return "it takes " + ", ".join(say)


def in_window(trace: Trace, choice: str | None = None) -> Trace:
    """The Trace of what the window ``choice`` holds (module doc); ``trace`` itself where the
    default window is the Trace's own. Its ``meta`` says the window: ``window`` (start, end),
    ``window_kind``, ``window_text``."""
    win = choose(trace, choice)
    if win is None:
        return trace
    meta = {
        **trace.meta,
        "window_kind": win.kind,
        "window_text": win.text,
        "window_choice": choice or "auto",
    }
    if win.kind == "capture":
        meta["window"] = (win.start, win.end)
        return Trace(
            **{t: getattr(trace, t) for t in ("kernels", "memops", "api", "ops", "nvtx", "osrt")},
            meta=meta,
        )
    start, end = win.start, win.end
    api = trace.api
    api_in = api[(api["start"] >= start) & (api["start"] < end)] if not api.empty else api
    launched = _keys(api_in)
    every_launch = _keys(api)
    gpu = {}
    if win.kind == "gpu":  # the GPU span holds every GPU operation, launched before it or not
        gpu = {table: getattr(trace, table) for table in ("kernels", "memops")}
    else:
        gpu, end = _gpu_work(trace, launched, every_launch, start, end)
    host = {}
    for table in ("ops", "nvtx", "osrt"):
        df = getattr(trace, table)
        host[table] = (
            df[(df["start"] >= start) & (df["start"] < end)].reset_index(drop=True)
            if not df.empty
            else df
        )
    meta["window"] = (start, end)
    return Trace(api=api_in.reset_index(drop=True), **gpu, **host, meta=meta)


def _gpu_work(
    trace: Trace, launched: np.ndarray, every_launch: np.ndarray, start: int, end: int
) -> tuple[dict[str, pd.DataFrame], int]:
    """The GPU work a window [start, end) of host events holds, and the window's end moved to the
    end of that work: what its launches launched (wherever it ran), and the work with no launch
    record that starts in the window, the window as it grows included: the printed window then
    holds exactly the work its figures count (work that starts after the steps' host side but
    before their last kernel ends lies inside the printed span, and is counted)."""
    tables = {t: getattr(trace, t) for t in ("kernels", "memops") if not getattr(trace, t).empty}
    keep, free = {}, []
    for table, df in tables.items():
        keys = _keys(df)
        keep[table] = np.isin(keys, launched) & (keys >= 0)
        if keep[table].any():
            end = max(end, int(df["end"].to_numpy()[keep[table]].max()))
        s, e = df["start"].to_numpy(), df["end"].to_numpy()
        rows = np.flatnonzero((~np.isin(keys, every_launch) | (keys < 0)) & (s >= start))
        free.append(pd.DataFrame({"table": table, "row": rows, "start": s[rows], "end": e[rows]}))
    if free:
        # Work without a launch, in start order, is in while it starts before the end the window
        # has reached (the launched work's, or that of the unlaunched work before it)
        cand = pd.concat(free, ignore_index=True).sort_values("start", kind="stable")
        reach = np.maximum(end, np.r_[end, np.maximum.accumulate(cand["end"].to_numpy())[:-1]])
        stop = np.flatnonzero(cand["start"].to_numpy() >= reach)
        cand = cand.iloc[: stop[0] if len(stop) else len(cand)]
        if len(cand):
            end = max(end, int(cand["end"].max()))
        for table, rows in cand.groupby("table")["row"]:
            keep[str(table)][rows.to_numpy()] = True
    out = {t: getattr(trace, t) for t in ("kernels", "memops")}
    out.update({t: tables[t][k].reset_index(drop=True) for t, k in keep.items()})
    return out, end


def _keys(df: pd.DataFrame) -> np.ndarray:
    """Each row's correlation id with its process above bit 40 (every process numbers its own); -1
    where it has none."""
    corr = pd.to_numeric(df["correlation"], errors="coerce").fillna(-1).to_numpy(dtype=np.int64)
    pid = np.maximum(id_column(df["pid"]), 0) if "pid" in df.columns else 0
    return np.where(corr >= 0, corr | (pid << 40), -1)
