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
from chaos.expectations.table import PER_RUN_COUNTS, Between, Compare, EachRun, Expectation, Satisfies

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
    if isinstance(bound, EachRun):
        low, high = possible_range(name, 1)
        return bound.inner.holds(low, _Runs(1)) and bound.inner.holds(high, _Runs(1))
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
                          duplicated=expectations.le(30), recovered=expectations.each_run(expectations.ge(1)))
    assert not any(vacuous(n, b) for n, b in real.bounds.items())


@pytest.mark.parametrize("row", expectations.table().rows(),
                         ids=lambda r: f"{r.area}:{r.preset}x{r.fault}:{','.join(f'{k}={v}' for k, v in sorted(r.params.items()))}")
def test_no_bound_in_the_table_always_holds(row):
    always = [f"{name} {bound.describe(None)}" for name, bound in row.expectation.bounds.items()
              if vacuous(name, bound)]
    assert not always, (f"{row.area} row {row.preset} x {row.fault}: bounds that hold whatever is measured: "
                        f"{always}; drop them or bound what can actually fail")


def strategy_of(row):
    """The strategy a row's cell runs: its preset with the preset's own params and replaced parts."""
    from chaos.strategies.presets import SLOTS, resolve
    own = ",".join(f"{k}={v}" for k, v in sorted(row.params.items()) if "." not in k and k not in SLOTS)
    parts = {k: v for k, v in row.params.items() if k in SLOTS}
    return resolve(row.preset + (f":{own}" if own else ""), parts)


@pytest.mark.parametrize("row", expectations.table().rows(),
                         ids=lambda r: f"{r.area}:{r.preset}x{r.fault}:{','.join(f'{k}={v}' for k, v in sorted(r.params.items()))}")
def test_no_row_bounds_a_count_its_parts_make_zero(row):
    zero = strategy_of(row).zero_by_construction()
    bounded = {name: why for name, why in zero.items() if name in row.expectation.bounds}
    assert not bounded, (f"{row.area} row {row.preset} x {row.fault}: bounds counts that are zero by construction: "
                         f"{bounded}; drop them (they cannot fail) or bound what can")


def _cells(runs: int) -> list:
    """Cells a free-form bound is tried on: every count 0, every count huge, and mixed figures."""
    import random

    from chaos.checker import CellResult, Counts, RunResult
    rng = random.Random(7)
    vectors = [dict.fromkeys(COUNT_NAMES, 0), dict.fromkeys(COUNT_NAMES, UNBOUNDED)]
    vectors += [{n: rng.choice((0, 1, runs, 2 * runs, 100, UNBOUNDED)) for n in COUNT_NAMES} for _ in range(200)]
    out = []
    for v in vectors:
        counts = Counts(**v)
        kinds = _AnyKind(rng.choice((0, 1, runs, 100, UNBOUNDED)))   # every anomaly kind at one figure
        one = RunResult(0, counts, "valid", [], kinds, {})
        out.append(CellResult(counts, "valid", [one] * runs, [], kinds, []))
    return out


