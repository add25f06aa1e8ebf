"""A job folded in parts gives the job folded whole: the folds that run on a Dask cluster (some
ranks each, in any order, merged by the client) against one fold of every rank; and the pieces
that make a rank's summary cheap (the sketch counted per cell, the narrow read's skipped columns)
against their slower forms."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumagic.capture.nsys.backend import load_nsys
from gpumagic.job.fold import Fold
from gpumagic.job.rank_summary import summarize
from gpumagic.job.sketch import ZERO, buckets, counts


def finished(fold: Fold) -> dict[str, pd.DataFrame]:
    data = fold.finish("auto")
    out = {"figures": data.figures, "ranks": data.ranks, "busy": data.busy}
    out["rank_kernels"] = data.rank_kernels.assign(Name=data.rank_kernels["Name"].astype(str))
    out.update({f"summary {t}": df for t, df in data.summaries.items()})
    out["clock"] = pd.DataFrame([data.meta["clock_alignment"]])
    return out


def test_folds_of_parts_merged_in_any_order_equal_one_fold(synthetic):
    files = sorted(str(p) for p in synthetic.glob("rank*.sqlite"))
    summaries = [summarize(f) for f in files]
    whole = Fold(files)
    for i, s in enumerate(summaries):
        whole.add(i, copy.deepcopy(s))
    parts = []
    for ranks in ([4, 1], [0, 5, 3], [2]):  # ranks out of order, as they finish on a cluster
        part = Fold([])
        for i in ranks:
            part.add(i, copy.deepcopy(summaries[i]))
        parts.append(part)
    merged = Fold(files)
    for part in (parts[2], parts[0], parts[1]):
        merged.merge(part)
    assert sorted(merged.kept) == list(range(len(files)))
    a, b = finished(whole), finished(merged)
    for name in a:
        if name.startswith("summary"):  # per-name tables: rows in the same order, sums to rounding
            pd.testing.assert_frame_equal(a[name], b[name], check_exact=False, rtol=1e-12)
        else:
            pd.testing.assert_frame_equal(a[name], b[name], obj=name)
    assert finished(merged)["figures"].equals(a["figures"])  # finishing twice changes nothing


def test_a_merged_fold_leaves_its_parts_as_they_were(synthetic):
    files = sorted(str(p) for p in synthetic.glob("rank*.sqlite"))
    part = Fold([])
    part.add(0, summarize(files[0]))
    codes = part.kept[0].kernel_codes.copy()
    other = Fold(files)
    other.add(1, summarize(files[1]))
    other.merge(part)
    assert np.array_equal(part.kept[0].kernel_codes, codes)


def sorted_counts(groups: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The sketch by a sort of every value (the general path)."""
    key = (groups.astype(np.int64) << 22) | (buckets(values) - ZERO)
    uniq, n = np.unique(key, return_counts=True)
    return np.column_stack([uniq >> 22, (uniq & ((1 << 22) - 1)) + ZERO, n]).astype(np.int32)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.one_of(st.integers(0, 3), st.integers(0, 10**15))),
        min_size=1,
        max_size=300,
    )
)
def test_the_sketch_counted_per_cell_equals_a_sort(rows):
    groups = np.array([g for g, _ in rows], dtype=np.int64)
    values = np.array([v for _, v in rows], dtype=np.int64)
    assert np.array_equal(counts(groups, values), sorted_counts(groups, values))
    fractions = values / 7.0  # values under 1 share the zero bucket
    assert np.array_equal(counts(groups, fractions), sorted_counts(groups, fractions))


def test_a_narrow_read_skips_the_columns_no_summary_reads(synthetic):
    path = str(next(synthetic.glob("rank*.sqlite")))
    wide, narrow = load_nsys(path), load_nsys(path)
    narrow.source.narrow()
    k, api = narrow.kernels, narrow.api
    assert (k["stream"] == -1).all() and k["grid"].isna().all() and (api["thread"] == -1).all()
    # one value repeated: no row-sized array behind a skipped column
    assert k["stream"].to_numpy().strides == (0,) and api["thread"].to_numpy().strides == (0,)
    cols = ["start", "end", "device", "pid", "correlation", "name"]
    pd.testing.assert_frame_equal(
        k[cols].astype({"name": str}), wide.kernels[cols].astype({"name": str})
    )
    pd.testing.assert_frame_equal(
        api.drop(columns="thread").astype({"name": str}),
        wide.api.drop(columns="thread").astype({"name": str}),
    )
