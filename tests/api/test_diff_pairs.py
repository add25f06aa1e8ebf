"""gpumagic.diff on real pairs captured on an H200 (tests/data/pairs, made by
tests/data/capture/diff_pairs.py): one training step in fp32, with TF32, in bf16 autocast, and
compiled (fp32), each run in its own process."""

from __future__ import annotations

import pytest

import gpumagic
from gpumagic import decode_kernel, load_trace

from ..helpers import DATA

PAIRS = DATA / "pairs"


def diff(a: str, b: str):
    return gpumagic.diff(
        load_trace(PAIRS / f"step_{a}.json.gz"),
        load_trace(PAIRS / f"step_{b}.json.gz"),
        name_a=a,
        name_b=b,
    )


@pytest.mark.parametrize(
    "a,b", [("fp32", "tf32"), ("tf32", "bf16"), ("bf16", "compiled"), ("fp32", "compiled")]
)
def test_the_rows_add_up_to_the_change_in_gpu_busy(a, b):
    d = diff(a, b)
    rows = d.to_dataframe()
    assert int(rows["delta_ns"].sum()) == d.data.busy_b - d.data.busy_a
    assert d.data.busy_a == load_trace(PAIRS / f"step_{a}.json.gz").gpu_busy_ns()


def test_tf32_turns_every_fp32_gemm_into_one_loosely_matched_tensor_core_row():
    d = diff("fp32", "tf32")
    rows = d.to_dataframe()
    gemms = rows[[decode_kernel(n).op == "gemm" for n in rows["name_a"].fillna("")]]
    assert len(gemms) >= 3 and set(gemms["match"]) == {"loose"}
    assert all(decode_kernel(n).tensor_cores for n in gemms["name_b"])
    # nothing else changed: what B has that A had not is TF32 GEMMs alone (A ran two addmm shapes on
    # one fp32 kernel, B on two TF32 kernels: the second reads as new, a kernel row being one kernel
    # name)
    assert not (rows["match"] == "vanished").any()
    assert all(
        decode_kernel(n).op == "gemm" and decode_kernel(n).tensor_cores
        for n in rows.loc[rows["match"] == "new", "name_b"]
    )
    assert "TF32 enabled" in d.changes[0]
    assert any("fp32 on CUDA cores" in e and "tf32 on tensor cores" in e for e in d.environment)


def test_compiling_keeps_the_gemms_and_replaces_the_elementwise_kernels_with_triton():
    d = diff("fp32", "compiled")
    rows = d.to_dataframe()
    gemm = [decode_kernel(n).op == "gemm" for n in rows["name_a"].fillna("")]
    assert set(rows.loc[gemm, "match"]) == {"same"}  # the library GEMMs are the same kernels
    new = rows[rows["match"] == "new"]
    assert len(new) >= 4 and all(decode_kernel(n).family == "triton" for n in new["name_b"])
    gone = rows[rows["match"] == "vanished"]
    assert any("gelu" in decode_kernel(n).short for n in gone["name_a"])
    assert not [
        e for e in d.environment if "precision" in e
    ]  # both fp32: no precision difference stated


def test_bf16_autocast_is_said_as_a_precision_change():
    d = diff("tf32", "bf16")
    assert any("bf16 instead of TF32" in c for c in d.changes)
