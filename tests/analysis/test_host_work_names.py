"""Names matched per distinct name: a categorical (a big export's API names) gives the answer its
strings give (analysis/host_work.py ``_named``)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from gpumagic.analysis.host_work import _named


def test_a_categorical_matches_as_its_strings_do():
    names = ["cudaFree", "cudaLaunchKernel", "cudaMalloc", "cudaFree", None, "cudaMallocAsync"]
    pattern = re.compile(r"^cuda(Free|Malloc)$")
    as_strings = _named(pd.Series(names, dtype=object).fillna(""), pattern)
    as_categorical = _named(pd.Series(names, dtype="category"), pattern)
    assert as_strings.tolist() == [True, False, True, True, False, False]
    np.testing.assert_array_equal(as_categorical, as_strings)


def test_a_categorical_with_no_match_or_no_rows():
    pattern = re.compile("nothing")
    assert not _named(pd.Series(["a", "b"], dtype="category"), pattern).any()
    assert _named(pd.Series([], dtype="category"), pattern).tolist() == []
