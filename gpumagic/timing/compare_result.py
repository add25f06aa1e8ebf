"""Comparison: the result of :func:`gpumagic.compare`, one :class:`TimingResult` per statement and
the table over them.

The printed speed-up of a statement is the ratio of the two medians *as printed* (baseline over
statement), so a reader who divides the table's own numbers finds the speed-up it shows;
``to_dataframe()`` keeps the exact ratio of the unrounded medians (the two differ by at most the
rounding of the printed medians, ~0.5 %).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..edges import BokehModel, PrettyPrinter
from ..errors import Hint
from ..render.figure_page import FigurePage
from ..units import format_time
from .advice import Advised
from .result import TimingResult

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["INTERLEAVED_NOTE", "Comparison", "parse_time", "rate_cells"]

INTERLEAVED_NOTE = (
    "Timed interleaved: one sample of each statement per round, the order rotated each "
    "round, so a clock change "
    "or other work on the machine falls on all of them alike and does not favour one."
)
#: A number in a note (split out so that notes differing only in their numbers are said once).
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)")
_SCALE = {"s": 1.0, "ms": 1e-3, "\xb5s": 1e-6, "us": 1e-6, "ns": 1e-9}
_HEAD = [
    "Statement",
    "Median \u00b1 IQR",
    "Kernels",
    "Rate",
    "% of peak",
    "Energy",
    "Launch-bound",
    "Speed-up",
]
_ALWAYS = (
    0,
    1,
    7,
)  # the statement, its median and its speed-up: shown whatever the other columns hold
_ROOT_STYLE = (
    "font-family:var(--jp-ui-font-family,sans-serif);font-size:13px;max-width:100%;overflow-x:auto"
)
_CELL = "padding:2px 8px;text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums"
_NAME_CELL = "padding:2px 8px;text-align:left;white-space:nowrap"


def parse_time(text: str) -> float | None:
    """Seconds from a time as :func:`~gpumagic.units.format_time` prints it ('3.69 ms'); None for
    other forms."""
    number, _, unit = text.partition(" ")
    try:
        return float(number) * _SCALE[unit]
    except (KeyError, ValueError):
        return None


def rate_cells(result: TimingResult | None, prefer: str | None = None) -> tuple[str, str]:
    """(rate, share of its peak) as text: the rate nearer its ceiling, FLOP/s where no share is
    known; '—' where the work was not counted. ``prefer`` ("flop" or "byte") picks that rate where
    it was counted: a sweep's rows keep one unit, as its plot does."""
    from ..device_peaks.achieved import format_rate, format_share

    found = result.achieved if result is not None else None
    if found is None:
        return "\u2014", "\u2014"
    flop, byte = found.flop_rate, found.byte_rate
    fs, bs = found.flop_share, found.byte_share
    use_flop = flop is not None and (byte is None or fs is None or bs is None or fs >= bs)
    if prefer in ("flop", "byte") and (flop if prefer == "flop" else byte) is not None:
        use_flop = prefer == "flop"
    if use_flop:
        text = format_rate(flop, "FLOP/s") + (f" {found.precision}" if found.precision else "")
        return text, format_share(fs) if fs is not None else "\u2014"
    if byte is not None:
        return format_rate(byte, "B/s"), format_share(bs) if bs is not None else "\u2014"
    return "\u2014", "\u2014"


