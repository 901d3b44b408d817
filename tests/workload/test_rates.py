"""Wilson interval and the false-zero run count (pure)."""
import pytest

from chaos.workload.rates import fraction_for, runs_for_false_zero, runs_for_fraction, short_of, wilson


def test_wilson_contains_the_estimate_and_is_sane_at_zero():
    r = wilson(17, 100)
    assert r.low < 0.17 < r.high and 0.08 < r.low < 0.1 and 0.28 < r.high < 0.31
    zero = wilson(0, 50)
    assert zero.low == 0.0 and 0 < zero.high < 0.13


def test_runs_for_false_zero():
    n = runs_for_false_zero(0.1)
    assert 0.9 ** n < 1e-6 <= 0.9 ** (n - 1)
    with pytest.raises(ValueError):
        runs_for_false_zero(0)


def test_short_of_is_the_binomial_tail():
    assert short_of(0.5, 2, 1) == pytest.approx(0.25)          # both runs without a break
    assert short_of(0.9, 3, 2) == pytest.approx(0.1 ** 3 + 3 * 0.9 * 0.1 ** 2)
    assert short_of(0.3, 4, 0) == 0.0


def test_runs_for_fraction_is_the_fewest_runs_that_bound_a_false_zero():
    n = runs_for_fraction(0.6, 0.25, 1e-3)
    assert short_of(0.6, n, -(-n // 4)) <= 1e-3 < short_of(0.6, n - 1, -(-(n - 1) // 4))
    assert runs_for_fraction(0.5, 1 / 10, 1e-3) == 10   # one break in 10: 0.5 ** 10 < 1e-3
    with pytest.raises(ValueError, match="lower min_fraction"):
        runs_for_fraction(0.3, 0.9, 1e-3, most=50)


def test_fraction_for_is_the_largest_fraction_the_runs_bound():
    assert fraction_for(0.9, 3, 2e-3) == pytest.approx(1 / 3)     # none of three: 1e-3; fewer than two: 0.028
    assert fraction_for(0.99, 4, 1e-3) == pytest.approx(3 / 4)    # fewer than 3 of 4: 5.9e-6; than 4: 0.039
    with pytest.raises(ValueError, match="give the cell runs_for_false_zero"):
        fraction_for(0.9, 2, 1e-3)
