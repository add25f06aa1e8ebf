"""Nsight Compute results as tables: the raw page (one row per profiled launch, every metric) and
the rule messages.

The metrics are what ``ncu --import REPORT --csv --page raw --print-units base`` prints (the text
ncu itself writes, so a figure here equals the CSV's; :func:`read_raw_csv`); the rule messages
("Latency Issue", "High Memory Throughput", ...) come from the details page (``--page details
--csv``, :func:`read_details_csv`).

The per-kernel figures follow ncu's own definitions, so they match its UI: the Speed Of Light
percentages as measured; achieved FLOP/s as the roofline sections count it (FADD + FMUL + 2 x FFMA
thread instructions per cycle, times the SM clock; FP64 and FP16 likewise); arithmetic intensity
against DRAM bytes; the ceilings from the report's own peak metrics
(``...ffma_pred_on.sum.peak_sustained`` x SM clock x 2, ``dram__bytes.sum.peak_sustained`` x DRAM
clock), i.e. at the clocks ncu ran at (base clocks unless ``--clock-control none``). Tensor-core
work is not in those counts (ncu's plain roofline does not count it either); where the report holds
ncu's tensor-path counters (``sm__ops_path_tensor_*``, collected by default:
``capture/ncu/tensor.py`` says which and why), each precision's tensor FLOP/s joins the total and
the intensity, a ``Math`` / ``Peak %`` pair names the main math and how near its ceiling it ran, and
the dense tensor peaks join the ceilings. A report without those counters reads exactly as before.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .tensor import (
    INTEGER,
    TENSOR_PRECISIONS,
    has_tensor_metrics,
    tensor_ceilings,
    tensor_peaks,
    tensor_rates,
)

__all__ = [
    "NcuData",
    "ceilings",
    "kernel_figures",
    "limiter",
    "read_details_csv",
    "read_raw_csv",
]

#: Columns that say which launch a row is (not metrics).
ID_COLUMNS = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
)
DURATION = "gpu__time_duration.sum"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_BW = "dram__bytes.sum.per_second"
SM_HZ = "sm__cycles_elapsed.avg.per_second"
SMSP_HZ = "smsp__cycles_elapsed.avg.per_second"
DRAM_HZ = "dram__cycles_elapsed.avg.per_second"
DRAM_PEAK = "dram__bytes.sum.peak_sustained"
#: Thread-instruction metrics per precision: (add, mul, fma); an FMA counts two FLOPs.
PRECISIONS = {
    "fp32": ("fadd", "fmul", "ffma"),
    "fp64": ("dadd", "dmul", "dfma"),
    "fp16": ("hadd", "hmul", "hfma"),
}
#: ncu's Bottleneck rule (SOLBottleneck): below this % of peak on both, a kernel is latency-bound
#: ...
LATENCY_PCT = 60.0
#: ... and within this many points of each other, compute and memory are balanced.
BALANCED_PCT = 10.0
_UNIT_SCALE = {
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "": 1.0,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
}
_TO_NS = {"n": 1.0, "u": 1e3, "m": 1e6, "": 1e9}
_BASE_UNIT = re.compile(
    r"^(n|u|m|k|K|M|G|T|)(second|s|byte|B|hz|Hz|cycle|inst|warp|sector|request|thread)$"
)
#: ncu's short spellings (``--print-units base`` prints ``ns``, ``byte/s``) as one name each.
_SPELLING = {"s": "second", "B": "byte", "Hz": "hz"}
#: The columns of ncu's rule results (``--print-details`` rows), one row per rule per launch.
_RULE_COLUMNS = ["ID", "Section", "Rule", "Type", "Message", "Speedup"]


@dataclass
class NcuData:
    """What a report holds: ``raw`` (one row per profiled launch: the ID columns, then every metric,
    numbers in base units), ``units`` (metric -> its base unit), ``rules`` (ID, Section, Rule, Type,
    Message, Speedup) and where it came from (``path``, ``source``: the command or module that read
    it)."""

    raw: pd.DataFrame
    units: dict[str, str] = field(default_factory=dict)
    rules: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_RULE_COLUMNS))
    path: str | None = None
    source: str = ""

    def kernels(self) -> pd.DataFrame:
        """One row per profiled launch with the figures the report shows (see
        :func:`kernel_figures`)."""
        return kernel_figures(self.raw)

    def ceilings(self) -> dict[str, float]:
        """The device's peaks at the clocks ncu ran at (see :func:`ceilings`)."""
        return ceilings(self.raw)


