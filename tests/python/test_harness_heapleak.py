"""Recalibrating seed 000's heap-leak lower-bound predictor from single-thread runs."""
import pytest

from larder_bench.heapleak import SEED_PREDICTOR, Predictor, calibrate


def test_seed_predictor_values():
    # seed 000 §5.2: mpf_lower = 14 + 1.1tr + 127.6t
    assert SEED_PREDICTOR(1, 1) == pytest.approx(142.7)
    assert SEED_PREDICTOR(3, 8) == pytest.approx(14 + 1.1 * 24 + 127.6 * 3)


def test_calibration_recovers_the_seed_constants():
    # Single-thread runs that follow the seed's own model exactly give its constants back.
    by_round = {r: 14 + 1.1 * r + 127.6 for r in range(1, 9)}
    p = calibrate(14, by_round)
    assert p.a == pytest.approx(14)
    assert p.b == pytest.approx(1.1)
    assert p.c == pytest.approx(127.6)
    assert p(3, 4) == pytest.approx(14 + 1.1 * 12 + 127.6 * 3)


def test_calibration_is_a_least_squares_line():
    # Noisy rounds: slope and intercept are the least-squares ones, a is the one-object run.
    p = calibrate(60, [(1, 200), (2, 203), (3, 202), (4, 207)])
    assert p.b == pytest.approx(2.0)          # slope of (200, 203, 202, 207) over 1..4
    assert p.a + p.c == pytest.approx(198.0)  # the line's value at r = 0
    assert p.a == 60
    assert isinstance(p, Predictor)


def test_calibration_needs_two_round_counts():
    with pytest.raises(ValueError):
        calibrate(14, {1: 150})
    with pytest.raises(ValueError):
        calibrate(14, [(2, 150), (2, 151)])
