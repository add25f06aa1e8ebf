"""``gpumagic.peaks()``: the datasheet table as an object that shows itself (text, HTML, DataFrame).
Tables and arithmetic only: the roofline figure of timed calls is the render layer's
(``render/calls_roofline.py``)."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .measure import MeasuredPeaks, cached_peak
from .table import DEVICES, PRECISIONS, DevicePeaks, lookup_reason

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PeakTable", "current_device", "peaks"]


def _tf(value: float | None) -> str:
    return "—" if value is None else f"{value / 1e12:,.1f}"


@dataclass(frozen=True)
class PeakTable:
    """Dense datasheet peaks (TFLOP/s per precision, TB/s) of every known device, this one marked.

    ``current`` is the entry of the device named by ``device`` (None if unknown, with ``reason``);
    ``measured`` is what ``measure_peak()`` cached for it, shown as an extra row.
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
        out = [
            "Dense figures (datasheet tensor-core figures with sparsity halved); fp32 is "
            "FFMA (no tensor cores)."
        ]
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
            out.append(
                "  ".join([name.ljust(widths[0]), *(c.rjust(w) for c, w in zip(cells, widths[1:]))])
            )
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
                f"<td {left}>{'<b>' + label + '</b>' if bold else label}</td>{tds}<td "
                f"{left}>{html.escape(source)}</td>"
            )
            body.append(f"<tr>{row}</tr>")
        foot = "".join(f"<div>{html.escape(f)}</div>" for f in self._footer())
        return (
            f"<div class='gpumagic-peaks'><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>{foot}</div>"
        )

    def to_dataframe(self) -> pd.DataFrame:
        """One row per device (and one for the measured peaks): TFLOP/s per precision, TB/s, memory,
        source."""
        import pandas as pd

        records = []
        for e in self.entries:
            rec: dict[str, Any] = {"device": e.name, "basis": "datasheet"}
            rec.update({f"{p}_tflops": (e.peak(p) or float("nan")) / 1e12 for p in PRECISIONS})
            rec.update(
                {"bandwidth_tbs": e.bandwidth / 1e12, "memory": e.memory, "source": e.source}
            )
            rec["this_device"] = self.current is not None and e.name == self.current.name
            records.append(rec)
        if self.measured is not None:
            m = self.measured
            rec = {"device": m.device, "basis": "measured"}
            rec.update({f"{p}_tflops": m.flops.get(p, float("nan")) / 1e12 for p in PRECISIONS})
            rec.update(
                {
                    "bandwidth_tbs": (m.bandwidth or float("nan")) / 1e12,
                    "memory": "",
                    "source": m.path or "",
                }
            )
            rec["this_device"] = True
            records.append(rec)
        return pd.DataFrame.from_records(records)


def current_device() -> str | None:
    """This process's CUDA device name, None without torch or CUDA (torch imported here, never by a
    figure)."""
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def peaks(device: str | None = None) -> PeakTable:
    """The datasheet peaks of every known GPU; ``device`` (default: this CUDA device, if any) is
    marked.

    The measured peaks of that device, if ``measure_peak()`` cached them, are shown as an extra row.
    """
    name = device if device is not None else current_device()
    current, reason = lookup_reason(name) if name else (None, "")
    return PeakTable(
        entries=tuple(DEVICES.values()),
        device=name,
        current=current,
        reason=reason,
        measured=cached_peak(name) if name else None,
    )
