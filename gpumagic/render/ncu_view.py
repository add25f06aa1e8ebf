"""NcuReport: what ``%%gpuprofile --ncu`` and ``gpumagic.load_ncu(path)`` show, as an object (the
reading is the capture layer's: ``capture.ncu.backend.load_ncu_data``; ``gpumagic.load_ncu`` joins
the two, in ``api/ncu.py``).

Per profiled kernel: its decoded name, duration, SM and memory throughput (% of peak, ncu's Speed Of
Light), achieved FLOP/s (the tensor cores' included where the report counted them), arithmetic
intensity, the limiter in words, the main math and how near its ceiling it ran (with tensor
counters), and ncu's own rule messages; then the roofline (``roofline.py``). A terminal gets the
same as text; ``to_dataframe()`` the figures; ``path`` the ``.ncu-rep``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol

import pandas as pd

from ..edges import BokehModel
from ..kernels.labels import distinct_labels
from ..units import format_si, format_time
from .figure_page import FigurePage
from .tables import breakable, esc

__all__ = ["LIMITER_WORDS", "TENSOR_WORDS", "NcuFigures", "NcuReport"]

#: The limiter of a kernel (``capture/ncu/read.py``'s verdict, after ncu's SOLBottleneck rule), in
#: words.
LIMITER_WORDS = {
    "compute": "compute-bound: the SM is the busiest unit",
    "memory": "memory-bound: the memory system is the busiest unit",
    "balanced": "compute and memory about equally busy",
    "latency": "latency-bound: neither compute nor memory reaches 60% of peak",
}
#: Said under the table when a kernel's main math ran on the tensor cores.
TENSOR_WORDS = (
    "tensor: the kernel's multiply-adds ran on the tensor cores (ncu's sm__ops_path_tensor "
    "counters, 2 FLOP per "
    "multiply-add); its % of peak is against that precision's dense tensor ceiling"
)


class NcuFigures(Protocol):
    """What the report reads of a profiled report (``capture.ncu.read.NcuData`` is one): read by the
    capture layer, shown here, so this module imports no reader."""

    raw: pd.DataFrame
    rules: pd.DataFrame
    path: str | None

    def kernels(self) -> pd.DataFrame: ...

    def ceilings(self) -> dict[str, float]: ...


_ROOT_STYLE = (
    "font-family:var(--jp-ui-font-family,sans-serif);font-size:13px;max-width:100%;overflow-x:auto"
)
_CELL = "padding:2px 8px;text-align:right;white-space:nowrap"
_NAME_CELL = (
    "padding:2px 8px;text-align:left;white-space:normal;overflow-wrap:normal;min-width:16em"
)
_HEAD = ["Kernel", "Duration", "SM %", "Memory %", "FLOP/s", "FLOP/byte", "Limiter"]


def _math(r: pd.Series) -> str:
    """The main math and its share of that math's peak, e.g. "bf16 tensor, 74% of peak"."""
    math_ = r.get("Math")
    if not isinstance(math_, str):
        return "n/a"
    pct = r.get("Peak %")
    return (
        f"{math_}, {pct:.0f}% of peak" if isinstance(pct, float) and math.isfinite(pct) else math_
    )


def _pct(value: float) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.1f}"


