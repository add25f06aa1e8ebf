"""Trace: the one data model every capture backend (torch.profiler, nsys, ...) produces, its
summaries and figures.

Plain pandas DataFrames with fixed columns; every time is an integer nanosecond on one clock. The
summaries are ``nsys stats``' tables (``summaries.py`` says how they are defined); the figures (GPU
busy, the cell's window, wall, CPU time in ops) have one definition each, here. A Trace is treated
as read-only once built: each summary and figure is computed once and kept, so a report, its
findings and its tables never recompute (or disagree on) a number.

A Trace may be built over a :class:`TableSource` (an nsys export): its tables are then read on first
use, and the duration summaries of a table not read yet come from the source's narrow read (group
ids and durations only). A million-kernel export answers ``kernel_summary()`` without building a
million-row frame.

An empty table is either a fact (the capture recorded kernels and none ran) or unknown (it did not
record them: nsys run without cuda in its trace list, torch.profiler without ProfilerActivity.CUDA).
``Trace.recorded(kind)`` tells which, from ``meta["recorded"]`` (filled by the loaders); what needs
a kind that was not recorded says so and how to record it (``Trace.not_recorded``, its sentences in
``coverage.py``), never a 0 or an idle GPU.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

import numpy as np
import pandas as pd

from ..edges import TorchValue
from . import coverage, summaries
from .intervals import union_by_group, union_ns

_T = TypeVar("_T")

#: What each kind of analysis window is, as the report says it.
WINDOW_TEXT = {
    "nvtx": "the cell's NVTX range",
    "cuda": "the span of its CUDA activity",
    "capture": "the capture",
    "steps": "the profiler steps",
    "range": "the chosen range",
    "gpu": "the span of its GPU activity",
}

__all__ = ["COLUMNS", "RANK_MARK", "TableSource", "Trace", "id_column", "nesting_depth", "union_ns"]

#: The NVTX mark (or range) text by which a process of a multi-process run says which rank it is:
#: emitted by ``%%gpuprofile --nproc``'s launcher in every rank, read by the nsys reader and the
#: per-rank analysis.
RANK_MARK = re.compile(r"^gpumagic rank=(\d+) local_rank=(\d+) world=(\d+)$")

COLUMNS: dict[str, list[str]] = {
    "kernels": [
        "name",
        "start",
        "end",
        "device",
        "stream",
        "correlation",
        "grid",
        "block",
        "registers",
        "shared_memory",
        "pid",
    ],
    "memops": ["kind", "name", "bytes", "start", "end", "device", "stream", "correlation", "pid"],
    "api": ["name", "start", "end", "thread", "correlation", "pid"],
    "ops": ["name", "start", "end", "thread", "depth", "shapes", "external_id", "dtypes"],
    "nvtx": ["text", "start", "end", "thread", "depth", "domain", "style", "pid"],
    "osrt": ["name", "start", "end", "thread", "pid"],
}
#: ``pid``: the process a row belongs to (nsys exports; None where the capture has one process and
#: does not say).

_INT_COLUMNS = {
    "start",
    "end",
    "bytes",
    "correlation",
    "depth",
    "registers",
    "shared_memory",
    "external_id",
}


def empty_frame(table: str) -> pd.DataFrame:
    return pd.DataFrame(
        {c: pd.Series(dtype="int64" if c in _INT_COLUMNS else "object") for c in COLUMNS[table]}
    )


def frame(table: str, rows: Iterable[dict[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """A table with exactly its fixed columns (missing ones filled), integer times."""
    df = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if df.empty:
        return empty_frame(table)
    for c in COLUMNS[table]:
        if c not in df.columns:
            df[c] = None
    df = df[COLUMNS[table]]
    for c in ("start", "end"):
        df[c] = df[c].astype("int64")
    return df.reset_index(drop=True)


class TableSource(Protocol):
    """Where a Trace's tables come from when they are read on first use
    (``capture/nsys/sqlite.py``)."""

    #: The tables it supplies (names in COLUMNS).
    tables: frozenset[str]

    def read(self, table: str) -> pd.DataFrame:
        """The whole table, in the Trace's columns."""
        ...

    def durations(self, table: str) -> tuple[np.ndarray, np.ndarray, list[Any]] | None:
        """For a duration summary: each row's group (0..n-1), its duration (ns), and each group's
        name (one list per name column); None where the source has no narrow read for ``table``."""
        ...

    def count(self, table: str) -> int:
        """The table's row count, without reading it."""
        ...


