"""Every bound in the expectation table can fail.

A bound that holds whatever is measured (``wrong_final_state_runs <= runs``: the checker
counts at most one wrong run per run; ``lost >= 0``) asserts nothing and makes a row look
stronger than it is. Each count has a range the checker's own caps give it; a bound is
vacuous when it holds at both ends of that range for every run count a cell may use.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from chaos import expectations
from chaos.checker import COUNT_NAMES
from chaos.expectations.table import PER_RUN_COUNTS, Between, Compare, Expectation, Satisfies

UNBOUNDED = 10**9
RUN_COUNTS = range(1, 21)


@dataclass(frozen=True)
class _Runs:
    """What Compare/Between read from a cell: only how many runs it had."""

    run_count: int


def possible_range(name: str, runs: int) -> tuple[int, int]:
    """The values the checker can report for a count in a cell of `runs` runs."""
    if name in PER_RUN_COUNTS:
        return 0, runs
    return 0, UNBOUNDED


def vacuous(name: str, bound: object) -> bool:
    """True when `bound` on count `name` holds at both ends of its range for every run count."""
    if isinstance(bound, Satisfies) or name not in COUNT_NAMES:
        return False  # a free-form test or the verdict: not decidable from a range
    assert isinstance(bound, (Compare, Between)), bound
    for runs in RUN_COUNTS:
        low, high = possible_range(name, runs)
        if not (bound.holds(low, _Runs(runs)) and bound.holds(high, _Runs(runs))):
            return False
    return True


def test_the_detector_flags_bounds_that_always_hold():
    always = Expectation.of(wrong_final_state_runs=expectations.le(expectations.RUNS), lost=expectations.ge(0))
    assert all(vacuous(n, b) for n, b in always.bounds.items())
    real = Expectation.of(wrong_final_state_runs=expectations.RUNS, lost=0, redelivered=expectations.ge(1),
                          duplicated=expectations.le(30))
    assert not any(vacuous(n, b) for n, b in real.bounds.items())


@pytest.mark.parametrize("row", expectations.table().rows(),
                         ids=lambda r: f"{r.area}:{r.preset}x{r.fault}:{','.join(f'{k}={v}' for k, v in sorted(r.params.items()))}")
def test_no_bound_in_the_table_always_holds(row):
    always = [f"{name} {bound.describe(None)}" for name, bound in row.expectation.bounds.items()
              if vacuous(name, bound)]
    assert not always, (f"{row.area} row {row.preset} x {row.fault}: bounds that hold whatever is measured: "
                        f"{always}; drop them or bound what can actually fail")
