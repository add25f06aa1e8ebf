"""Tensor-core work in an Nsight Compute report: FLOP/s per precision and the tensor ceilings.

ncu's plain roofline (``SpeedOfLight_RooflineChart``) counts FADD/FMUL/FFMA thread instructions
only, so a GEMM on the tensor cores shows just its epilogue. ncu counts the matrix work itself in
``sm__ops_path_tensor_*``: "math ops executed in Tensor path" per source type (``ncu --query-metrics
--chip gh100``), one multiply-add counting two, so the counts are FLOPs (integer ops for int8). On
the H100 host (ncu 2025.3.1) ``sm__ops_path_tensor_src_bf16_dst_fp32.sum`` of a 2048³ bf16 GEMM,
``..._tf32_dst_fp32.sum`` of a TF32 one and ``..._fp64.sum`` of an fp64 one (DMMA) each read
17,179,869,184 = 2·2048³ exactly (``tests/data/ncu/tensor.raw.csv``). An NVIDIA forum answer points
to the same family for counting tensor FLOPs
(forums.developer.nvidia.com/t/how-many-flops-does-one-tensor-op-hmma-instruction-do /285256); the
older instruction count (``sm__inst_executed_pipe_tensor`` x 512, in the 2020-era tensor roofline
section) cannot be exact on Hopper, whose wgmma instructions vary in size.

How ncu's own hierarchical tensor roofline
(``sections/SpeedOfLight_HierarchicalTensorRooflineChart.section`` of 2025.3.1, one chart block per
architecture) turns them into FLOP/s, and what is done here alike: achieved =
``<counter>.sum.per_cycle_elapsed`` x ``sm__cycles_elapsed.avg.per_second``; peak =
``<counter>.sum.peak_sustained`` x the same clock. Its Hopper block plots one roof per instruction
kind and sparsity (``op_hgmma_src_bf16_dst_fp32 _sparsity_off``, ``..._on``, ``op_hmma_...``); the
source-level counters used here for the achieved work add the kinds up, and their ``peak_sustained``
is the *sparse* peak (bf16: 8192 ops/cycle/SM on the H100, twice the dense 4096). So each
precision's ceiling here is the dense one: the largest ``..._sparsity_off`` peak the report holds
(hgmma over the slower mma.sync path on Hopper; source-level on the chips that split it so), else
the source-level peak where the chip has no sparsity split (fp64). On the H100 that gives, per SM
and cycle, bf16/fp16 4096, tf32 2048, fp8 8192 and fp64 256 FLOP (16, 8, 32 and 1 times the FFMA
path's 2 x 128): the dense rates; with the sparse peak a bf16 GEMM at 74% of the tensor pipe's
cycles (``sm__pipe_tensor_cycles_active``) would read 37%.

The section itself costs 17 replay passes per kernel on the H100 and doubles the report's columns
(L1/L2 traffic for each of 28 counters); the six counters asked for here take the default run from
11 to 16 passes per kernel (the peaks are constants: free), measured on the fixture's four GEMMs
(``tests/data/ncu/tensor_cost.txt``). A name this chip lacks is skipped by ncu without error (fp16's
dst-split names on Hopper, probed), so one list serves every architecture. Reports from the section
or ``--set full`` are read too: they hold the same source-level counters.
"""

from __future__ import annotations

import math

import pandas as pd

__all__ = [
    "INTEGER",
    "TENSOR_METRICS",
    "TENSOR_PRECISIONS",
    "has_tensor_metrics",
    "tensor_ceilings",
    "tensor_column",
    "tensor_peaks",
    "tensor_rates",
]

_P = "sm__ops_path_tensor_"
SM_HZ = "sm__cycles_elapsed.avg.per_second"
DURATION = "gpu__time_duration.sum"

#: Per precision: the counters of its work (alternatives, first present wins: never two, so never
#: counted twice), and the dense-peak counters (the largest present is the ceiling).
TENSOR_PRECISIONS: dict[str, tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]] = {
    "bf16": (
        (("src_bf16_dst_fp32",),),
        (
            "op_hgmma_src_bf16_dst_fp32_sparsity_off",
            "op_hmma_src_bf16_dst_fp32_sparsity_off",
            "src_bf16_dst_fp32_sparsity_off",
        ),
    ),
    "fp16": (
        (("src_fp16",), ("src_fp16_dst_fp16", "src_fp16_dst_fp32")),
        (
            "op_hgmma_src_fp16_sparsity_off",
            "op_hmma_src_fp16_dst_fp32_sparsity_off",
            "op_hmma_src_fp16_dst_fp16_sparsity_off",
            "src_fp16_dst_fp32_sparsity_off",
            "src_fp16_dst_fp16_sparsity_off",
        ),
    ),
    "tf32": (
        (("src_tf32_dst_fp32",),),
        (
            "op_hgmma_src_tf32_dst_fp32_sparsity_off",
            "op_hmma_src_tf32_dst_fp32_sparsity_off",
            "src_tf32_dst_fp32_sparsity_off",
        ),
    ),
    "fp8": (
        (("src_fp8",), ("src_fp8_sparsity_off", "src_fp8_sparsity_on")),
        ("src_fp8_sparsity_off",),
    ),
    "fp64": ((("src_fp64",),), ()),
    "int8": (
        (("src_int8",), ("src_int8_sparsity_off", "src_int8_sparsity_on")),
        (
            "op_igmma_src_int8_sparsity_off",
            "op_imma_src_int8_sparsity_off",
            "src_int8_sparsity_off",
        ),
    ),
}
#: Integer precisions: operations, not FLOPs (their own column, left out of FLOP/s).
INTEGER = ("int8",)


