"""Sweep: the result of :func:`gpumagic.sweep`, one :class:`TimingResult` per point and statement,
and the plot.

The plot has one axis and one unit for all its lines: TFLOP/s (or GFLOP/s) where every measured
point counted FLOPs, else bytes per second where every one counted bytes, else the time per call; a
line per statement (and per combination of the other parameters, where several vary), the device's
peak for that rate as a dashed line where the peaks table knows it. The x axis is the first
parameter that takes several values.
"""

from __future__ import annotations

import html
import math
import numbers
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..edges import BokehModel, PrettyPrinter
from ..errors import Hint
from ..render.figure_page import FigurePage
from ..units import format_time
from .advice import Advised
from .compare_result import rate_cells
from .measure import LONGER_RUN
from .passes import PROFILER_START
from .result import TimingResult
from .stats import median_ci

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Sweep", "SweepPoint"]

_ROOT_STYLE = (
    "font-family:var(--jp-ui-font-family,sans-serif);font-size:13px;max-width:100%;overflow-x:auto"
)
_CELL = "padding:2px 8px;text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums"
_TEXT_CELL = "padding:2px 8px;text-align:left;white-space:nowrap"
_FAILED = "color:#b22222"
_COLUMNS = [
    "label",
    "median",
    "iqr",
    "kernel_time",
    "flop_rate",
    "byte_rate",
    "flop_share",
    "byte_share",
    "precision",
    "energy_per_call",
    "power_w",
]
_COLUMNS += ["launch_bound", "samples", "stop_reason", "status", "error"]


#: A point whose median is known within ± this share (95% CI) is exact for a curve: a point that
#: ended at its (shrunk) budget within it is not worth a warning, though the stop rule asks for
#: ±0.5%.
CURVE_CI = 0.01


def _ci_share(result: TimingResult) -> float:
    """The half-width of the median's 95% confidence interval, as a share of the median."""
    if not result.samples or result.median <= 0:
        return math.inf
    lo, hi = median_ci(result.samples)
    return (hi - lo) / 2 / result.median


def _median_text(result: TimingResult) -> str:
    """'1.23 ms ± 4.5 µs', as the table and the plot's hover show a point."""
    return (
        f"{format_time(result.median, result.precision)} \u00b1 "
        f"{format_time(result.iqr, result.precision)}"
    )


@dataclass
class SweepPoint:
    """One statement at one point: the parameter values, the statement's label, its result (None
    where it failed), ``status`` ("ok", "failed", "out of memory" or "interrupted") and the error's
    first line."""

    params: dict[str, object]
    label: str
    result: TimingResult | None
    status: str = "ok"
    error: str = ""

    @property
    def timed(self) -> TimingResult | None:
        """The result where it holds samples (an interrupted point keeps what it measured), else
        None: the one a median, a rate or an energy is read from."""
        return self.result if self.result is not None and self.result.samples else None

    @property
    def measured(self) -> bool:
        return self.timed is not None


