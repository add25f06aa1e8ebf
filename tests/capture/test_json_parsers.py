"""A Chrome trace reads the same through either JSON parser: orjson (the ``perf`` extra) where it
is installed, the standard library's otherwise (or with ``GPUMAGIC_JSON=json``); a broken file is
the same clear error through both."""

from __future__ import annotations

import gzip

import pandas as pd
import pytest

from gpumagic.capture.chrome_trace import json_parser, load_trace
from gpumagic.errors import TraceFormatError
from gpumagic.trace import COLUMNS

from ..conftest import DATA

BLOCK = str(DATA / "torch_block.json.gz")


def test_both_parsers_give_the_same_trace(monkeypatch):
    pytest.importorskip("orjson")
    assert json_parser()[0] == "orjson"
    fast = load_trace(BLOCK)
    monkeypatch.setenv("GPUMAGIC_JSON", "json")
    assert json_parser()[0] == "json"
    plain = load_trace(BLOCK)
    for table in COLUMNS:
        pd.testing.assert_frame_equal(getattr(fast, table), getattr(plain, table))
    assert fast.meta["device"] == plain.meta["device"]


@pytest.mark.parametrize("parser", ["json", "default"])
def test_a_cut_off_trace_is_a_clear_error_through_either_parser(tmp_path, monkeypatch, parser):
    if parser == "json":
        monkeypatch.setenv("GPUMAGIC_JSON", "json")
    path = tmp_path / "cut.json.gz"
    with gzip.open(BLOCK, "rb") as f:
        whole = f.read()
    with gzip.open(path, "wb") as f:
        f.write(whole[: len(whole) // 2])
    with pytest.raises(TraceFormatError, match="not a readable Chrome-trace JSON"):
        load_trace(str(path))
