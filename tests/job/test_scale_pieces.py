"""The pieces that keep a job's fold bounded: the quantile sketch's error, merged statistics equal
to one pass over all values, busy bins that sum to the busy time, and a page whose size does not
grow with the ranks."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumagic.job import Job
from gpumagic.job.busy_bins import bin_busy, job_grid, rebin
from gpumagic.job.fold import JobData
from gpumagic.job.sketch import ALPHA, counts, median, merge_counts
from gpumagic.job.stats import NameTable, name_stats
from gpumagic.trace.summaries import grouped_durations


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 10**12), min_size=1, max_size=400), st.integers(1, 5))
def test_the_sketch_median_is_within_alpha(values, parts):
    v = np.array(values, dtype=np.int64)
    chunks = np.array_split(v, parts)
    merged = merge_counts([counts(np.zeros(len(c), np.int64), c) for c in chunks])
    got = np.clip(median(merged, 1)[0], v.min(), v.max())
    exact = float(np.median(v))
    assert abs(got - exact) <= ALPHA * exact + 1e-9


def test_merged_statistics_equal_one_pass():
    rng = np.random.default_rng(1)
    table = NameTable()
    allv, allc = [], []
    for _ in range(70):  # more than a flush's batch
        n = int(rng.integers(1, 300))
        codes = rng.integers(0, 4, n)
        v = rng.integers(1, 10**7, n)
        table.add(name_stats(codes, v, ["a", "b", "c", "d"]))
        allv.append(v)
        allc.append(codes)
    v, c = np.concatenate(allv), np.concatenate(allc)
    ref = grouped_durations(
        c, v, [np.array(["a", "b", "c", "d"], dtype=object)], "Instances", ["Name"]
    ).set_index("Name")
    mine = table.frame("kernels").set_index("Name").loc[ref.index]
    for col in ("Total Time (ns)", "Instances", "Min (ns)", "Max (ns)"):
        assert (mine[col].to_numpy() == ref[col].to_numpy()).all(), col
    np.testing.assert_allclose(mine["StdDev (ns)"], ref["StdDev (ns)"], rtol=1e-9)
    assert (abs(mine["Med (ns)"] - ref["Med (ns)"]) <= ALPHA * ref["Med (ns)"]).all()


def test_busy_bins_sum_to_the_busy_time_on_any_grid():
    s = np.array([100, 150, 1_000, 5_000_000], dtype=np.int64)
    e = np.array([200, 300, 2_000, 5_000_500], dtype=np.int64)
    b = bin_busy([(s, e)], 0, 6_000_000)
    busy = 200 + 1_000 + 500
    assert abs(float(b.busy.sum()) * (1 << b.shift) - busy) < 1e-3 * busy
    shift, first, n = job_grid(0, 6_000_000, b.shift, 16)
    for offset in (0, 12_345):
        total = float(rebin(b, offset, shift, first, n).sum()) * (1 << shift)
        assert abs(total - busy) < 1e-3 * busy


def test_the_page_stays_small_at_thousands_of_ranks():
    n = 4096
    rng = np.random.default_rng(2)
    fig = pd.DataFrame(
        {
            "rank": np.arange(n),
            "label": [f"rank {i}" for i in range(n)],
            "pid": np.arange(n) + 100,
            "device": 0,
            "gpu": "H100",
            "window": "cuda",
            "start": 0,
            "end": 10**9,
            "span_ns": 10**9,
            "busy_ns": rng.integers(5 * 10**8, 10**9, n),
            "nccl_ns": rng.integers(10**7, 10**8, n),
            "nccl_share": 0.1,
            "overlap_ns": 0,
            "overlap_share": 0.0,
            "work_ns": 5 * 10**8,
            "kernels": 100,
            "nccl_kernels": 10,
        }
    )
    for k in ("span", "busy", "work"):
        fig[f"{k}_skew_ns"], fig[f"{k}_skew"] = 0, 0.0
    ranks = pd.DataFrame(
        {
            "rank": np.arange(n),
            "label": fig["label"],
            "path": [f"/j/rank{i}.sqlite" for i in range(n)],
            "host": [f"node-{i // 8}" for i in range(n)],
            "pids": (np.arange(n) + 100).astype(str),
            "nccl_wait_ns": 0,
            "sync_calls": 0,
            "sync_ns": 0,
            "sync_by_name": "",
            "launches": 0,
            "missing": 0,
            "graph": False,
            "kernel_ns": 0,
            "read_s": 0.1,
        }
    )
    busy = pd.DataFrame(rng.random((n, 240), dtype=np.float32), index=pd.Index(range(n)))
    busy.columns = [str(c) for c in busy.columns]
    busy.attrs.update(shift=22, first=0)
    kernels = pd.DataFrame(
        {
            "rank": np.arange(n),
            "Name": pd.Categorical(["k"] * n),
            "Instances": 1,
            "Total Time (ns)": 1,
            "Min (ns)": 1,
            "Max (ns)": 1,
        }
    )
    empty = pd.DataFrame()
    data = JobData(
        fig,
        ranks,
        dict.fromkeys(("kernels",), empty),
        kernels,
        busy,
        {"source": list(ranks["path"]), "rank_rule": "given", "gpus": ["H100"]},
    )
    job = Job(data)
    html = job._repr_html_()
    assert len(html.encode()) < 5e6
    assert len(str(job).splitlines()) < 80
