"""Grades from counts (pure): each property can fail, a crashed consumer fails every
property with its log tail, a run the rig cannot vouch for is unknown."""
from __future__ import annotations

import pytest

from chaos.blackbox.config import load_config
from chaos.blackbox.counts import BlackBoxCounts
from chaos.blackbox.session import BlackBoxRuns
from chaos.blackbox.verdict import BlackBoxRun
from chaos.checker import Counts, RunResult
from chaos.scorecard.grade import behaves_like, grade, promised
from chaos.scorecard.sample import Sample

CONFIG = load_config("examples/redis_py_cas.toml")


def cell(verdict="valid", reasons=(), extra=None, anomalies=None, **counts) -> BlackBoxRuns:
    result = RunResult(run=0, counts=Counts(published=200, **counts), verdict=verdict, anomalies=[],
                       anomaly_counts=dict(anomalies or {}), final_state={}, unknown_reasons=list(reasons))
    return BlackBoxRuns(command=["w"], config=CONFIG, faults=[],
                        runs=[BlackBoxRun(result=result, extra=extra or BlackBoxCounts())])


def statuses(c, samples=None) -> dict[str, str]:
    return {k: g.status for k, g in grade(c, samples).items()}


def test_a_clean_cell_passes_what_it_can_judge():
    assert statuses(cell()) == {"no_loss": "pass", "no_duplicate_side_effects": "pass", "final_state": "pass",
                                "keeps_consuming": "pass", "pel_drains": "pass", "poison_handled": "unknown"}


@pytest.mark.parametrize("made, prop", [
    ({"lost": 3}, "no_loss"),
    ({"extra": BlackBoxCounts(duplicated_side_effects=2)}, "no_duplicate_side_effects"),
    ({"wrong_final_state_runs": 1, "wrong_keys": 4}, "final_state"),
    ({"undelivered": 50}, "keeps_consuming"),
    ({"anomalies": {"stopped-consuming": 1}}, "keeps_consuming"),
    ({"pending_left": 7}, "pel_drains"),
])
def test_each_property_fails_on_its_own_count(made, prop):
    got = statuses(cell(**made))
    assert got[prop] == "fail" and [k for k, v in got.items() if v == "fail"] == [prop]


def test_a_crash_on_start_fails_every_property_with_the_log_tail():
    reason = ("worker command `w` exited before it connected to Redis; run it by hand [C1: exit code 3]\n"
              "--- last output of C1 ---\nImportError: no module named app")
    grades = grade(cell(verdict="unknown", reasons=[reason]))
    assert {g.status for g in grades.values()} == {"fail"}
    assert "ImportError: no module named app" in grades["no_loss"].evidence


def test_a_run_the_rig_cannot_vouch_for_is_unknown_everywhere():
    grades = grade(cell(verdict="unknown", reasons=["fault 'pause' did not act or heal: boom"]))
    assert {g.status for g in grades.values()} == {"unknown"}
    assert "did not act or heal" in grades["final_state"].evidence


def test_a_failover_that_missed_what_it_waited_for_is_unknown_even_with_a_loss():
    """Its losses made the verdict invalid (invalid outranks unknown), but no read entry came
    back: no_duplicate_side_effects would pass by luck. The reason is the evidence."""
    missed = ("fault promote-replica missed the workload: expected its `step: kill` op ... records ... "
              "the history shows none")
    grades = grade(cell(verdict="invalid", reasons=[missed], lost=40))
    assert {g.status for g in grades.values()} == {"unknown"}
    assert "promote-replica missed the workload" in grades["no_duplicate_side_effects"].evidence


def test_the_last_sample_is_evidence_of_keeping_consuming():
    samples = [Sample(1.0, length=200, lag=0, pending=0), Sample(2.0, length=200, lag=37, pending=3), Sample(3.0)]
    assert "lag + pending at the last sample 40" in grade(cell(), samples)["keeps_consuming"].evidence


@pytest.mark.parametrize("made, like", [
    ({}, "like s5 + inbox"),
    ({"duplicated": 4}, "like s1 + ack-after"),
    ({"lost": 3}, "like ack-on-receive"),
    ({"wrong_final_state_runs": 1, "duplicated": 2}, "like baseline + ack-after"),
    ({"reordered": 3, "wrong_final_state_runs": 1}, "like baseline (2 consumers"),
    ({"undelivered": 40, "wrong_final_state_runs": 1}, "like s5 + inbox (recommended): nothing lost, no duplicate, "
                                                       "no write out of order while it runs; then it stops consuming (40"),
])
def test_behaves_like_names_the_strategy_with_the_same_figures(made, like):
    c = cell(**made)
    assert behaves_like(grade(c), c).startswith(like)


def test_expect_bounds_name_the_properties_they_promise():
    assert promised({"lost": ("==", 0), "wrong_final_state_runs": ("<=", 1), "missing_side_effects": ("==", 0)}) \
        == ["no_loss", "final_state", "keeps_consuming"]      # liveness: always promised


def test_a_consumer_that_dies_mid_run_fails_keeps_consuming_and_is_still_graded():
    reason = "worker C1 exited unexpectedly with exit code 1; last output:\npsycopg.OperationalError: server closed"
    grades = grade(cell(verdict="unknown", reasons=[reason], undelivered=120))
    assert grades["keeps_consuming"].status == "fail" and "psycopg.OperationalError" in grades["keeps_consuming"].evidence
    assert grades["no_loss"].status == "pass" and grades["pel_drains"].status == "pass"
    survived = cell(verdict="unknown", reasons=[reason])     # the other consumer caught up
    grades = grade(survived)
    assert grades["keeps_consuming"].status == "pass"
    assert "1 consumer process(es) died during the run; the others consumed" in grades["keeps_consuming"].evidence
    assert "a consumer process died" in behaves_like(grades, survived)


def test_a_loss_the_fault_made_in_redis_is_not_the_consumers_design():
    c = cell(lost=89, wrong_final_state_runs=1)
    assert behaves_like(grade(c), c, "promote-replica").startswith(
        "like s5 + inbox (recommended): nothing applied twice; the 89 entries promote-replica destroyed")
    assert behaves_like(grade(c), c, "kill-consumer").startswith("like ack-on-receive")
