"""Results as rows of the store, and back: the one place that knows which figures a row keeps.

A row is read from what every result already says about itself (``samples``, ``summary()``,
``meta``, ``device``, ``backend``, ``sample_clocks``):
:class:`~gpumagic.timing.result.TimingResult`, and each statement of a ``Comparison`` or a
``Sweep``. Samples are kept compactly and exactly: float64, little-endian, in a BLOB (8 bytes a
sample, 4 KB for 500: a JSON list would be ~2.5 times that); SM clocks as uint16 MHz.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import uuid
from array import array
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..timing.result import TimingResult

__all__ = [
    "FIGURES",
    "RESULT_COLUMNS",
    "one_line",
    "pack_clocks",
    "pack_samples",
    "result_row",
    "row_start",
    "statement_key",
    "unpack_clocks",
    "unpack_samples",
]

#: The figures of ``TimingResult.summary()`` kept as columns (the rest go to ``extra``, as JSON).
FIGURES = (
    "median",
    "iqr",
    "mean",
    "min",
    "kernel_time",
    "host_per_call",
    "first_call",
    "flops",
    "bytes",
    "flop_rate",
    "byte_rate",
    "flop_share",
    "byte_share",
    "precision_class",
    "sm_clock_low",
    "sm_clock_high",
    "sm_clock_prevailing",
)
_NOT_EXTRA = {*FIGURES, "device", "backend", "samples", "calls_per_sample"}
#: Which saved result a row is and what it measured, as every listing of results names them, in
#: this order: ``gpumagic.history()``'s table and its CSV, and a baseline file. One tuple, so that a
#: column added here is shown and exported alike.
RESULT_COLUMNS = (
    "id",
    "created",
    "label",
    "statement",
    "kind",
    "variant",
    "params",
    "median",
    "iqr",
    "n_samples",
    "calls_per_sample",
)


def _little(values: array[Any]) -> bytes:  # Any: int or float arrays
    if sys.byteorder != "little":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def pack_samples(samples: Iterable[float]) -> bytes:
    return _little(array("d", [float(s) for s in samples]))


def unpack_samples(blob: bytes | bytearray | memoryview | None) -> list[float]:
    values = array("d")
    values.frombytes(blob or b"")
    if sys.byteorder != "little":
        values.byteswap()
    return values.tolist()


def pack_clocks(clocks: Iterable[int | None] | None, n: int) -> bytes | None:
    """The per-sample SM clocks (MHz) where every sample has one, else None."""
    clocks = list(clocks or [])
    if len(clocks) != n or n == 0 or any(c is None or not 0 <= c < 65536 for c in clocks):
        return None
    known = [int(c) for c in clocks if c is not None]  # every one: a None returned above
    return _little(array("H", known))


def unpack_clocks(blob: bytes | None) -> list[int] | None:
    if not blob:
        return None
    values = array("H")
    values.frombytes(blob)
    if sys.byteorder != "little":
        values.byteswap()
    return values.tolist()


def statement_key(statement: str) -> str:
    """What "the same statement" means: the same text, whitespace at its ends aside (a short hash,
    indexed)."""
    return hashlib.sha1(statement.strip().encode()).hexdigest()[:20]


def one_line(text: object, width: int) -> str:
    """``text`` on one line (its white space folded), cut to ``width`` characters with an ellipsis:
    how a statement is shown where a listing or a note gives it one line."""
    one = " ".join(str(text or "").split())
    return one if len(one) <= width else one[: width - 1] + "\u2026"


def _plain(value: object) -> bool | int | float | str | None:
    """A value JSON and SQLite can hold (numbers stay numbers; NaN and the rest become text or
    None)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    try:
        number = float(value)  # type: ignore[arg-type]  # numpy scalars
        return number if math.isfinite(number) else None
    except (TypeError, ValueError):
        return str(value)


def row_start(
    context: Mapping[str, Any], kind: str, statement: str, label: str | None
) -> dict[str, Any]:
    """The columns every saved row starts with, whatever its kind: a new uid, the provenance, the
    kind, the label and the statement with its key. One place, so that a timing, a profile and a
    memory run are named and found by the same columns."""
    return {
        "uid": uuid.uuid4().hex[:16],
        **dict(context),
        "kind": kind,
        "label": label,
        "statement": statement.strip(),
        "stmt_key": statement_key(statement),
    }


def result_row(
    result: TimingResult,
    statement: str,
    context: Mapping[str, Any],
    *,
    label: str | None = None,
    setup: str | None = None,
    kind: str = "gputime",
    run: str | None = None,
    variant: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The row of one result (a ``TimingResult`` or anything with its attributes); ``context`` holds
    the provenance (:func:`gpumagic.history.provenance.provenance`), shared by the rows of one
    run."""
    summary = result.summary()
    samples = list(result.samples)
    extra = {k: _plain(v) for k, v in summary.items() if k not in _NOT_EXTRA}
    return {
        **row_start(context, kind, statement, label),
        "run": run,
        "variant": variant,
        "params": json.dumps({k: _plain(v) for k, v in params.items()})
        if params is not None
        else None,
        "setup": setup,
        "samples": pack_samples(samples),
        "sample_clocks": pack_clocks(getattr(result, "sample_clocks", None), len(samples)),
        "n_samples": len(samples),
        "calls_per_sample": summary.get("calls_per_sample"),
        **{k: _plain(summary.get(k)) for k in FIGURES},
        "extra": json.dumps(extra, default=str),
    }