def _metric_list() -> list[str]:
    """Per precision, its first work counters (the alternatives are read where a section collected
    them; fp16's split by destination is asked for too, for the chips without ``src_fp16``), then
    its dense peaks."""
    names: list[str] = []
    for counts, dense in TENSOR_PRECISIONS.values():
        asked = list(counts[0])
        if len(counts) > 1 and all(c.startswith("src_fp16_dst") for c in counts[1]):
            asked += counts[1]
        for c in asked:
            names += [
                f"{_P}{c}.sum",
                f"{_P}{c}.sum.per_cycle_elapsed",
                f"{_P}{c}.sum.peak_sustained",
            ]
        names += [f"{_P}{d}.sum.peak_sustained" for d in dense]
    return list(dict.fromkeys(names))


#: What the default ``--ncu`` run asks ncu for (``--metrics``), beside its sections.
TENSOR_METRICS: tuple[str, ...] = tuple(_metric_list())


def _col(raw: pd.DataFrame, name: str) -> pd.Series:
    if name not in raw:
        return pd.Series(math.nan, index=raw.index, dtype=float)
    return pd.to_numeric(raw[name], errors="coerce").astype(float)


def has_tensor_metrics(raw: pd.DataFrame) -> bool:
    """Whether the report counted tensor-core work at all (else it reads as it always did)."""
    return any(str(c).startswith(_P) and str(c).endswith(".sum") for c in raw.columns)


def _present(raw: pd.DataFrame, counters: tuple[str, ...]) -> bool:
    return all(f"{_P}{c}.sum" in raw for c in counters)


def _rate(raw: pd.DataFrame, counters: tuple[str, ...]) -> pd.Series:
    """ops/s of the counters added up: per elapsed cycle x SM clock (ncu's definition); else sum /
    duration."""
    hz = _col(raw, SM_HZ)
    per_cycle = sum(
        (_col(raw, f"{_P}{c}.sum.per_cycle_elapsed") for c in counters),
        pd.Series(0.0, index=raw.index),
    )
    total = sum((_col(raw, f"{_P}{c}.sum") for c in counters), pd.Series(0.0, index=raw.index))
    return (per_cycle * hz).fillna(total / (_col(raw, DURATION) * 1e-9))


def _counters(raw: pd.DataFrame, precision: str) -> tuple[str, ...] | None:
    return next((alt for alt in TENSOR_PRECISIONS[precision][0] if _present(raw, alt)), None)


def tensor_column(precision: str) -> str:
    """The kernel-table column of one precision's tensor-core rate."""
    return f"tensor {precision} {'OP/s' if precision in INTEGER else 'FLOP/s'}"


def tensor_rates(raw: pd.DataFrame) -> pd.DataFrame:
    """Per launch, each precision's tensor-core rate whose counters the report holds (column
    ``tensor bf16 FLOP/s``, ..., ``tensor int8 OP/s``), and ``Tensor FLOP/s``: the floating-point
    ones added up."""
    out = pd.DataFrame(index=raw.index)
    for p in TENSOR_PRECISIONS:
        counters = _counters(raw, p)
        if counters is not None:
            out[tensor_column(p)] = _rate(raw, counters)
    floats = [
        tensor_column(p) for p in TENSOR_PRECISIONS if p not in INTEGER and tensor_column(p) in out
    ]
    out["Tensor FLOP/s"] = out[floats].fillna(0.0).sum(axis=1) if floats else math.nan
    return out


def _peak_per_cycle(raw: pd.DataFrame, precision: str) -> pd.Series:
    """The dense peak in ops per cycle (summed over SMs), per launch: the largest sparsity-off peak
    present, else the work counters' own peak."""
    counts, dense = TENSOR_PRECISIONS[precision]
    cols = [
        _col(raw, f"{_P}{d}.sum.peak_sustained")
        for d in dense
        if f"{_P}{d}.sum.peak_sustained" in raw
    ]
    if not cols:
        alt = next(
            (a for a in counts if all(f"{_P}{c}.sum.peak_sustained" in raw for c in a)), None
        )
        cols = [_col(raw, f"{_P}{c}.sum.peak_sustained") for c in alt] if alt else []
    if not cols:
        return pd.Series(math.nan, index=raw.index, dtype=float)
    return pd.concat(cols, axis=1).max(axis=1)


def tensor_peaks(raw: pd.DataFrame) -> pd.DataFrame:
    """Per launch, each precision's dense tensor peak in ops/s at the launch's SM clock (columns as
    tensor_rates)."""
    hz = _col(raw, SM_HZ)
    return pd.DataFrame(
        {tensor_column(p): _peak_per_cycle(raw, p) * hz for p in TENSOR_PRECISIONS}, index=raw.index
    )


def tensor_ceilings(raw: pd.DataFrame) -> dict[str, float]:
    """``{"bf16 tensor": FLOP/s, ...}``: each precision's dense tensor-core peak at the clocks ncu
    ran at (median over launches), where the report states it; ``int8 tensor`` in integer ops/s."""
    out: dict[str, float] = {}
    peaks = tensor_peaks(raw)
    for p in TENSOR_PRECISIONS:
        value = peaks[tensor_column(p)].median()
        if value > 0:
            out[f"{p} tensor"] = float(value)
    return out