def _records(text: str) -> list[list[str]]:
    """The CSV rows from the header (the first row whose first field is "ID") on; ncu's own chatter
    before it (``==PROF==``, ``==WARNING==``) is skipped."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    return [row for row in csv.reader(io.StringIO("\n".join(lines[start:]))) if row]


def number(text: str) -> float | str:
    """A metric value as a float when it is one (``"1,234.5"`` -> 1234.5; ``"n/a"`` and ``""`` ->
    NaN), else the text itself (a device name, a launch shape)."""
    t = text.strip()
    if t in ("", "n/a", "N/A", "nan"):
        return math.nan
    try:
        return float(t.replace(",", ""))
    except ValueError:
        return text


def to_base(value: float | str, unit: str) -> tuple[float | str, str]:
    """``value`` in ``unit`` converted to the base unit (``usecond`` -> ``nsecond`` for times, as
    ncu's base; any other prefix -> none: ``Gbyte/second`` -> ``byte/second``, ``Mhz`` ->
    ``hz``)."""
    if not isinstance(value, float) or not unit:
        return value, unit
    num, _, per = unit.partition("/")
    m = _BASE_UNIT.match(num)
    if m and _SPELLING.get(m.group(2), m.group(2)) == "second" and not per and m.group(1) in _TO_NS:
        return value * _TO_NS[m.group(1)], "ns"  # ncu's base for durations: nanoseconds
    scale = 1.0
    if m:
        scale *= _UNIT_SCALE[m.group(1)]
        num = _SPELLING.get(m.group(2), m.group(2))
    if per:
        p = _BASE_UNIT.match(per)
        if p:
            scale /= _UNIT_SCALE[p.group(1)]
            per = _SPELLING.get(p.group(2), p.group(2))
    return value * scale, num + ("/" + per if per else "")


def read_raw_csv(
    text: str, path: str | None = None, source: str = "ncu --page raw --csv"
) -> NcuData:
    """NcuData from ``ncu --import R --csv --page raw`` output (with or without ``--print-units
    base``: values with a unit prefix are scaled to base units; a units row, where present, is the
    row after the header)."""
    rows = _records(text)
    if not rows:
        return NcuData(pd.DataFrame(columns=list(ID_COLUMNS)), path=path, source=source)
    header, body = rows[0], rows[1:]
    units_row = body[0] if body and body[0][0] == "" else [""] * len(header)
    if body and body[0][0] == "":
        body = body[1:]
    columns: dict[str, list[Any]] = {h: [] for h in header}
    units: dict[str, str] = {}
    for i, h in enumerate(header):
        unit = units_row[i] if i < len(units_row) else ""
        for row in body:
            cell = row[i] if i < len(row) else ""
            if h in ID_COLUMNS:
                columns[h].append(cell)
                continue
            value, base = to_base(number(cell), unit)
            columns[h].append(value)
            if unit:
                units[h] = base
    raw = pd.DataFrame(columns)
    if "ID" in raw:
        raw["ID"] = pd.to_numeric(raw["ID"], errors="coerce").astype("Int64")
    return NcuData(raw, units=units, path=path, source=source)


def read_details_csv(text: str) -> pd.DataFrame:
    """The rule messages of ``ncu --import R --csv --page details`` (columns Rule Name, Rule Type,
    Rule Description, Estimated Speedup, as ncu 2023.3+ prints them): one row per (launch, rule), in
    ncu's order."""
    rows = _records(text)
    if not rows or "Rule Name" not in rows[0]:
        return pd.DataFrame(columns=_RULE_COLUMNS)
    col = {h: i for i, h in enumerate(rows[0])}

    def get(row: list[str], name: str) -> str:
        i = col.get(name)
        return row[i] if i is not None and i < len(row) else ""

    seen: set[tuple[str, str, str]] = set()
    out = []
    for row in rows[1:]:
        rule, message = get(row, "Rule Name"), get(row, "Rule Description")
        key = (get(row, "ID"), rule, message)
        if not rule or key in seen:
            continue
        seen.add(key)
        speedup, launch = number(get(row, "Estimated Speedup")), number(get(row, "ID"))
        out.append(
            {
                "ID": int(launch) if isinstance(launch, float) and not math.isnan(launch) else None,
                "Section": get(row, "Section Name"),
                "Rule": rule,
                "Type": get(row, "Rule Type"),
                "Message": message,
                "Speedup": speedup if isinstance(speedup, float) else math.nan,
            }
        )
    return pd.DataFrame(out, columns=_RULE_COLUMNS)


