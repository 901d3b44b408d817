"""Wilson interval and the false-zero run count (pure)."""
import pytest

from chaos.workload.rates import runs_for_false_zero, wilson


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
