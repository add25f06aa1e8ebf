"""``gpumagic.peaks()``: the datasheet table as an object that shows itself (text, HTML, DataFrame)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..units import format_si
from .achieved import Achieved
from .measure import MeasuredPeaks, cached_peak
from .table import DEVICES, PRECISIONS, DevicePeaks, lookup, lookup_reason

__all__ = ["PeakTable", "peaks", "roofline"]


def _tf(value: float | None) -> str:
    return "—" if value is None else f"{value / 1e12:,.1f}"


@dataclass(frozen=True)
class PeakTable:
    """Dense datasheet peaks (TFLOP/s per precision, TB/s) of every known device, this one marked.

    ``current`` is the entry of the device named by ``device`` (None if unknown, with ``reason``); ``measured``
    is what ``measure_peak()`` cached for it, shown as an extra row.
    """

    entries: tuple[DevicePeaks, ...]
    device: str | None = None
    current: DevicePeaks | None = None
    reason: str = ""
    measured: MeasuredPeaks | None = None

    def __getitem__(self, key: str) -> DevicePeaks:
        return DEVICES[key]

    def _rows(self) -> list[tuple[str, list[str], str]]:
        rows = []
        for e in self.entries:
            mark = " *" if self.current is not None and e.name == self.current.name else ""
            cells = [_tf(e.peak(p)) for p in PRECISIONS] + [f"{e.bandwidth / 1e12:.2f}", e.memory]
            rows.append((e.name + mark, cells, e.source))
        if self.measured is not None:
            m = self.measured
            cells = [_tf(m.flops.get(p)) for p in PRECISIONS]
            cells += ["—" if m.bandwidth is None else f"{m.bandwidth / 1e12:.2f}", "copy"]
            rows.append((f"{m.device} (measured)", cells, m.path or "measured in this process"))
        return rows

    @property
    def header(self) -> list[str]:
        return ["device", *(f"{p} TFLOP/s" for p in PRECISIONS), "TB/s", "memory", "source"]

    def _footer(self) -> list[str]:
        out = ["Dense figures (datasheet tensor-core figures with sparsity halved); fp32 is FFMA (no tensor cores)."]
        if self.current is not None:
            out.append(f"* this device: {self.device}")
        elif self.reason:
            out.append(self.reason)
        return out

    def __str__(self) -> str:
        rows = self._rows()
        widths = [max(len("device"), *(len(r[0]) for r in rows))]
        for i, h in enumerate(self.header[1:-1]):
            widths.append(max(len(h), *(len(r[1][i]) for r in rows)))
        line = "  ".join(h.ljust(w) for h, w in zip(self.header[:-1], widths))
        out = [line]
        for name, cells, _source in rows:
            out.append("  ".join([name.ljust(widths[0]), *(c.rjust(w) for c, w in zip(cells, widths[1:]))]))
        return "\n".join(out + self._footer())

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        left, right = "style='text-align:left'", "style='text-align:right'"
        head = "".join(
            f"<th {left if i in (0, len(self.header) - 1) else right}>{html.escape(h)}</th>"
            for i, h in enumerate(self.header)
        )
        body = []
        for name, cells, source in self._rows():
            bold = name.endswith(" *")
            label = html.escape(name)
            tds = "".join(f"<td {right}>{html.escape(c)}</td>" for c in cells)
            row = (
                f"<td {left}>{'<b>' + label + '</b>' if bold else label}</td>{tds}<td {left}>{html.escape(source)}</td>"
            )
            body.append(f"<tr>{row}</tr>")
        foot = "".join(f"<div>{html.escape(f)}</div>" for f in self._footer())
        return (
            f"<div class='gpumagic-peaks'><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>{foot}</div>"
        )

    def to_dataframe(self) -> Any:
        """One row per device (and one for the measured peaks): TFLOP/s per precision, TB/s, memory, source."""
        import pandas as pd

        records = []
        for e in self.entries:
            rec: dict[str, Any] = {"device": e.name, "basis": "datasheet"}
            rec.update({f"{p}_tflops": (e.peak(p) or float("nan")) / 1e12 for p in PRECISIONS})
            rec.update({"bandwidth_tbs": e.bandwidth / 1e12, "memory": e.memory, "source": e.source})
            rec["this_device"] = self.current is not None and e.name == self.current.name
            records.append(rec)
        if self.measured is not None:
            m = self.measured
            rec = {"device": m.device, "basis": "measured"}
            rec.update({f"{p}_tflops": m.flops.get(p, float("nan")) / 1e12 for p in PRECISIONS})
            rec.update({"bandwidth_tbs": (m.bandwidth or float("nan")) / 1e12, "memory": "", "source": m.path or ""})
            rec["this_device"] = True
            records.append(rec)
        return pd.DataFrame.from_records(records)


def _current_device() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def peaks(device: str | None = None) -> PeakTable:
    """The datasheet peaks of every known GPU; ``device`` (default: this CUDA device, if any) is marked.

    The measured peaks of that device, if ``measure_peak()`` cached them, are shown as an extra row.
    """
    name = device if device is not None else _current_device()
    current, reason = lookup_reason(name) if name else (None, "")
    return PeakTable(
        entries=tuple(DEVICES.values()),
        device=name,
        current=current,
        reason=reason,
        measured=cached_peak(name) if name else None,
    )


_TENSOR = {"tf32", "bf16", "fp16", "fp8", "fp4", "int8"}


def _point(item: Any) -> tuple[str, float | None, float | None, Achieved | None]:
    """(label, FLOP per byte, FLOP/s, the Achieved) of a ``(label, Achieved)`` pair or a ``(label, intensity,
    FLOP/s[, Achieved])`` tuple (for work the counting leaves out, an add's FLOP per element, say)."""
    label, *rest = item
    if len(rest) == 1 and isinstance(rest[0], Achieved):
        a = rest[0]
        return str(label), a.intensity, a.flop_rate, a
    if len(rest) in (2, 3):
        a = rest[2] if len(rest) == 3 and isinstance(rest[2], Achieved) else None
        return str(label), rest[0], rest[1], a
    raise TypeError(f"roofline: a point is (label, Achieved) or (label, intensity, FLOP/s[, Achieved]), not {item!r}")


def roofline(
    points: Iterable[Any] | Mapping[str, Achieved], device: str | None = None, *, title: str | None = None
) -> Any:
    """The roofline of timed calls: each point a call (``(label, Achieved)``, or ``(label, intensity, FLOP/s[,
    Achieved])``; a mapping label -> Achieved too) on log-log axes, the datasheet ceilings of ``device`` (default:
    the points' device, else this CUDA device) as lines: the bandwidth slope, and a flat roof for fp32 and for each
    precision a point ran in. Shown as gpumagic shows its figures (BokehJS once per notebook); ``.figure`` is the
    Bokeh figure, ``save_html(path)`` a page of its own."""
    from ..render.figure_page import Figure
    from ..render.roofline import calls_figure

    items = [_point(p) for p in (points.items() if isinstance(points, Mapping) else points)]
    name = device or next((a.device for *_, a in items if a is not None and a.device), None) or _current_device()
    sheet = lookup(name) if name else None
    used = {"fp32"} | {a.precision for *_, a in items if a is not None and a.precision in PRECISIONS}
    roofs = {}
    if sheet is not None:
        for p in PRECISIONS:
            if p in used and sheet.peak(p):
                roofs[p + (" tensor" if p in _TENSOR else "")] = float(sheet.peak(p))  # type: ignore[arg-type]
    data: dict[str, list[Any]] = {k: [] for k in ("x", "y", "label", "rate_text", "ai_text", "share_text")}
    data.update(limiter_text=[], limiter=[])
    for label, ai, rate, a in items:
        if not (ai and rate and ai > 0 and rate > 0):
            continue  # no place on log axes: no FLOPs or no bytes counted
        data["x"].append(float(ai))
        data["y"].append(float(rate))
        data["label"].append(label)
        data["rate_text"].append(format_si(float(rate), "FLOP/s"))
        data["ai_text"].append(f"{ai:.3g} FLOP/byte")
        data["share_text"].append((a.segment() or "") if a is not None else "")
        lim = a.limiter() if a is not None else None
        data["limiter_text"].append(a.explain() if a is not None else "")
        data["limiter"].append(lim.split("-")[0] if lim else None)
    shown = sheet.name if sheet is not None else f"{name or 'this device'} (no datasheet ceilings)"
    fig = calls_figure(data, roofs, sheet.bandwidth if sheet is not None else None, title or f"Roofline: {shown}")
    return Figure(fig, title or f"roofline: {shown}")
