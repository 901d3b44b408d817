"""The expectation mechanism: bounds, mismatch texts and tags, the table and its lookup."""
from __future__ import annotations

import re
import types

import pytest
from checker_histories import CREATED_42, PAID_42, History, final

import chaos.expectations as expectations
from chaos.errors import BadArguments
from chaos.checker import check_run, summarize
from chaos.expectations.table import (
    RUNS,
    Expectation,
    ExpectationError,
    ExpectationTable,
    Row,
    UnknownVerdict,
    assert_cell,
    between,
    ge,
    gt,
    le,
    lt,
    row,
    satisfies,
)


def cell_with(wrong_runs: int, runs: int, *, lost_per_run: int = 0, unknown: bool = False):
    results = []
    for i in range(runs):
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
        h.handle(PAID_42, "2-0")
        if i >= lost_per_run:
            h.handle(CREATED_42, "1-0", effect="applied" if i < wrong_runs else "stale")
        state = ("created", 1) if i < wrong_runs else ("paid", 2)
        results.append(check_run(h.ops, final({"42": state}), run=i,
                                 unknown_reasons=["drain timed out"] if unknown else []))
    return summarize(results)


@pytest.mark.parametrize("bound, measured_wrong, holds", [
    (0, 0, True), (0, 1, False), (RUNS, 4, True), (RUNS, 3, False),
    (ge(2), 2, True), (gt(2), 2, False), (le(1), 2, False), (lt(3), 2, True),
    (between(0.25 * RUNS, 0.75 * RUNS), 2, True), (between(0.25 * RUNS, 0.75 * RUNS), 4, False),
    (satisfies(lambda c: c.counts.wrong_keys == c.counts.wrong_final_state_runs, "one key per run"), 3, True),
])
def test_bounds(bound, measured_wrong, holds):
    cell = cell_with(measured_wrong, runs=4)
    found = Expectation.of(wrong_final_state_runs=bound).mismatches(cell)
    assert (found == []) is holds


def test_mismatch_text_names_count_bound_and_measure():
    cell = cell_with(0, runs=10)
    (text,) = Expectation.of(wrong_final_state_runs=RUNS).mismatches(cell)
    assert text.startswith("wrong_final_state_runs: expected == 10 (all runs), measured 0/10")
    assert text.endswith("[MISSING_WRONG_FINAL_STATE_RUNS]")


def test_too_many_is_tagged_with_the_measured_figure():
    cell = cell_with(0, runs=2, lost_per_run=1)
    (text,) = Expectation.of(lost=0).mismatches(cell)
    assert text == "lost: expected == 0, measured 1 [LOST: 1]"


def test_per_run_multiple_is_described():
    cell = cell_with(0, runs=3)
    (text,) = Expectation.of(published=10 * RUNS).mismatches(cell)
    assert text.startswith("published: expected == 30 (10 per run), measured 6 over 3 runs")


def test_bound_on_a_count_that_does_not_exist_lists_the_counts():
    with pytest.raises(ExpectationError, match="no such count.*lost"):
        Expectation.of(lsot=0)
    with pytest.raises(ExpectationError, match="use a number, RUNS"):
        Expectation.of(lost=[0])


def test_assert_cell_raises_with_every_mismatch_and_all_figures():
    cell = cell_with(1, runs=4, lost_per_run=1)
    with pytest.raises(AssertionError) as info:
        assert_cell(cell, Expectation.of(lost=0, wrong_final_state_runs=0), preset="s5", fault="none")
    message = str(info.value)
    assert "EXPECTATION MISMATCH s5 x none (2 of 3 bounds failed)" in message   # liveness is the third
    assert "[LOST: 1]" in message and "[WRONG_FINAL_STATE_RUNS: 1/4]" in message
    assert re.search(r"measured over 4 runs, verdict invalid: published=8 lost=1 .*wrong_keys=1", message)


def test_assert_cell_passes_a_matching_cell():
    assert_cell(cell_with(4, runs=4), Expectation.of(wrong_final_state_runs=RUNS, lost=0))


def test_unknown_cell_is_broken_not_failed_unless_the_verdict_is_expected():
    cell = cell_with(0, runs=2, unknown=True)
    with pytest.raises(UnknownVerdict, match="UNKNOWN: s1 x none: run 0: drain timed out"):
        assert_cell(cell, Expectation.of(lost=0), preset="s1", fault="none")
    assert not issubclass(UnknownVerdict, AssertionError)
    assert_cell(cell, Expectation.of(verdict="unknown"))


def test_liveness_is_promised_by_every_row_that_does_not_bound_it():
    """A consumer that stopped consuming fails a row that says nothing about liveness; a
    row that bounds stopped_consuming itself decides."""
    from dataclasses import replace
    cell = cell_with(0, runs=2)
    stopped = replace(cell, counts=replace(cell.counts, stopped_consuming=3))
    exp = Expectation.of(wrong_final_state_runs=0)
    assert exp.mismatches(cell) == []
    assert exp.mismatches(stopped) == ["stopped_consuming: expected == 0, measured 3 [STOPPED_CONSUMING: 3]"]
    with pytest.raises(AssertionError, match=r"\(1 of 2 bounds failed\)"):
        assert_cell(stopped, exp)
    assert Expectation.of(stopped_consuming=ge(1)).mismatches(stopped) == []
    assert exp.to_json() == {"wrong_final_state_runs": "== 0"}   # the rows' own bounds only


