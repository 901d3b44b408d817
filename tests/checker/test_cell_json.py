"""summarize() and CellResult.to_json(): the `run --json` contract of DESIGN.md."""
from __future__ import annotations

import json

import pytest
from checker_histories import CREATED_42, PAID_42, History, final

from chaos.checker import INVALID, UNKNOWN, VALID, FinalState, check_run, merge_verdicts, summarize
from chaos.expectations.table import RUNS, Expectation

DESIGN_KEYS = {
    "schema_version", "preset", "fault", "runs", "seed", "time_scale", "published", "lost",
    "recovered", "duplicated", "redelivered", "duplicate_entries", "reordered",
    "wrong_final_state_runs", "wrong_keys", "pending_left", "undelivered", "dlq", "verdict",
    "anomalies", "expected", "matches_expectation", "wall_s", "run_dir", "reproduce", "per_run",
}


def baseline_run(run: int, wrong: bool):
    h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
    order = [PAID_42, CREATED_42] if wrong else [CREATED_42, PAID_42]
    for ev in order:
        h.handle(ev, "1-0" if ev is CREATED_42 else "2-0")
    row = ("created", 1) if wrong else ("paid", 2)
    return check_run(h.ops, final({"42": row}), run=run, seed=100 + run)


def test_counts_are_summed_and_verdicts_merged():
    cell = summarize([baseline_run(i, wrong=i % 2 == 0) for i in range(4)])
    assert cell.counts.wrong_final_state_runs == 2
    assert cell.counts.published == 8
    assert cell.counts.reordered == 2
    assert cell.verdict == INVALID
    assert cell.anomaly_counts == {"reordered": 2, "wrong-final-state": 2}


def test_merge_verdicts_follows_jepsen_priorities():
    assert merge_verdicts([VALID, VALID]) == VALID
    assert merge_verdicts([VALID, UNKNOWN]) == UNKNOWN
    assert merge_verdicts([UNKNOWN, INVALID, VALID]) == INVALID
    assert merge_verdicts([]) == UNKNOWN
    with pytest.raises(ValueError, match="'ok' is not one of"):
        merge_verdicts(["ok"])


def test_summarize_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="at least one RunResult"):
        summarize([])


def test_to_json_has_every_design_key_and_is_json():
    cell = summarize([baseline_run(i, wrong=True) for i in range(3)])
    out = cell.to_json(preset="baseline", fault="none", seed=100, time_scale=1.0,
                       expected=Expectation.of(wrong_final_state_runs=RUNS), wall_s=1.5,
                       run_dir="/tmp/x", reproduce="python -m chaos run --preset baseline --seed 100")
    assert DESIGN_KEYS <= set(out)
    assert json.loads(json.dumps(out)) == out
    assert (out["runs"], out["matches_expectation"], out["mismatches"]) == (3, True, [])
    assert out["expected"] == {"wrong_final_state_runs": "== runs"}
    first = out["per_run"][0]
    assert (first["seed"], first["wrong_final_state_runs"]) == (100, 1)
    assert first["final_state"] == {"42": {"status": "created", "version": 1}}
    assert out["anomalies"][0]["kind"] in {"reordered", "wrong-final-state"}


def test_to_json_reports_a_mismatch_and_null_expectation():
    cell = summarize([baseline_run(0, wrong=False)])
    out = cell.to_json(preset="baseline", expected=Expectation.of(wrong_final_state_runs=RUNS))
    assert out["matches_expectation"] is False
    assert out["mismatches"] == [
        "wrong_final_state_runs: expected == 1 (all runs), measured 0/1 [MISSING_WRONG_FINAL_STATE_RUNS]"]
    plain = cell.to_json(preset="baseline")
    assert (plain["expected"], plain["matches_expectation"]) == (None, True)


def test_unknown_reasons_are_labelled_with_their_run():
    h = History().publish(CREATED_42, entry_id="1-0").handle(CREATED_42, "1-0")
    runs = [check_run(h.ops, final({"42": ("created", 1)}), run=i,
                      unknown_reasons=["C1 exited by SIGKILL"] if i else []) for i in range(2)]
    cell = summarize(runs)
    assert cell.verdict == UNKNOWN
    assert cell.unknown_reasons == ["run 1: C1 exited by SIGKILL"]


def test_final_state_round_trips_through_json():
    state = final({"42": ("paid", 2)}, pending=[{"entry_id": "1-0", "event_id": "e42-1"}])
    again = FinalState.from_json(json.loads(json.dumps(state.to_json())))
    assert again == state


@pytest.mark.parametrize("data, message", [
    ([], "is a JSON object"),
    ({"rowz": {}}, r"unknown fields \['rowz'\]"),
    ({"pending": {}}, "'pending' must be a list, got dict"),
])
def test_bad_final_state_json_names_the_field(data, message):
    with pytest.raises(ValueError, match=message):
        FinalState.from_json(data)
