"""Big nsys exports: the committed block export replicated (benchmarks/nsys_scale.py builds it),
read lazily and in chunks, checked against a direct SQL computation and Python's statistics module
on the same file."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sqlite3
import statistics
from collections import defaultdict

import pandas as pd
import pytest

from gpumagic import load_nsys
from gpumagic.capture.nsys import columns as nsys_columns

from ...helpers import ROOT

KERNELS, API = (
    43 * 50 + 7,
    1117 * 20 + 3,
)  # 50 and 20 copies of the original, and a partial copy each


def _bench():
    spec = importlib.util.spec_from_file_location(
        "nsys_scale", ROOT / "benchmarks" / "nsys_scale.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("scale") / "replicated.sqlite"
    _bench().build(path, KERNELS, API)
    return str(path)


def by_name(path: str, table: str, name_col: str, strip_version: bool) -> dict[str, list[int]]:
    """Every duration per name, straight from SQLite (no gpumagic code)."""
    con = sqlite3.connect(path)
    rows = con.execute(
        f"SELECT s.value, t.end - t.start FROM {table} t JOIN StringIds s ON s.id = t.{name_col}"
    ).fetchall()
    con.close()
    out = defaultdict(list)
    for name, dur in rows:
        if strip_version and name[-6:-4] == "_v" and name[-4:].isdigit():
            name = name[:-6]  # cudaMalloc_v3020 -> cudaMalloc, as nsys stats names it
        out[name].append(dur)
    return out


@pytest.mark.parametrize(
    "method, table, name_col, count_col",
    [
        ("kernel_summary", "CUPTI_ACTIVITY_KIND_KERNEL", "demangledName", "Instances"),
        ("api_summary", "CUPTI_ACTIVITY_KIND_RUNTIME", "nameId", "Num Calls"),
    ],
)
def test_replicated_export_summaries_equal_a_direct_computation(
    big, method, table, name_col, count_col
):
    ref = by_name(big, table, name_col, strip_version=method == "api_summary")
    got = getattr(load_nsys(big), method)()  # the lazy path: ids and durations only
    assert len(got) == len(ref)
    assert (
        int(got[count_col].sum())
        == sum(len(v) for v in ref.values())
        == (KERNELS if "kernel" in method else API)
    )
    assert int(got["Total Time (ns)"].sum()) == sum(sum(v) for v in ref.values())
    for _, r in got.iterrows():
        d = ref[r["Name"]]
        assert (r[count_col], r["Total Time (ns)"], r["Min (ns)"], r["Max (ns)"]) == (
            len(d),
            sum(d),
            min(d),
            max(d),
        )
        assert r["Med (ns)"] == statistics.median(d)
        assert r["StdDev (ns)"] == pytest.approx(
            statistics.stdev(d) if len(d) > 1 else 0.0, rel=1e-9, abs=1e-6
        )
    assert got["Total Time (ns)"].is_monotonic_decreasing


def test_lazy_and_loaded_paths_and_threaded_chunks_agree(big, monkeypatch):
    lazy = load_nsys(big)
    summaries = lazy.kernel_summary(), lazy.api_summary(), lazy.osrt_summary()
    monkeypatch.setattr(nsys_columns, "CHUNK_ROWS", 1000)  # many chunks, read by two threads
    monkeypatch.setattr(nsys_columns, "READERS", 2)
    chunked = load_nsys(big)
    monkeypatch.setattr(nsys_columns, "CHUNK_ROWS", 1 << 30)
    monkeypatch.setattr(nsys_columns, "READERS", 1)
    whole = load_nsys(big)
    for table in ("kernels", "api", "memops", "nvtx", "osrt"):
        pd.testing.assert_frame_equal(getattr(chunked, table), getattr(whole, table))
    assert len(chunked.kernels) == KERNELS and len(chunked.api) == API
    for got, method in zip(summaries, ("kernel_summary", "api_summary", "osrt_summary")):
        pd.testing.assert_frame_equal(got, getattr(chunked, method)())  # now from the loaded frames
    assert chunked.kernels["name"].dtype == "category"  # names resolved once per distinct id


def test_tables_are_read_on_first_use_and_outlive_the_file(big, tmp_path):
    copy = tmp_path / "gone.sqlite"
    copy.write_bytes(pathlib.Path(big).read_bytes())
    t = load_nsys(copy)
    assert f"{KERNELS} kernels" in repr(t) and f"{API} API calls" in repr(t)  # counted, not read
    s = t.kernel_summary()
    os.remove(copy)  # the open export is still read
    assert (
        len(t.kernels) == KERNELS
        and int((t.kernels["end"] - t.kernels["start"]).sum()) == s["Total Time (ns)"].sum()
    )
    assert len(t.api) == API and not t.nvtx.empty


def test_odd_values_fall_back_to_an_exact_read(big, tmp_path):
    odd = tmp_path / "odd.sqlite"
    odd.write_bytes(pathlib.Path(big).read_bytes())
    con = sqlite3.connect(odd)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = 3000000, gridY = 2 WHERE rowid = 1")
    con.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET registersPerThread = 40.5, correlationId = "
        "NULL WHERE rowid = 2"
    )
    con.commit()
    con.close()
    k = load_nsys(odd).kernels
    assert k["grid"].iloc[0] == "3000000x2x1"  # past 2^21 blocks: no bits of x spill into y
    assert (
        k["registers"].iloc[1] == 40 and k["correlation"].iloc[1] == -1
    )  # a REAL value: read the exact way
    assert len(k) == KERNELS


def test_a_pickled_trace_holds_its_tables_and_a_rewritten_export_is_refused(big, tmp_path):
    import pickle

    from gpumagic.capture.nsys.sqlite import NsysExportError

    t = load_nsys(big)
    back = pickle.loads(pickle.dumps(t))  # every table read, the open export left behind
    assert back.source is None and len(back.kernels) == KERNELS
    pd.testing.assert_frame_equal(back.api_summary(), t.api_summary())
    path = tmp_path / "rewritten.sqlite"
    path.write_bytes(pathlib.Path(big).read_bytes())
    lazy = load_nsys(path)
    with open(
        path, "r+b"
    ) as f:  # the same file, rewritten in place (another export written over it)
        f.seek(0, os.SEEK_END)
        f.write(b"\0" * 4096)
    with pytest.raises(NsysExportError, match="rewritten after it was loaded"):
        len(lazy.kernels)
