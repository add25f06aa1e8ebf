"""A Chrome trace reads the same through every JSON parser: msgspec or orjson (the ``perf`` extra)
where installed, the standard library's otherwise (or with ``GPUMAGIC_JSON=json``); a broken file is
the same clear error through each, and what only the standard library reads (NaN, a byte-order
mark) is read."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from gpumagic.capture.chrome.reader import json_parser, load_trace
from gpumagic.errors import TraceFormatError
from gpumagic.trace import COLUMNS

from ...conftest import DATA

BLOCK = str(DATA / "torch_block.json.gz")


def test_the_fastest_installed_parser_is_the_default(monkeypatch):
    monkeypatch.delenv("GPUMAGIC_JSON", raising=False)
    installed = [m for m in ("msgspec", "orjson") if _installed(m)]
    assert json_parser()[0] == (installed[0] if installed else "json")


def test_an_unknown_parser_name_is_the_default(monkeypatch):
    monkeypatch.delenv("GPUMAGIC_JSON", raising=False)
    default = json_parser()[0]
    monkeypatch.setenv("GPUMAGIC_JSON", "simdjson")
    assert json_parser()[0] == default


def test_a_cut_off_file_is_not_parsed_twice(tmp_path, monkeypatch):
    """The standard library's second reading is kept for what only it reads: a cut-off file's
    error comes from the fast parser, without a second parse."""
    pytest.importorskip("msgspec")
    monkeypatch.setenv("GPUMAGIC_JSON", "msgspec")
    calls = []
    real = json.loads
    monkeypatch.setattr(json, "loads", lambda *a, **k: calls.append(1) or real(*a, **k))
    path = tmp_path / "cut.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel"', encoding="utf-8")
    with pytest.raises(TraceFormatError):
        load_trace(str(path))
    assert calls == []


def _installed(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("parser", ["msgspec", "orjson"])
def test_every_parser_gives_the_same_trace(monkeypatch, parser):
    pytest.importorskip(parser)
    monkeypatch.setenv("GPUMAGIC_JSON", parser)
    assert json_parser()[0] == parser
    fast = load_trace(BLOCK)
    monkeypatch.setenv("GPUMAGIC_JSON", "json")
    assert json_parser()[0] == "json"
    plain = load_trace(BLOCK)
    for table in COLUMNS:
        pd.testing.assert_frame_equal(getattr(fast, table), getattr(plain, table))
    assert fast.meta["device"] == plain.meta["device"]


@pytest.mark.parametrize("parser", ["msgspec", "orjson"])
@pytest.mark.parametrize(
    "odd",
    ["NaN", "1e999", '"\\ud800"', "BOM"],
    ids=["nan", "overflow", "lone-surrogate", "bom"],
)
def test_what_only_the_standard_library_reads_is_read(tmp_path, monkeypatch, parser, odd):
    """Python's own ``json.dump`` writes NaN for a float that is none, a number beyond a double
    or a lone surrogate escape passes through it, some tools write a byte-order mark; the fast
    parsers refuse each, and the file is read all the same, its kernels counted."""
    pytest.importorskip(parser)
    monkeypatch.setenv("GPUMAGIC_JSON", parser)
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 2.0}
    events = [{**kernel, "ts": 10.0}, {**kernel, "ts": 20.0, "args": {"queued": "ODD"}}]
    text = json.dumps({"traceEvents": events})
    text = "\ufeff" + text if odd == "BOM" else text.replace('"ODD"', odd)
    path = tmp_path / "odd.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError):
        json_parser()[1](path.read_bytes())  # the fast parser alone refuses it
    assert len(load_trace(str(path)).kernels) == 2


@pytest.mark.parametrize("parser", ["json", "msgspec", "orjson"])
def test_a_cut_off_trace_is_a_clear_error_through_either_parser(tmp_path, monkeypatch, parser):
    monkeypatch.setenv("GPUMAGIC_JSON", parser)
    path = tmp_path / "cut.json.gz"
    with gzip.open(BLOCK, "rb") as f:
        whole = f.read()
    with gzip.open(path, "wb") as f:
        f.write(whole[: len(whole) // 2])
    with pytest.raises(TraceFormatError, match="not a readable Chrome-trace JSON"):
        load_trace(str(path))