@dataclass
class Comparison(Advised, FigurePage):
    """Statements timed interleaved. ``results``: label -> :class:`TimingResult` (in the order
    given); ``baseline``: the label speed-ups are taken against; ``rounds``: how many rounds ran;
    ``orders``: the order of the statements in the first rounds (rotated each round);
    ``failed``: label -> what the statement raised during its samples ("ValueError: boom"), its
    row saying so in place of a median (its samples so far stay in ``results``)."""

    page_title = "gpumagic: comparison"

    results: dict[str, TimingResult]
    baseline: str
    interrupted: bool = False
    rounds: int = 0
    orders: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=lambda: [INTERLEAVED_NOTE])
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def labels(self) -> list[str]:
        return list(self.results)

    @property
    def device(self) -> str:
        return ", ".join(dict.fromkeys(r.device for r in self.results.values())) or "\u2014"

    @property
    def hints(self) -> list[Hint]:
        """The settings the results' notes advise, each once."""
        return list(dict.fromkeys(h for r in self.results.values() for h in r.hints))

    def speedup(self, label: str) -> float | None:
        """Baseline median over ``label``'s median (exact; the table prints the ratio of its printed
        medians)."""
        base, this = self.results[self.baseline], self.results[label]
        if not base.samples or not this.samples or this.median <= 0:
            return None
        if self.failed.keys() & {label, self.baseline}:  # no median of a statement that failed
            return None
        return base.median / this.median

    # --- the table
    # --------------------------------------------------------------------------------------------
    def _median_text(self, r: TimingResult) -> str:
        return format_time(r.median, r.precision) if r.samples else "\u2014"

    def _speedup_text(self, label: str) -> str:
        if label == self.baseline:
            return "1\u00d7 (baseline)"
        base, this = self.results[self.baseline], self.results[label]
        if not base.samples or not this.samples or self.failed.keys() & {label, self.baseline}:
            return "\u2014"
        shown_base, shown_this = (
            parse_time(self._median_text(base)),
            parse_time(self._median_text(this)),
        )
        if shown_base and shown_this:
            return f"{shown_base / shown_this:.3g}\u00d7"
        ratio = self.speedup(label)
        return f"{ratio:.3g}\u00d7" if ratio is not None else "\u2014"

    def rows(self) -> list[list[str]]:
        """The table's cells, one row per statement, as printed."""
        out = []
        for label, r in self.results.items():
            if label in self.failed:
                dash = ["\u2014"] * (len(_HEAD) - 3)
                out.append([label, f"failed: {self.failed[label]}", *dash, "\u2014"])
                continue
            med = self._median_text(r)
            spread = (
                f"{med} \u00b1 {format_time(r.iqr, r.precision)}" if r.samples else "no samples"
            )
            kernels = (
                format_time(r.kernel_time, r.precision) if r.kernel_time is not None else "\u2014"
            )
            rate, share = rate_cells(r)
            bound = (
                "\u2014"
                if r.kernel_time is None or r.host_per_call is None
                else "yes"
                if r.launch_bound
                else "no"
            )
            energy = r.energy
            joules = "\u2014" if energy is None else energy.segment(getattr(r.work, "flops", None))
            out.append(
                [label, spread, kernels, rate, share, joules, bound, self._speedup_text(label)]
            )
        return out

    def summary_line(self) -> str:
        n = len(self.results)
        stop = " (interrupted)" if self.interrupted else ""
        if self.failed:
            stop += f" ({', '.join(map(repr, self.failed))} failed: the rest stopped there)"
        return (
            f"{n} statement{'s' if n != 1 else ''} on {self.device}, per call; speed-up "
            f"against {self.baseline!r}{stop}"
        )

    def warnings(self) -> list[str]:
        """Each statement's own notes and warnings, labelled; one that several statements share (the
        same words, other numbers) is said once, with their labels and each differing number as
        ``2%/8%/16%``."""
        groups: dict[tuple[str, ...], list[tuple[str, list[str]]]] = {}
        for label, r in self.results.items():
            if label in self.failed:  # its row says why; an interrupted run's notes are not its
                continue
            for text in r.warnings():
                parts = _NUMBER.split(text)
                groups.setdefault(tuple(parts[0::2]), []).append((label, parts))
        out = []
        for said in groups.values():
            labels = ", ".join(dict.fromkeys(label for label, _ in said))
            parts = [
                part if i % 2 == 0 else "/".join(dict.fromkeys(p[i] for _, p in said))
                for i, part in enumerate(said[0][1])
            ]
            out.append(f"{labels}: {''.join(parts)}")
        return out

    def _shown(self) -> tuple[list[str], list[list[str]]]:
        """The head and rows as shown: a column with nothing to say in any row (kernel time on the
        host clock) is left out; the statement, the median and the speed-up always stay."""
        rows = self.rows()
        keep = [
            i for i in range(len(_HEAD)) if i in _ALWAYS or any(row[i] != "\u2014" for row in rows)
        ]
        return [_HEAD[i] for i in keep], [[row[i] for i in keep] for row in rows]

    def __str__(self) -> str:
        head, body = self._shown()
        rows = [head, *body]
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        lines = [self.summary_line()]
        for row in rows:
            cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
            lines.append("  " + "  ".join(cells).rstrip())
        lines += [f"  {n}" for n in self.notes]
        lines += [f"  {w}" for w in self.warnings()]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, p: PrettyPrinter, cycle: bool) -> None:
        p.text(str(self))

    # --- data
    # ----------------------------------------------------------------------------------------------
    def to_dataframe(self) -> pd.DataFrame:
        """One row per statement: label, median, iqr, kernel_time (seconds), rates and shares of
        peak, launch_bound, speedup (exact: baseline median / median), samples. ``df.attrs``:
        baseline, rounds, interleaved."""
        import pandas as pd

        records = []
        for label, r in self.results.items():
            found = r.achieved
            figures = found.summary() if found is not None else {}
            measured = bool(r.samples) and label not in self.failed
            records.append(
                {
                    "label": label,
                    "median": r.median if measured else None,
                    "iqr": r.iqr if measured else None,
                    "kernel_time": r.kernel_time,
                    "host_per_call": r.host_per_call,
                    "flop_rate": figures.get("flop_rate"),
                    "byte_rate": figures.get("byte_rate"),
                    "flop_share": figures.get("flop_share"),
                    "energy_per_call": r.energy.joules_per_call if r.energy else None,
                    "power_w": r.energy.watts if r.energy else None,
                    "byte_share": figures.get("byte_share"),
                    "precision": figures.get("precision"),
                    "launch_bound": r.launch_bound,
                    "speedup": self.speedup(label),
                    "baseline": label == self.baseline,
                    "samples": len(r.samples),
                    "calls_per_sample": r.calls_per_sample,
                    "device": r.device,
                    "error": self.failed.get(label),
                }
            )
        df = pd.DataFrame.from_records(records)
        df.attrs.update({"baseline": self.baseline, "rounds": self.rounds, "interleaved": True})
        return df

    # --- HTML
    # ----------------------------------------------------------------------------------------------
    def figure(self) -> BokehModel:
        """The Bokeh bar chart of the medians, the baseline marked."""
        from ..render.compare_plot import compare_figure

        bars = [
            {
                "label": label,
                "median": r.median,
                "text": row[1],
                "speedup": row[7],
                "rate": row[3] if row[3] != "\u2014" else "",
                "baseline": label == self.baseline,
            }
            for (label, r), row in zip(self.results.items(), self.rows())
            if r.samples and label not in self.failed
        ]
        return compare_figure(bars, title=f"Median per call on {self.device}")

    def _table_html(self) -> str:
        esc = html.escape
        shown_head, shown_rows = self._shown()
        head = "".join(
            f"<th style='{_NAME_CELL if i == 0 else _CELL}'>{esc(h)}</th>"
            for i, h in enumerate(shown_head)
        )
        body = []
        for row in shown_rows:
            bold = "font-weight:600;" if row[0] == self.baseline else ""
            cells = f"<td style='{_NAME_CELL};{bold}'>{esc(row[0])}</td>"
            cells += "".join(f"<td style='{_CELL}'>{esc(c)}</td>" for c in row[1:])
            body.append(f"<tr>{cells}</tr>")
        return (
            f"<table "
            f"class='gm-compare'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )

    def html(self, figure: str | None = "iframe") -> str:
        """The table, notes and chart as HTML; ``figure``: "notebook" (BokehJS once per kernel
        session), "iframe", "page" (for a page that loads BokehJS), or None (no chart)."""
        from ..render.figure_modes import figure_html

        esc = html.escape
        parts = [
            f"<div style='font-weight:600;margin:4px 0'>{esc(self.summary_line())}</div>",
            self._table_html(),
        ]
        parts += [
            f"<div style='margin:2px 0;opacity:.8'>\u2139\ufe0f {esc(n)}</div>" for n in self.notes
        ]
        parts += [f"<div style='margin:2px 0'>\u26a0 {esc(w)}</div>" for w in self.warnings()]
        if figure and any(r.samples for r in self.results.values()):
            parts.append(figure_html(self.figure(), figure, "gpumagic: comparison"))
        return (
            f"<div class='gm-report gm-compare-report' style='{_ROOT_STYLE}'>{''.join(parts)}</div>"
        )
