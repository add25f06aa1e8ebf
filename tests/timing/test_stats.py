import math
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpumagic.timing.stats import StopRule, iqr, median, median_ci, quantile

floats = st.floats(min_value=1e-9, max_value=1e3, allow_nan=False, allow_infinity=False)


@given(st.lists(floats, min_size=1, max_size=200), st.floats(min_value=0, max_value=1))
def test_quantile_equals_numpy_linear(values, q):
    assert quantile(values, q) == pytest.approx(float(np.quantile(values, q)), rel=1e-12, abs=1e-15)


def test_median_and_iqr_of_a_known_sample():
    xs = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert median(xs) == 3.0
    assert iqr(xs) == 4.0 - 2.0


def test_quantile_rejects_empty_and_out_of_range():
    with pytest.raises(ValueError, match="empty"):
        quantile([], 0.5)
    with pytest.raises(ValueError, match="within"):
        quantile([1.0], 1.5)


@given(st.lists(floats, min_size=1, max_size=300))
def test_median_ci_brackets_the_median(values):
    lo, hi = median_ci(values)
    assert lo <= median(values) <= hi


def test_median_ci_covers_the_true_median_about_95_percent_of_the_time():
    rng = random.Random(1)
    hits = 0
    trials = 2000
    for _ in range(trials):
        xs = [
            rng.lognormvariate(0, 0.5) for _ in range(41)
        ]  # skewed, like timings; true median = 1
        lo, hi = median_ci(xs)
        hits += lo <= 1.0 <= hi
    assert 0.92 <= hits / trials <= 0.99


def test_median_ci_narrows_as_samples_grow():
    rng = random.Random(2)
    few = [rng.gauss(1, 0.01) for _ in range(20)]
    many = few + [rng.gauss(1, 0.01) for _ in range(2000)]
    w = lambda xs: median_ci(xs)[1] - median_ci(xs)[0]  # noqa: E731
    assert w(many) < w(few) / 4


def test_stop_rule_waits_for_enough_samples_and_time():
    rule = StopRule(min_samples=10, min_time=0.1)
    assert not rule.decide([1e-3] * 9, 1.0).stop
    assert "fewer than 10" in rule.decide([1e-3] * 9, 1.0).reason
    d = rule.decide([1e-3] * 50, 0.05)
    assert not d.stop and "less than 100 ms" in d.reason


def test_stop_rule_stops_on_a_stable_median():
    rng = random.Random(3)
    xs = [1e-3 * (1 + rng.gauss(0, 1e-4)) for _ in range(30)]
    d = StopRule().decide(xs, 0.2)
    assert d.stop and "stable" in d.reason


def test_stop_rule_continues_while_noisy():
    rng = random.Random(4)
    xs = [1e-3 * (1 + rng.gauss(0, 0.05)) for _ in range(30)]
    d = StopRule().decide(xs, 0.2)
    assert not d.stop and "CI" in d.reason


def test_stop_rule_continues_while_drifting():
    xs = [1e-3] * 15 + [1.01e-3] * 16  # tight, but the second half moved by 1 %
    d = StopRule(rel_ci=0.05).decide(xs, 0.2)
    assert not d.stop and "halves differ" in d.reason


def test_stop_rule_caps_samples():
    d = StopRule(max_samples=5, min_samples=10).decide([1.0, 2.0, 3.0, 4.0, 5.0], 10)
    assert d.stop and "maximum" in d.reason


def test_ci_width_matches_order_statistics():
    xs = list(range(1, 101))
    lo, hi = median_ci(xs)
    half = 1.96 * math.sqrt(100) / 2
    assert lo == xs[math.floor(50 - half)] and hi == xs[math.ceil(50 + half) - 1]


def test_stop_decision_names_the_unmet_condition():
    rule = StopRule(min_samples=10, min_time=0.1)
    assert rule.decide([1e-3] * 9, 1.0).unmet == "min_samples"
    assert rule.decide([1e-3] * 50, 0.05).unmet == "min_time"
    rng = random.Random(4)
    assert rule.decide([1e-3 * (1 + rng.gauss(0, 0.05)) for _ in range(30)], 0.2).unmet == "rel_ci"
    assert StopRule(rel_ci=0.05).decide([1e-3] * 15 + [1.01e-3] * 16, 0.2).unmet == "rel_drift"
    assert StopRule().decide([1e-3] * 30, 0.2).unmet == ""
    assert all(hasattr(rule, name) for name in ("min_samples", "min_time", "rel_ci", "rel_drift"))
