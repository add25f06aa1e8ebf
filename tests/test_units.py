import pytest

from gpumagic.units import format_si, format_time


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0.00369, "3.69 ms"),
        (2.14e-5, "21.4 \u00b5s"),
        (8.1e-6, "8.1 \u00b5s"),
        (1.5, "1.5 s"),
        (3e-9, "3 ns"),
        (0.0, "0 ns"),
        (0.00099996, "1 ms"),  # rounding carries into the next unit
        (189e-3, "189 ms"),
    ],
)
def test_format_time(seconds, text):
    assert format_time(seconds) == text


def test_format_time_precision_and_minutes():
    assert format_time(0.0012345, precision=5) == "1.2345 ms"
    assert format_time(125.0) == "2min 5.0s"


def test_micro_sign_falls_back_to_u_on_ascii_stdout(monkeypatch):
    import io
    import sys

    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    assert format_time(2e-5) == "20 us"


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (5.19e13, "FLOP/s", "51.9 TFLOP/s"),
        (3.046e12, "B/s", "3.05 TB/s"),
        (1.5e3, "B/s", "1.5 kB/s"),
        (12.0, "FLOP/s", "12 FLOP/s"),
        (-2.5e9, "B/s", "-2.5 GB/s"),
        (2e18, "FLOP/s", "2e+03 PFLOP/s"),
        (None, "B/s", "n/a"),
        (float("nan"), "B/s", "n/a"),
    ],
)
def test_format_si(value, unit, text):
    assert format_si(value, unit) == text
    assert format_si(None, unit, missing="\u2014") == "\u2014"