class NcuReport(FigurePage):
    """Nsight Compute's measurements of the profiled kernels. ``kernels()`` (one row per profiled
    launch, longest first), ``rules`` (ncu's messages), ``ceilings`` (the device's peaks at ncu's
    clocks), ``path`` (the report), ``phases`` (where the run's wall time went, seconds by phase),
    ``figure()`` (the Bokeh roofline), ``to_dataframe()``, ``save_html(path)``."""

    def __init__(
        self,
        data: NcuFigures,
        *,
        label: str | None = None,
        notes: Iterable[str] = (),
        seconds: float | None = None,
        phases: dict[str, float] | None = None,
    ) -> None:
        self.data = data
        self.label = label
        self.notes = list(notes)
        self.seconds = seconds
        self.phases = dict(phases or {})
        self._kernels: pd.DataFrame | None = None

    @property
    def path(self) -> str | None:
        return self.data.path

    @property
    def rules(self) -> pd.DataFrame:
        return self.data.rules

    @property
    def ceilings(self) -> dict[str, float]:
        return self.data.ceilings()

    def kernels(self) -> pd.DataFrame:
        """The figures per profiled launch, with ``Kernel``: the decoded short name (told apart
        where two share one)."""
        if self._kernels is None:
            k = self.data.kernels()
            labels = distinct_labels(k["Name"].astype(str))
            k.insert(1, "Kernel", [labels.get(n, n) for n in k["Name"].astype(str)])
            self._kernels = k.sort_values(
                "Duration (ns)", ascending=False, kind="stable"
            ).reset_index(drop=True)
        return self._kernels

    def to_dataframe(self) -> pd.DataFrame:
        return self.kernels().copy()

    def device(self) -> str:
        raw = self.data.raw
        for col in ("device__attribute_display_name", "Device"):
            if col in raw and len(raw):
                return str(raw[col].iloc[0])
        return "the GPU"

    def summary_line(self) -> str:
        n = len(self.kernels())
        total = self.kernels()["Duration (ns)"].sum()
        took = f"; captured in {self.seconds:.1f} s" if self.seconds is not None else ""
        label = f" of {self.label}" if self.label else ""
        return (
            f"Nsight Compute{label}: {n} kernel launch{'es' if n != 1 else ''} profiled on "
            f"{self.device()}, "
            f"{format_time(total * 1e-9)} of kernel time under ncu{took}"
        )

    def _rules_for(self, launch: int) -> list[tuple[str, str]]:
        r = self.rules
        if r.empty:
            return []
        rows = r[r["ID"] == launch] if r["ID"].notna().any() else r
        return [(str(x["Rule"]), str(x["Message"])) for _, x in rows.iterrows()]

    def _head(self) -> list[str]:
        """The table's columns: "Math" only where the report counted tensor-core work (else as it
        always was)."""
        return _HEAD + (["Math"] if "Math" in self.kernels() else [])

    def _words(self) -> list[str]:
        """The limiter words for the limiters in the table, and the tensor-core words where a kernel
        used them."""
        k = self.kernels()
        used = sorted({x for x in k["Limiter"] if isinstance(x, str)})
        words = [f"{x}: {LIMITER_WORDS[x]}" for x in used]
        if "Math" in k and any(isinstance(m, str) and m.endswith(" tensor") for m in k["Math"]):
            words.append(TENSOR_WORDS)
        return words

    def _row(self, r: pd.Series) -> list[str]:
        extra = [_math(r)] if "Math" in r.index else []
        return [
            str(r["Kernel"]),
            format_time(float(r["Duration (ns)"]) * 1e-9),
            _pct(r["SM %"]),
            _pct(r["Memory %"]),
            format_si(float(r["FLOP/s"]), "FLOP/s"),
            "n/a"
            if not math.isfinite(r["Intensity (FLOP/B)"])
            else f"{r['Intensity (FLOP/B)']:.3g}",
            str(r["Limiter"] or "n/a"),
            *extra,
        ]

    def __str__(self) -> str:
        lines = [self.summary_line()]
        rows = [self._row(r) for _, r in self.kernels().iterrows()]
        head = self._head()
        width = min(60, max([len(head[0])] + [len(x[0]) for x in rows]))
        lines.append(f"  {head[0]:<{width}}  " + "  ".join(f"{h:>10}" for h in head[1:]))
        for (_, r), cells in zip(self.kernels().iterrows(), rows, strict=True):
            name = cells[0] if len(cells[0]) <= width else cells[0][: width - 1] + "\u2026"
            lines.append(f"  {name:<{width}}  " + "  ".join(f"{c:>10}" for c in cells[1:]))
            lines += [f"      {rule}: {message}" for rule, message in self._rules_for(r["ID"])]
        lines += [f"  {w}" for w in self._words()]
        ceil = self.ceilings
        if ceil:
            parts = [
                f"{k} {format_si(v, 'OP/s' if k.startswith('int') else 'FLOP/s')}"
                for k, v in ceil.items()
                if k != "dram"
            ]
            parts += [f"DRAM {format_si(ceil['dram'], 'B/s')}"] if "dram" in ceil else []
            lines.append("  Ceilings (from the report, at ncu's clocks): " + ", ".join(parts))
        lines += [f"  {n}" for n in self.notes]
        if self.path and not any(self.path in n for n in self.notes):
            lines.append(f"  report: {self.path}")
        return "\n".join(lines)

    def figure(self) -> BokehModel:
        """The Bokeh roofline: each profiled launch a point, the report's ceilings as lines."""
        from .roofline import roofline_figure

        k = self.kernels()
        title = "Roofline" + (f" \u00b7 {self.label}" if self.label else "")
        return roofline_figure(
            k, self.ceilings, title, dict(zip(k["Name"], k["Kernel"], strict=True))
        )

    def _table_html(self) -> str:
        head = "".join(f"<th style='{_CELL}'>{esc(h)}</th>" for h in self._head())
        body = []
        for _, r in self.kernels().iterrows():
            cells = self._row(r)
            rules = self._rules_for(r["ID"])
            rule_html = "".join(
                f"<div style='font-size:12px;opacity:.85;margin:1px 0'>\u25b8 "
                f"<b>{esc(rule)}</b>: {esc(msg)}</div>"
                for rule, msg in rules
            )
            name = f"<span title='{esc(r['Name'])}'>{breakable(cells[0])}</span>{rule_html}"
            body.append(
                f"<tr><td style='{_NAME_CELL}'>{name}</td>"
                + "".join(
                    f"<td style='{_CELL};vertical-align:top'>{esc(c)}</td>" for c in cells[1:]
                )
                + "</tr>"
            )
        return (
            f"<table "
            f"class='gm-ncu'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )

    @property
    def page_title(self) -> str:  # type: ignore[override]
        return f"gpumagic: {self.label or 'ncu'}"

    def html(self, figure: str | None = "iframe") -> str:
        """The report as HTML; ``figure``: "notebook" (BokehJS once per kernel session), "iframe",
        "page", None."""
        from .figure_modes import figure_html

        parts = [
            f"<div style='font-weight:600;margin:4px 0'>{esc(self.summary_line())}</div>",
            self._table_html(),
        ]
        parts += [f"<div style='margin:2px 0;opacity:.75'>{esc(w)}</div>" for w in self._words()]
        parts += [f"<div style='margin:2px 0'>\u2139\ufe0f {esc(n)}</div>" for n in self.notes]
        if figure and not self.kernels().empty:
            parts.append(
                figure_html(self.figure(), figure, f"gpumagic: {self.label or 'ncu'} roofline")
            )
        return f"<div class='gm-report gm-ncu-report' style='{_ROOT_STYLE}'>{''.join(parts)}</div>"