def _col(raw: pd.DataFrame, name: str) -> pd.Series:
    """A metric column as floats (NaN where absent or not a number)."""
    if name not in raw:
        return pd.Series(math.nan, index=raw.index, dtype=float)
    return pd.to_numeric(raw[name], errors="coerce").astype(float)


def flops_per_second(raw: pd.DataFrame, precision: str) -> pd.Series:
    """Achieved FLOP/s of one precision, as ncu's roofline sections count it: (add + mul + 2 x fma)
    thread instructions per elapsed cycle of all SM sub-partitions, times their clock; else, from
    the instruction sums over the kernel's duration."""
    add, mul, fma = PRECISIONS[precision]

    def per_cycle(op: str) -> pd.Series:
        return _col(raw, f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed")

    rate = (per_cycle(add) + per_cycle(mul) + 2 * per_cycle(fma)) * _col(raw, SMSP_HZ)

    def total(op: str) -> pd.Series:
        return _col(raw, f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum")

    by_sum = (total(add) + total(mul) + 2 * total(fma)) / (_col(raw, DURATION) * 1e-9)
    return rate.fillna(by_sum)


def limiter(sm_pct: float, mem_pct: float) -> str | None:
    """What limits a kernel, by ncu's Bottleneck rule: "latency" when both SM and memory throughput
    are below 60% of peak, else the busier of the two ("compute" / "memory"), or "balanced" within
    10 points."""
    if math.isnan(sm_pct) or math.isnan(mem_pct):
        return None
    if sm_pct < LATENCY_PCT and mem_pct < LATENCY_PCT:
        return "latency"
    if abs(sm_pct - mem_pct) < BALANCED_PCT:
        return "balanced"
    return "compute" if sm_pct > mem_pct else "memory"


def kernel_figures(raw: pd.DataFrame) -> pd.DataFrame:
    """Per profiled launch: ID, Name (ncu's), Duration (ns), SM % and Memory % (Speed Of Light, of
    peak sustained), DRAM bytes/s, FLOP/s (FP32 + FP64 + FP16, each also alone, plus the tensor
    cores' where the report counted them: each precision and ``Tensor FLOP/s``), Intensity (FLOP per
    DRAM byte), Limiter, then, with tensor counters, ``Math`` (the precision and unit doing most of
    the FLOPs, e.g. "bf16 tensor", "fp32") and ``Peak %`` (its rate against its own ceiling at the
    launch's clock), and the launch shape."""
    out = pd.DataFrame(index=raw.index)
    out["ID"] = raw["ID"] if "ID" in raw else range(len(raw))
    out["Name"] = raw.get("Kernel Name", "")
    out["Duration (ns)"] = _col(raw, DURATION)
    out["SM %"] = _col(raw, SM_PCT)
    out["Memory %"] = _col(raw, MEM_PCT)
    out["DRAM bytes/s"] = _col(raw, DRAM_BW)
    for p in PRECISIONS:
        out[f"{p} FLOP/s"] = flops_per_second(raw, p)
    parts = [f"{p} FLOP/s" for p in PRECISIONS]
    tensor = has_tensor_metrics(raw)
    if tensor:
        rates = tensor_rates(raw)
        for c in rates.columns:
            out[c] = rates[c]
        parts.append("Tensor FLOP/s")
    out["FLOP/s"] = out[parts].fillna(0.0).sum(axis=1)
    counted = out[parts].notna().any(axis=1)
    out.loc[~counted, "FLOP/s"] = math.nan
    bw = out["DRAM bytes/s"].where(out["DRAM bytes/s"] > 0)
    out["Intensity (FLOP/B)"] = out["FLOP/s"] / bw
    out["Limiter"] = [limiter(s, m) for s, m in zip(out["SM %"], out["Memory %"], strict=True)]
    if tensor:
        out["Math"], out["Peak %"] = _main_math(raw, out)
    for c in ("Block Size", "Grid Size", "Device", "Stream"):
        out[c] = raw.get(c, "")
    return out.reset_index(drop=True)


def _main_math(raw: pd.DataFrame, out: pd.DataFrame) -> tuple[list[str | None], list[float]]:
    """Per launch, the precision (and unit) with the largest FLOP/s, and that rate as a % of its own
    peak at the launch's SM clock (FFMA path: 2 x FMA per cycle; tensor cores: the dense peak,
    ``ncu_tensor.tensor_peaks``)."""
    hz = _col(raw, SM_HZ)
    rates = {p: out[f"{p} FLOP/s"] for p in PRECISIONS}
    peaks = {
        p: 2 * _col(raw, f"sm__sass_thread_inst_executed_op_{fma}_pred_on.sum.peak_sustained") * hz
        for p, (_, _, fma) in PRECISIONS.items()
    }
    tensor_peak = tensor_peaks(raw)
    for p in TENSOR_PRECISIONS:
        col = f"tensor {p} FLOP/s"
        if p not in INTEGER and col in out:
            rates[f"{p} tensor"], peaks[f"{p} tensor"] = out[col], tensor_peak[col]
    table, ceiling = pd.DataFrame(rates).fillna(0.0), pd.DataFrame(peaks)
    names: list[str | None] = []
    pcts: list[float] = []
    for i in table.index:
        row = table.loc[i]
        best = str(row.idxmax()) if row.max() > 0 else None
        peak = ceiling.loc[i, best] if best else math.nan
        names.append(best)
        pcts.append(float(100 * row[best] / peak) if best and peak > 0 else math.nan)
    return names, pcts


def ceilings(raw: pd.DataFrame) -> dict[str, float]:
    """The device's peaks as the report states them, at the clocks ncu ran at (median over
    launches): ``fp32``, ``fp64``, ``fp16`` FLOP/s (2 x FMA per cycle x SM clock), the dense
    tensor-core peaks (``bf16 tensor``, ..., ``ncu_tensor.tensor_ceilings``; ``int8 tensor`` in
    ops/s) and ``dram`` bytes/s; absent metrics are left out."""
    out: dict[str, float] = {}
    sm_hz = _col(raw, SM_HZ)
    for p, (_, _, fma) in PRECISIONS.items():
        peak = (
            2
            * _col(raw, f"sm__sass_thread_inst_executed_op_{fma}_pred_on.sum.peak_sustained")
            * sm_hz
        ).median()
        if peak > 0:
            out[p] = float(peak)
    out.update(tensor_ceilings(raw))
    dram = (_col(raw, DRAM_PEAK) * _col(raw, DRAM_HZ)).median()
    if dram > 0:
        out["dram"] = float(dram)
    return out
