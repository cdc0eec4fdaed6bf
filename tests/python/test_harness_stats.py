"""Medians, spread, ratios to the baseline, speedups and the interleaved run order."""
import math

import pytest

from larder_bench.stats import interleave, linear_fit, median, ratio, speedup, summarize


def test_median_odd_and_even():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    assert median([7]) == 7
    with pytest.raises(ValueError):
        median([])


def test_summary_min_max_spread_ignores_missing():
    s = summarize([2.0, None, 4.0, float("nan"), 3.0])
    assert (s.median, s.min, s.max, s.n) == (3.0, 2.0, 4.0, 3)
    assert s.spread == pytest.approx((4.0 - 2.0) / 3.0)
    assert summarize([None, float("inf")]) is None


def test_ratio_to_baseline():
    assert ratio(1.5, 3.0) == 0.5
    assert ratio(3.0, 1.5) == 2.0
    assert ratio(None, 1.0) is None
    assert ratio(1.0, None) is None
    assert ratio(1.0, 0) is None


def test_speedup_time_and_throughput():
    # time: time(1)/time(t); throughput: thr(t)/thr(1) (DESIGN §3)
    assert speedup(10.0, 2.5, higher_is_better=False) == 4.0
    assert speedup(100.0, 350.0, higher_is_better=True) == 3.5
    assert speedup(None, 1.0, False) is None


def test_interleave_round_robin_per_case():
    order = interleave(["c1", "c2"], ["A", "B", "C"], 2)
    assert [(c, a) for c, a, _ in order] == [
        ("c1", "A"), ("c1", "B"), ("c1", "C"), ("c1", "A"), ("c1", "B"), ("c1", "C"),
        ("c2", "A"), ("c2", "B"), ("c2", "C"), ("c2", "A"), ("c2", "B"), ("c2", "C")]
    assert [r for _, _, r in order[:6]] == [0, 0, 0, 1, 1, 1]
    with pytest.raises(ValueError):
        interleave(["c"], ["A"], 0)


def test_linear_fit():
    b, m = linear_fit([1, 2, 3, 4], [3, 5, 7, 9])
    assert math.isclose(b, 1.0) and math.isclose(m, 2.0)
    assert linear_fit([2, 2], [5, 7]) == (6.0, 0.0)