def test_assert_cell_without_expectation_says_where_to_add_one():
    with pytest.raises(AssertionError, match="EXPECTATION MISSING for s9 x none: add a row"):
        assert_cell(cell_with(0, runs=1), None, preset="s9", fault="none")


def test_to_json_is_symbolic():
    exp = Expectation.of(note="reference 10/10", wrong_final_state_runs=RUNS, dlq=10 * RUNS,
                         reordered=gt(0), lost=between(0, 5))
    assert exp.to_json() == {"wrong_final_state_runs": "== runs", "dlq": "== 10 * runs",
                             "reordered": "> 0", "lost": "in [0, 5]", "note": "reference 10/10"}


class TestTable:
    table = ExpectationTable([
        row("s1", wrong_final_state_runs=0),
        row("s2", "none", params={"shards": 8}, wrong_final_state_runs=0, note="8 shards"),
        row("ack-on-receive", "kill-consumer", params={"kill-consumer.at": "mid_batch"}, recovered=0),
        row("s1", "kill-consumer+latency", lost=0),
    ])

    def test_default_parameters_match_the_plain_row(self):
        assert self.table.lookup("s1", "none") is not None
        assert self.table.lookup("s1", None) is not None

    def test_non_default_parameters_have_no_expectation_unless_a_row_names_them(self):
        assert self.table.lookup("s1", "none", {"consumers": 3}) is None
        assert self.table.lookup("s1:consumers=3", "none") is None
        assert self.table.lookup("s2:shards=8", "none").note == "8 shards"
        assert self.table.lookup("s2", "none", {"shards": "8"}).note == "8 shards"
        assert self.table.lookup("s2", "none") is None

    def test_fault_parameters_and_several_faults(self):
        assert self.table.lookup("ack-on-receive", "kill-consumer:at=mid_batch") is not None
        assert self.table.lookup("ack-on-receive", "kill-consumer") is None
        assert self.table.lookup("s1", ["kill-consumer", "latency"]) is not None

    def test_a_cell_defined_twice_names_both_areas(self):
        with pytest.raises(ExpectationError, match="defined twice.*ordering and delivery"):
            ExpectationTable([Row("s1", "none", Expectation.of(lost=0), area="ordering"),
                              Row("s1", "none", Expectation.of(lost=0), area="delivery")])

    def test_bad_parameter_spec(self):
        with pytest.raises(BadArguments, match="'s2:shards': 'shards' is not k=v"):
            self.table.lookup("s2:shards", "none")
        with pytest.raises(BadArguments, match="shards is given twice"):
            self.table.lookup("s2:shards=8,shards=9", "none")


class TestAreaModules:
    def test_missing_area_modules_are_skipped(self, monkeypatch):
        monkeypatch.setattr(expectations.importlib, "import_module", _importer({}))
        assert expectations.load_rows(("ordering", "delivery")) == []

    def test_rows_are_collected_and_tagged_with_their_area(self, monkeypatch):
        modules = {"chaos.expectations.ordering": types.SimpleNamespace(ROWS=[row("s1", lost=0)])}
        monkeypatch.setattr(expectations.importlib, "import_module", _importer(modules))
        (found,) = expectations.load_rows(("ordering", "delivery"))
        assert (found.preset, found.area) == ("s1", "ordering")

    def test_an_area_importing_something_missing_is_an_error(self, monkeypatch):
        def broken(name):
            raise ModuleNotFoundError("No module named 'numpyy'", name="numpyy")
        monkeypatch.setattr(expectations.importlib, "import_module", broken)
        with pytest.raises(ModuleNotFoundError, match="numpyy"):
            expectations.load_rows(("ordering",))

    def test_area_without_rows_list_is_an_error(self, monkeypatch):
        modules = {"chaos.expectations.ordering": types.SimpleNamespace(ROWS="s1")}
        monkeypatch.setattr(expectations.importlib, "import_module", _importer(modules))
        with pytest.raises(ExpectationError, match="must define ROWS"):
            expectations.load_rows(("ordering",))

    def test_the_real_table_loads(self):
        expectations.table.cache_clear()
        real = expectations.table()
        areas = {r.area for r in real.rows()}
        assert set(expectations.AREA_MODULES) <= areas, f"areas without rows: {set(expectations.AREA_MODULES) - areas}"
        # every row is found again by its own key, so no row is shadowed or mis-keyed
        for r in real.rows():
            assert real.lookup(r.preset, r.fault, dict(r.params)) is r.expectation, r
        assert expectations.expect("no-such-preset", "none") is None


def _importer(modules: dict):
    def import_module(name):
        if name in modules:
            return modules[name]
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return import_module


def test_a_must_break_bound_per_run_is_not_carried_by_one_run():
    from chaos.checker import CellResult, Counts, RunResult
    from chaos.expectations import Expectation, each_run, ge

    def cell(*lost):
        runs = [RunResult(i, Counts(lost=n), "valid", [], {}, {}) for i, n in enumerate(lost)]
        return CellResult(sum((r.counts for r in runs), Counts()), "valid", runs, [], {}, [])

    every = Expectation.of(lost=each_run(ge(1)))
    assert every.mismatches(cell(2, 1)) == []
    [text] = every.mismatches(cell(3, 0))          # summed, ge(RUNS) would hold: 3 >= 2
    assert text == "lost: expected >= 1 in each run, measured per run [3, 0] [MISSING_LOST]"
    most = Expectation.of(lost=each_run(ge(1), min_fraction=0.5))
    assert most.mismatches(cell(3, 0)) == [] and most.mismatches(cell(0, 0, 1))
    assert every.to_json() == {"lost": ">= 1 in each run"}