def id_column(col: pd.Series) -> np.ndarray:
    """A process or device column as int64, -1 where missing (a capture that does not say)."""
    if col.dtype.kind in "iu":
        return np.asarray(col.to_numpy(dtype=np.int64))
    return np.asarray(pd.to_numeric(col, errors="coerce").fillna(-1).to_numpy(dtype=np.int64))


def nesting_depth(df: pd.DataFrame, group: str = "thread") -> pd.Series:
    """Depth of each interval inside the enclosing intervals of the same group (0 = outermost), by a
    stack sweep."""
    depth = np.zeros(len(df), dtype=np.int64)
    if df.empty:
        return pd.Series(depth, index=df.index)
    ordered = df.assign(_pos=np.arange(len(df))).sort_values(
        ["start", "end"], ascending=[True, False]
    )
    for _, g in ordered.groupby(group, sort=False):
        stack: list[int] = []
        for pos, s, e in zip(g["_pos"].tolist(), g["start"].tolist(), g["end"].tolist()):
            while stack and stack[-1] <= s:
                stack.pop()
            depth[pos] = len(stack)
            stack.append(e)
    return pd.Series(depth, index=df.index)


@dataclass
class Trace:
    """What ran: kernels, memory operations, CUDA API calls, torch ops, NVTX ranges, OS runtime
    calls, and meta (device name, SM count, backend and version, capture window). Each row carries
    its process (``pid``) and each kernel and memory operation its GPU (``device``): a capture of
    several ranks is one Trace, its figures per process and GPU in ``analysis/ranks.py``."""

    kernels: pd.DataFrame = field(default_factory=lambda: empty_frame("kernels"))
    memops: pd.DataFrame = field(default_factory=lambda: empty_frame("memops"))
    api: pd.DataFrame = field(default_factory=lambda: empty_frame("api"))
    ops: pd.DataFrame = field(default_factory=lambda: empty_frame("ops"))
    nvtx: pd.DataFrame = field(default_factory=lambda: empty_frame("nvtx"))
    osrt: pd.DataFrame = field(default_factory=lambda: empty_frame("osrt"))
    meta: dict[str, Any] = field(default_factory=dict)
    #: Reads the tables not given here on first use (an nsys export); None: every table is given.
    source: TableSource | None = field(default=None, repr=False, compare=False)

    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    _unread: set[str] = field(default_factory=set, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.source is not None:
            for table in self.source.tables:
                if self.__dict__[table].empty:  # not given: read on first access (__getattr__)
                    del self.__dict__[table]
                    self._unread.add(table)

    def __getattr__(self, name: str) -> Any:
        # only reached for what is not in the instance: a table the source has not been asked for
        # yet
        unread = self.__dict__.get("_unread")
        if unread is not None and name in unread:
            table = self.source.read(name)  # type: ignore[union-attr]
            if list(table.columns) != COLUMNS[name]:
                table = frame(name, table)
            self.__dict__[name] = table
            unread.discard(name)
            return table
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: object) -> None:
        # a replaced table makes every kept answer stale (tables are replaced, never edited in
        # place)
        if name in COLUMNS and "_memo" in self.__dict__:
            self._memo.clear()
            self._unread.discard(name)
        super().__setattr__(name, value)

    def __getstate__(self) -> dict[str, Any]:
        # a pickle or a deep copy holds every table (read now), not the open export
        for table in list(self._unread):
            getattr(self, table)
        return {k: v for k, v in self.__dict__.items() if k != "source"} | {"source": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update({"_memo": {}, "_unread": set(), "source": None, **state})

    # --- what the capture recorded
    # ---------------------------------------------------------------------------
    def recorded(self, kind: str) -> bool:
        """Whether the capture recorded ``kind`` (a name in COLUMNS): an empty table it recorded is
        a fact (no kernel ran), one it did not is unknown. The loaders say which in
        ``meta["recorded"]``; a Trace whose meta does not say (built from given tables) recorded
        every kind."""
        recorded = self.meta.get("recorded")
        return True if recorded is None else kind in recorded

    def not_recorded(self, kind: str, detail: str = "") -> str | None:
        """None where the capture recorded ``kind``; else the sentence a user reads: that the
        capture did not record it, how that shows, and how to record it. ``detail`` (what follows
        from it) goes before the how."""
        return None if self.recorded(kind) else coverage.not_recorded_in(self.meta, kind, detail)

    def recordable(self, kind: str) -> bool:
        """Whether the capture's backend records ``kind`` at all (nsys records no torch ops,
        torch.profiler no OS runtime calls); True where the backend is not one gpumagic knows."""
        return coverage.recordable(str(self.meta.get("backend", "")), kind)

    def rows(self, table: str) -> int:
        """The row count of ``table``, without reading it from the source when it has not been read
        yet."""
        if table in self._unread:
            return self.source.count(table)  # type: ignore[union-attr]
        return len(getattr(self, table))

    def memo(self, key: str, compute: Callable[[], _T]) -> _T:
        """``compute()`` once per Trace under ``key``; later calls return the kept answer (analyses
        use it too)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return cast(_T, self._memo[key])

    def _table(
        self, key: str, compute: Callable[[], pd.DataFrame], needs: tuple[str, ...] = ()
    ) -> pd.DataFrame:
        """A summary, kept; where the capture did not record a kind it ``needs``, it carries the
        sentence that says so (``summaries.mark_not_recorded``): an empty table the capture did not
        record reads "not recorded", not 0."""

        def marked() -> pd.DataFrame:
            df = compute()
            missing = [s for s in (self.not_recorded(kind) for kind in needs) if s]
            return summaries.mark_not_recorded(df, " ".join(missing)) if missing else df

        return self.memo(
            key, marked
        ).copy()  # a copy: a caller's edit must not change the next answer

    # --- nsys stats summaries
    # ---------------------------------------------------------------------------------
    def _by_name(self, table: str, count_col: str) -> pd.DataFrame:
        """The duration summary of ``table`` by name: from the source's narrow read while the table
        is unread."""
        narrow = self.source.durations(table) if table in self._unread else None  # type: ignore[union-attr]
        if narrow is not None:
            codes, durations, names = narrow
            return summaries.grouped_durations(codes, durations, names, count_col, ["Name"])
        return summaries.duration_summary(getattr(self, table), ["name"], count_col, ["Name"])

    def kernel_summary(self) -> pd.DataFrame:
        """cuda_gpu_kern_sum: one row per kernel name."""
        return self._table("kern", lambda: self._by_name("kernels", "Instances"), ("kernels",))

    def api_summary(self) -> pd.DataFrame:
        """cuda_api_sum: one row per CUDA runtime/driver API function."""
        return self._table("api", lambda: self._by_name("api", "Num Calls"), ("api",))

    def osrt_summary(self) -> pd.DataFrame:
        """osrt_sum: one row per OS runtime function (nsys captures only)."""
        return self._table("osrt", lambda: self._by_name("osrt", "Num Calls"), ("osrt",))

    def nvtx_summary(self) -> pd.DataFrame:
        """nvtx_sum: one row per range text and style (push/pop or start/end)."""

        def compute() -> pd.DataFrame:
            nv = self.nvtx.assign(style=self.nvtx["style"].fillna("PushPop"))
            return summaries.duration_summary(
                nv, ["style", "text"], "Instances", ["Style", "Range"]
            )

        return self._table("nvtx", compute, ("nvtx",))

    def memop_summary(self) -> pd.DataFrame:
        """cuda_gpu_mem_time_sum: one row per memory operation kind."""

        def compute() -> pd.DataFrame:
            df = self.memops.assign(_op=self.memops["kind"].map(summaries.nsys_memop_name))
            return summaries.duration_summary(df, ["_op"], "Count", ["Operation"])

        return self._table("memop", compute, ("memops",))

    def memop_size_summary(self) -> pd.DataFrame:
        """cuda_gpu_mem_size_sum: bytes moved per memory operation kind, in MB (10^6 bytes) as nsys
        prints them."""
        return self._table(
            "memop_size", lambda: summaries.memop_size_summary(self.memops), ("memops",)
        )

    def op_summary(self) -> pd.DataFrame:
        """Torch ops by name: calls, CPU total, self CPU, and the GPU time of the kernels each
        launched (unknown, not 0, where the capture did not record kernels or the API calls that
        join them to ops)."""

        def compute() -> pd.DataFrame:
            df = summaries.op_summary(self.ops, self.kernels, self.api)
            if not (self.recorded("kernels") and self.recorded("api")):
                df["GPU (ns)"] = np.nan
            return df

        return self._table("ops", compute, ("ops", "kernels", "api"))

    # --- derived figures
    # --------------------------------------------------------------------------------------
    def gpu_intervals(self) -> pd.DataFrame:
        """Kernels and memory operations together: everything that occupies the GPU."""
        k = self.kernels[["start", "end"]]
        m = self.memops[["start", "end"]]
        return pd.concat([k, m], ignore_index=True) if not m.empty else k

    def gpu_busy_ns(self) -> int:
        """GPU busy: the union of kernel and memory-operation intervals (overlap counted once) on
        each GPU of each process, summed over them (one GPU: its union)."""

        def compute() -> int:
            codes, units = self.gpu_units()
            if len(units) <= 1:
                return union_ns(*self._gpu_arrays())
            return int(union_by_group(codes, *self._gpu_arrays(), len(units)).sum())

        return self.memo("gpu_busy", compute)

    def gpu_units(self) -> tuple[np.ndarray, pd.DataFrame]:
        """Where GPU work ran: each kernel's and memory operation's unit (in :meth:`gpu_intervals`'
        order: kernels, then memory operations), and the units as a frame of ``pid`` and ``device``
        (-1 where the capture does not say), sorted by them. A unit is one process's work on one
        GPU: several units make a multi-GPU trace."""

        def compute() -> tuple[np.ndarray, pd.DataFrame]:
            parts = [df for df in (self.kernels, self.memops) if not df.empty]
            if not parts:
                return np.empty(0, dtype=np.int64), pd.DataFrame(
                    {"pid": [], "device": []}, dtype="int64"
                )
            pid = np.concatenate([id_column(df["pid"]) for df in parts])
            device = np.concatenate([id_column(df["device"]) for df in parts])
            if (pid == pid[0]).all() and (
                device == device[0]
            ).all():  # the usual case: one process, one GPU
                return np.zeros(len(pid), dtype=np.int64), pd.DataFrame(
                    {"pid": pid[:1], "device": device[:1]}
                )
            # one int64 per (pid, device): pids are under 2^24 (nsys packs them so), device numbers
            # small
            codes, uniques = pd.factorize((pid + 1) << 24 | (device + 1), sort=True)
            units = pd.DataFrame({"pid": (uniques >> 24) - 1, "device": (uniques & 0xFFFFFF) - 1})
            return codes.astype(np.int64, copy=False), units.astype("int64")

        return self.memo("gpu_units", compute)

    def _gpu_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Starts and ends of the kernels and memory operations, as int64 arrays (kept: several
        figures read them)."""

        def compute() -> tuple[np.ndarray, np.ndarray]:
            parts = [df for df in (self.kernels, self.memops) if not df.empty]
            if not parts:
                return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
            return tuple(  # type: ignore[return-value]  # two columns make two arrays
                np.concatenate([df[c].to_numpy(dtype="int64") for df in parts])
                for c in ("start", "end")
            )

        return self.memo("gpu_arrays", compute)

    def cpu_ops_ns(self, start: int | None = None, end: int | None = None) -> int:
        """Host time inside top-level torch ops (nested ops counted once); between ``start`` and
        ``end`` where given (the analysis window: a CPU figure set beside the window's GPU figures
        is taken over the same span)."""

        def compute() -> int:
            top = self.ops[self.ops["depth"] == 0] if not self.ops.empty else self.ops
            s, e = (top[c].to_numpy(dtype="int64") for c in ("start", "end"))
            if start is not None and end is not None:
                s, e = np.clip(s, start, end), np.clip(e, start, end)
            return union_ns(s, e)

        return self.memo(f"cpu_ops:{start}:{end}", compute)

    def figures(self) -> dict[str, Any]:
        """The figures the summary line and the findings share: ``window`` ("nvtx", "cuda" or
        "capture") and ``window_text`` (what it is, in words), ``wall_ns`` (its length),
        ``gpu_busy_ns`` (kernels and memory operations, overlap counted once, summed over GPUs),
        ``gpus`` (the GPUs, per process, that ran work), ``gpu_util`` (busy / wall; None with
        several GPUs, whose ranges differ: their shares are per rank, in
        :func:`gpumagic.analysis.ranks.rank_figures`), ``kernel_ns`` (the kernels' summed time, the
        total of every "% of kernel time"), ``cpu_ops_ns``, ``kernels``, ``memops``, and
        ``unrecorded``: the kinds GPU busy is made of (kernels, memory operations) that the capture
        did not record. Where it names any, GPU busy is not known: ``gpu_util`` is None, and nothing
        may say the GPU was busy or idle (its ``gpu_busy_ns`` counts only what was recorded)."""
        meta = self.meta
        key = f"figures:{meta.get('label')}:{meta.get('window')}:{meta.get('window_kind')}"
        return dict(self.memo(key, self._figures))

    def _figures(self) -> dict[str, Any]:
        w0, w1, kind = self.analysis_window()
        wall = max(0, w1 - w0)
        busy = self.gpu_busy_ns()
        gpus = max(1, len(self.gpu_units()[1]))
        unrecorded = [kind for kind in ("kernels", "memops") if not self.recorded(kind)]
        return {
            "window": kind,
            "window_text": self.meta.get("window_text") or WINDOW_TEXT[kind],
            "wall_ns": wall,
            "gpu_busy_ns": busy,
            "gpus": gpus,
            "gpu_util": busy / wall if wall and gpus == 1 and not unrecorded else None,
            "unrecorded": unrecorded,
            "kernel_ns": int((self.kernels["end"] - self.kernels["start"]).sum())
            if not self.kernels.empty
            else 0,
            "cpu_ops_ns": self.cpu_ops_ns(w0, w1),
            "kernels": len(self.kernels),
            "memops": len(self.memops),
        }

    def window(self) -> tuple[int, int]:
        """The capture window: meta's when given, else the span of everything recorded."""
        if "window" in self.meta:
            s, e = self.meta["window"]
            return int(s), int(e)
        spans = [
            df
            for df in (self.kernels, self.memops, self.api, self.ops, self.nvtx, self.osrt)
            if not df.empty
        ]
        if not spans:
            return 0, 0
        return int(min(df["start"].min() for df in spans)), int(
            max(df["end"].max() for df in spans)
        )

    def analysis_window(self) -> tuple[int, int, str]:
        """The span the cell's figures are taken over, and what it is: the cell's NVTX /
        record_function range (named in meta['label']), extended to the end of the GPU work launched
        inside it (launches are asynchronous); else the span of the CUDA activity (first CUDA API
        call or GPU operation to the last GPU operation's end); else the capture. Never the process
        lifetime: a whole-program nsys export would call Python's start-up idle GPU.
        """
        if (
            self.meta.get("window_kind") in WINDOW_TEXT and "window" in self.meta
        ):  # a loaded trace's (windows.py)
            return (
                int(self.meta["window"][0]),
                int(self.meta["window"][1]),
                self.meta["window_kind"],
            )
        label = self.meta.get("label")
        starts, ends = self._gpu_arrays()
        if label and not self.nvtx.empty:
            r = self.nvtx[self.nvtx["text"].astype(str).str.endswith(str(label))]
            if not r.empty:
                start, end = int(r["start"].min()), int(r["end"].max())
                after = ends[starts >= start]
                if len(after):
                    end = max(end, int(after.max()))
                return start, end, "nvtx"
        if len(starts):
            first = int(starts.min())
            if not self.api.empty:
                first = min(first, int(self.api["start"].min()))
            return first, int(ends.max()), "cuda"
        start, end = self.window()
        return start, end, "capture"

    def cell_window(self) -> tuple[int, int]:
        """(start, end) of :meth:`analysis_window`."""
        start, end, _ = self.analysis_window()
        return start, end

    def gpu_span_ns(self) -> int:
        """First GPU activity start to last GPU activity end."""
        iv = self.gpu_intervals()
        if iv.empty:
            return 0
        return int(iv["end"].max() - iv["start"].min())

    def by_module(self, model: TorchValue = None, memops: bool = True) -> pd.DataFrame:
        """GPU time by ``nn.Module``, forward and backward, the outside row making the total
        (``trace.code_rows``); ``model``, the live module, names the rows as the code does."""
        from .code_rows import by_module

        return by_module(self, model, memops)

    def by_line(self, memops: bool = True) -> pd.DataFrame:
        """GPU time by line of the cell (by function of the user's files in a loaded trace)."""
        from .code_rows import by_line

        return by_line(self, memops)

    # --- persistence
    # ------------------------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(
            {
                "meta": self.meta,
                **{
                    t: json.loads(getattr(self, t).to_json(orient="split", index=False))
                    for t in COLUMNS
                },
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Trace:
        data = json.loads(text)
        tables = {}
        for t in COLUMNS:
            d = data.get(t)
            tables[t] = (
                frame(t, pd.DataFrame(d["data"], columns=d["columns"]))
                if d and d["data"]
                else empty_frame(t)
            )
        return cls(meta=data.get("meta", {}), **tables)

    def __repr__(self) -> str:
        counts = [
            f"{self.rows(table)} {noun}" if self.recorded(table) else f"{noun} not recorded"
            for table, noun in (
                ("kernels", "kernels"),
                ("memops", "memops"),
                ("api", "API calls"),
                ("ops", "ops"),
                ("nvtx", "ranges"),
            )
        ]
        return (
            f"<Trace {self.meta.get('backend', '?')} on {self.meta.get('device', '?')}: "
            f"{', '.join(counts)}>"
        )