@dataclass
class Sweep(Advised, FigurePage):
    """Statements timed over a grid of parameters. ``points`` in the order they ran; ``params`` the
    parameter names; ``labels`` the statements'; ``planned`` how many (point, statement)
    measurements the grid holds."""

    page_title = "gpumagic: sweep"

    points: list[SweepPoint]
    params: list[str]
    labels: list[str]
    planned: int = 0
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def device(self) -> str:
        found = dict.fromkeys(p.result.device for p in self.points if p.result is not None)
        return ", ".join(found) or "\u2014"

    @property
    def hints(self) -> list[Hint]:
        """The settings the results' notes and :meth:`warnings` advise, each once."""
        found = [h for p in self.points if p.result is not None for h in p.result.hints]
        return list(dict.fromkeys(found + ([LONGER_RUN] if self.warnings() else [])))

    @property
    def x_param(self) -> str | None:
        """The parameter on the x axis: the first that takes more than one value (else the
        first)."""
        for name in self.params:
            if len({repr(p.params[name]) for p in self.points}) > 1:
                return name
        return self.params[0] if self.params else None

    def metric(self, label: str | None = None) -> str:
        """ "flop" where every measured point (of ``label``, or of all) counted FLOPs, "byte" where
         every one
        counted bytes, else "time"."""
        found = [
            r.achieved
            for p, r in self._timed()
            if p.status == "ok" and (label is None or p.label == label)
        ]
        if found and all(a is not None and a.flop_rate for a in found):
            return "flop"
        if found and all(a is not None and a.byte_rate for a in found):
            return "byte"
        return "time"

    # --- data
    # ----------------------------------------------------------------------------------------------
    def _timed(self) -> list[tuple[SweepPoint, TimingResult]]:
        """Each point that measured, with its result."""
        return [(p, p.result) for p in self.points if p.result is not None and p.result.samples]

    def to_dataframe(self) -> pd.DataFrame:  # pandas loads on first use
        """One row per point and statement: the parameters, label, median, iqr, kernel_time
        (seconds), flop_rate, byte_rate (per second), flop_share, byte_share, precision,
        energy_per_call (J) and power_w (--energy), launch_bound, samples, status, error."""
        import pandas as pd

        records = [_record(p) for p in self.points]
        df = pd.DataFrame.from_records(records, columns=[*self.params, *_COLUMNS])
        df.attrs.update(
            {"params": list(self.params), "device": self.device, "interrupted": self.interrupted}
        )
        return df

    # --- text
    # ----------------------------------------------------------------------------------------------
    def _head(self) -> list[str]:
        head = [*self.params]
        if len(self.labels) > 1:
            head.append("Statement")
        return [*head, "Median \u00b1 IQR", "Rate", "% of peak", "Energy", "Status"]

    def rows(self) -> list[list[str]]:
        """The table's cells, one row per point and statement, as printed."""
        out = []
        metric = {
            label: self.metric(label) for label in self.labels
        }  # each statement's rows in one unit
        for p in self.points:
            cells = [str(p.params[name]) for name in self.params]
            if len(self.labels) > 1:
                cells.append(p.label)
            r = p.timed
            cells.append(_median_text(r) if r is not None else "\u2014")
            cells.extend(rate_cells(r, prefer=metric.get(p.label)))
            energy = r.energy if r is not None else None
            flops = r.work.flops if r is not None and r.work is not None else None
            cells.append("\u2014" if energy is None else energy.segment(flops))
            cells.append(p.status + (f": {p.error}" if p.error else ""))
            out.append(cells)
        return out

    def summary_line(self) -> str:
        x = self.x_param
        values = [p.params[x] for p in self.points] if x else []
        span = (
            f" ({x}: {values[0]} \u2026 {values[-1]})" if values and values[0] != values[-1] else ""
        )
        n = len(self.labels)
        what = f"{n} statements" if n > 1 else repr(self.labels[0]) if self.labels else "nothing"
        done = sum(p.status == "ok" for p in self.points)
        failed = len(self.points) - done
        tail = f"; {failed} failed" if failed else ""
        if self.interrupted:
            tail += f"; interrupted after {done} of {self.planned}"
        where = f" on {self.device}" if self.device != "\u2014" else ""
        return f"Sweep of {what} over {len(self.points)} measurements{where}{span}{tail}"

    def warnings(self) -> list[str]:
        """What qualifies the figures: points whose median had not settled when their budget ended;
        and where the sweep's time went to the profiler's one-time start (seconds, at the first
        point that needed kernel time)."""
        out = [
            f"{self._point_name(p)}: {note}"
            for p in self.points
            if p.result is not None
            for note in p.result.notes
            if PROFILER_START in note
        ]
        ended = [r for _, r in self._timed() if r.stop_reason.startswith("time budget")]
        loose = [r for r in ended if _ci_share(r) > CURVE_CI]
        if loose:
            out.append(
                f"{len(loose)} of {len(self.points)} points ended at their time budget with "
                f"their median known only "
                f"to more than \u00b1{CURVE_CI:.0%} (to_dataframe()['stop_reason'] says why); "
                f"a longer run: "
                f"{LONGER_RUN.script()}"
            )
        return out

    def _point_name(self, p: SweepPoint) -> str:
        where = ", ".join(f"{k}={v}" for k, v in p.params.items())
        return f"{p.label} at {where}" if len(self.labels) > 1 else f"at {where}"

    def _shown(self) -> tuple[list[str], list[list[str]]]:
        """The head and rows as shown: the rate and % of peak columns are left out where no point
        has one (a sweep on the CPU has no peak; a statement without counted work has no rate)."""
        head, rows = self._head(), self.rows()
        optional = {head.index("Rate"), head.index("% of peak"), head.index("Energy")}
        keep = [
            i
            for i in range(len(head))
            if i not in optional or any(row[i] != "\u2014" for row in rows)
        ]
        return [head[i] for i in keep], [[row[i] for i in keep] for row in rows]

    @staticmethod
    def _text_columns(head: list[str]) -> set[int]:
        """Columns of words, aligned left (the statement's label, the status); numbers align
        right."""
        return {i for i, h in enumerate(head) if h in ("Statement", "Status")}

    def __str__(self) -> str:
        head, body = self._shown()
        rows = [head, *body]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        texts = self._text_columns(head)
        lines = [self.summary_line()]
        for row in rows:
            cells = [
                c.ljust(w) if i in texts else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths))
            ]
            lines.append("  " + "  ".join(cells).rstrip())
        lines += [f"  {n}" for n in [*self.notes, *self.warnings()]]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, p: PrettyPrinter, cycle: bool) -> None:
        p.text(str(self))

    # --- plot and HTML
    # ----------------------------------------------------------------------------------------
    def _series_name(self, p: SweepPoint) -> str:
        others = [
            f"{k}={p.params[k]}" for k in self.params if k != self.x_param and self._varies(k)
        ]
        parts = ([p.label] if len(self.labels) > 1 or not others else []) + others
        return " \u00b7 ".join(parts)

    def _varies(self, name: str) -> bool:
        return len({repr(p.params[name]) for p in self.points}) > 1

    def plot_data(self) -> dict[str, Any]:  # Any: plain values of several types, for Bokeh
        """What the plot draws, as plain values: series (name -> x, y and hover texts), failed
        points, peaks, the metric and the x parameter (see
        :func:`gpumagic.render.sweep_plot.sweep_figure`)."""
        metric, x = self.metric(), self.x_param
        series: dict[str, dict[str, list[Any]]] = {}
        failed: dict[str, list[Any]] = {"x": [], "label": [], "error": []}
        peaks: dict[float, str] = {}
        for p in self.points:
            xv = p.params[x] if x else 0
            xv = xv if isinstance(xv, numbers.Real) and not isinstance(xv, bool) else str(xv)
            r = p.timed
            if r is None:
                failed["x"].append(xv)
                failed["label"].append(self._series_name(p))
                failed["error"].append(p.status + (f": {p.error}" if p.error else ""))
                continue
            found = r.achieved
            value = {
                "flop": found.flop_rate if found else None,
                "byte": found.byte_rate if found else None,
            }.get(metric, r.median)
            s = series.setdefault(
                self._series_name(p), {k: [] for k in ("x", "y", "params", "median", "rate")}
            )
            s["x"].append(xv)
            s["y"].append(value)
            s["params"].append(", ".join(f"{k}={v}" for k, v in p.params.items()))
            s["median"].append(_median_text(r))
            s["rate"].append(
                "; ".join(found.segments()) if found is not None else "no work counted"
            )
            if found is not None and metric == "flop" and found.flop_peak:
                peaks.setdefault(found.flop_peak, found.flop_label)
            elif found is not None and metric == "byte" and found.bandwidth:
                peaks.setdefault(found.bandwidth, found.byte_label)
        return {"series": series, "failed": failed, "peaks": peaks, "metric": metric, "x": x or ""}

    def figure(self) -> BokehModel:
        """The Bokeh plot: rate (or time) against the x parameter, one line per statement, the peak
        dashed."""
        from ..render.sweep_plot import sweep_figure

        data = self.plot_data()
        return sweep_figure(**data, title=f"Sweep on {self.device}")

    def _table_html(self) -> str:
        esc = html.escape
        head, shown = self._shown()
        texts = self._text_columns(head)
        th = "".join(
            f"<th style='{_TEXT_CELL if i in texts else _CELL}'>{esc(h)}</th>"
            for i, h in enumerate(head)
        )
        body = []
        for p, row in zip(self.points, shown):
            style = _FAILED if p.status != "ok" else ""
            cells = "".join(
                f"<td style='{_TEXT_CELL if i in texts else _CELL};{style}'>{esc(c)}</td>"
                for i, c in enumerate(row)
            )
            body.append(f"<tr>{cells}</tr>")
        return (
            f"<table "
            f"class='gm-sweep'><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )

    def html(self, figure: str | None = "iframe") -> str:
        """The plot, then the table; ``figure``: "notebook" (BokehJS once per kernel session),
        "iframe", "page", or None (the table alone)."""
        from ..render.figure_modes import figure_html

        esc = html.escape
        parts = [f"<div style='font-weight:600;margin:4px 0'>{esc(self.summary_line())}</div>"]
        if figure and any(p.measured for p in self.points):
            parts.append(figure_html(self.figure(), figure, "gpumagic: sweep"))
        shown = " open" if any(p.status != "ok" for p in self.points) or not figure else ""
        parts.append(f"<details{shown}><summary>all points</summary>{self._table_html()}</details>")
        parts += [
            f"<div style='margin:2px 0;opacity:.8'>\u2139\ufe0f {esc(n)}</div>" for n in self.notes
        ]
        parts += [f"<div style='margin:2px 0'>\u26a0 {esc(w)}</div>" for w in self.warnings()]
        return (
            f"<div class='gm-report gm-sweep-report' style='{_ROOT_STYLE}'>{''.join(parts)}</div>"
        )


def _record(p: SweepPoint) -> dict[str, Any]:
    """The point's row of :meth:`Sweep.to_dataframe`: its parameters, then :data:`_COLUMNS` (None
    where it measured nothing). Any: the user's parameter values, and figures of several types."""
    r, timed = p.result, p.timed
    achieved = timed.achieved if timed is not None else None
    figures = achieved.summary() if achieved is not None else {}
    energy = timed.energy if timed is not None else None
    return {
        **p.params,
        "label": p.label,
        "median": timed.median if timed is not None else None,
        "iqr": timed.iqr if timed is not None else None,
        "kernel_time": r.kernel_time if r is not None else None,
        "flop_rate": figures.get("flop_rate"),
        "byte_rate": figures.get("byte_rate"),
        "flop_share": figures.get("flop_share"),
        "byte_share": figures.get("byte_share"),
        "precision": figures.get("precision"),
        "energy_per_call": energy.joules_per_call if energy else None,
        "power_w": energy.watts if energy else None,
        "launch_bound": timed.launch_bound if timed is not None else None,
        "samples": len(r.samples) if r is not None else 0,
        "stop_reason": r.stop_reason if r is not None else "",
        "status": p.status,
        "error": p.error,
    }