class _AnyKind(dict):
    """anomaly_counts where every kind has the same figure (a bound may read any kind)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def get(self, key, default=None):
        return self.n

    def __getitem__(self, key):
        return self.n


def satisfies_vacuous(bound: Satisfies) -> bool:
    """True when a `satisfies` test holds on every tried cell, for every run count."""
    return all(bound.holds(None, cell) for runs in (1, 2, 3, 10) for cell in _cells(runs))


def test_the_detector_flags_a_satisfies_bound_that_always_holds():
    assert satisfies_vacuous(expectations.satisfies(lambda c: c.counts.lost >= 0, "lost >= 0"))
    assert not satisfies_vacuous(expectations.satisfies(lambda c: c.counts.lost == c.counts.handled, "lost == handled"))


@pytest.mark.parametrize("row", expectations.table().rows(),
                         ids=lambda r: f"{r.area}:{r.preset}x{r.fault}:{','.join(f'{k}={v}' for k, v in sorted(r.params.items()))}")
def test_no_satisfies_bound_in_the_table_always_holds(row):
    always = [f"{name}: {bound.describe(None)}" for name, bound in row.expectation.bounds.items()
              if isinstance(bound, Satisfies) and satisfies_vacuous(bound)]
    assert not always, f"{row.area} row {row.preset} x {row.fault}: satisfies bounds that hold whatever is measured: {always}"


ROW_IDS = lambda r: f"{r.area}:{r.preset}x{r.fault}:{','.join(f'{k}={v}' for k, v in sorted(r.params.items()))}"  # noqa: E731


def _is_zero(bound: object) -> bool:
    return isinstance(bound, Compare) and bound.op == "==" and bound.value == 0


def summed_lower_bound(bound: object) -> bool:
    """A bound asking for at least something, over the sum of the runs: one run can carry it."""
    if isinstance(bound, Compare):
        return bound.op in (">=", ">") and not (bound.op == ">=" and bound.value == 0)
    if isinstance(bound, Between):
        return not (bound.low == 0)
    return False


@pytest.mark.parametrize("row", expectations.table().rows(), ids=ROW_IDS)
def test_must_break_bounds_hold_per_run(row):
    summed = [f"{name} {bound.describe(None)}" for name, bound in row.expectation.bounds.items()
              if name in COUNT_NAMES and summed_lower_bound(bound)]
    assert not summed, (f"{row.area} row {row.preset} x {row.fault}: lower bounds summed over runs {summed}: "
                        "one run can carry them; use each_run(ge(1)) (or each_run(..., min_fraction=...))")


@pytest.mark.parametrize("row", expectations.table().rows(), ids=ROW_IDS)
def test_no_copy_is_judged_by_the_database_too(row):
    bounds = row.expectation.bounds
    if _is_zero(bounds.get("duplicated")):
        assert _is_zero(bounds.get("projection_drift")), (
            f"{row.area} row {row.preset} x {row.fault}: duplicated == 0 comes from the workers' own ops; "
            "bound projection_drift == 0 too (PostgreSQL's count of the effects)")


@pytest.mark.parametrize("row", expectations.table().rows(), ids=ROW_IDS)
def test_nothing_lost_bounds_the_undecided_too(row):
    bounds = row.expectation.bounds
    if _is_zero(bounds.get("lost")):
        assert "indeterminate" in bounds, (
            f"{row.area} row {row.preset} x {row.fault}: lost == 0 can hide in indeterminate; bound it "
            "(0, or what the fault explains)")


def _area_cells() -> list[tuple[str, object]]:
    import importlib
    out = []
    for area in expectations.AREA_MODULES:
        module = importlib.import_module(f"chaos.expectations.{area}")
        out += [(area, cell) for cell in getattr(module, "CELLS", [])]
    return out


@pytest.mark.parametrize("area, cell", _area_cells(), ids=lambda v: v if isinstance(v, str) else v.test_id)
def test_a_fraction_of_runs_follows_from_a_measured_rate(area, cell):
    """A "must break" bound met by only a fraction of the runs states the break's measured rate
    (BreakRate) and takes its fraction and the cell's run count from it: a correct framework
    then misses it with probability at most the rate's bound, as the lock races' false zero."""
    for name, bound in cell.bounds.items():
        if not isinstance(bound, EachRun) or bound.min_fraction >= 1:
            continue
        rate = bound.rate
        assert rate is not None, (f"{area} cell {cell.test_id}: {name} asks for a break in "
                                  f">= {bound.min_fraction:.0%} of runs with no measured rate: give "
                                  "each_run(ge(1), rate=BreakRate(k, n)) (chaos.workload.rates)")
        assert bound.min_fraction == rate.min_fraction and cell.runs >= rate.runs, (
            f"{area} cell {cell.test_id}: {name}: {cell.runs} runs at >= {bound.min_fraction:.0%}, "
            f"but its rate asks for {rate}")
        assert rate.false_zero <= rate.probability, rate


def test_a_row_with_too_few_runs_for_its_rate_is_refused():
    from chaos.expectations.cells import Cell
    from chaos.workload.rates import BreakRate
    rate = BreakRate(31, 32)          # 4 runs
    cell = Cell("s1", ("none",), 2, {"redelivered": expectations.each_run(expectations.ge(1), rate=rate)})
    with pytest.raises(AssertionError, match="but its rate asks for"):
        test_a_fraction_of_runs_follows_from_a_measured_rate("test", cell)
    bare = Cell("s1", ("none",), 2, {"redelivered": expectations.each_run(expectations.ge(1), 0.5)})
    with pytest.raises(AssertionError, match="no measured rate"):
        test_a_fraction_of_runs_follows_from_a_measured_rate("test", bare)
