"""`reordered` follows the commit order of a key's writes, not the order workers logged them.

A worker logs its `apply ok` after COMMIT returned; if it is descheduled in between, a later
commit of the same key by another consumer is logged first. Forced here with real processes:
two consumers, order 42; `created` commits first (the producer holds `paid` before its
publish until then), then its consumer stops at the `after_commit` failpoint (committed,
apply op not yet written) until the other consumer has committed `paid` and logged it (it
reached `after_apply_before_ack` with paid). Each step waits for the one before (fault
`hold`), so the schedule happens however slowly a loaded machine runs it (a 2 s pause let
paid be logged 40 ms after created once; a 0.5 s publish delay let paid commit first). The guard's `value.seq`
(the row's write sequence, bumped by the write under the row lock) says created committed
first: the checker counts no reorder. The same history without `seq` and `locked_at`,
ordered by log time, counts 1: that is the false reorder this test would catch.

The `lock` guard is not here: its consumer still holds the lock while stopped there, so
the other one cannot write before the log line (nothing to get wrong).
"""
from __future__ import annotations

import copy

import pytest

from chaos.checker import FinalState, check_run

PAID_LATE = "pair:created_ms=0,paid_ms=0,paid_at_ms=500"
CREATED_LOGS_LATE = ("hold:at=after_commit,etype=created,until=after_apply_before_ack,until_etype=paid,"
                     "gate=before_publish,gate_role=producer,gate_etype=paid")
GUARDS = ["plain", "setnx-dedupe", "inbox", "inbox:cas=1", "cas", "state-carried"]


def _applies(history: list[dict]) -> dict[str, dict]:
    return {op["etype"]: op for op in history
            if op["f"] == "apply" and op["type"] == "ok" and op.get("effect") == "applied"}


def _without_commit_order(history: list[dict]) -> list[dict]:
    """The history as a guard without `seq` or `locked_at` would have written it."""
    stripped = copy.deepcopy(history)
    for op in stripped:
        if isinstance(op.get("value"), dict):
            op["value"].pop("seq", None)
            op["value"].pop("locked_at", None)
    return stripped


@pytest.mark.parametrize("guard", GUARDS)
def test_a_consumer_stopped_between_commit_and_log_is_no_reorder(chaos_cell, guard):
    outcome = chaos_cell("baseline:consumers=2", CREATED_LOGS_LATE, parts={"workload": PAID_LATE, "guard": guard},
                         time_scale=1.0, expected=False, histories=True)
    cell = outcome.result
    assert cell.verdict != "unknown", cell.unknown_reasons
    history, run = outcome.histories[0], cell.runs[0]
    applies = _applies(history)
    created, paid = applies["created"], applies["paid"]
    # the forced schedule happened: created committed first, paid was logged first, by the other consumer
    assert created["process"] != paid["process"], "both events went to one consumer: nothing was forced"
    assert (created["value"]["seq"], paid["value"]["seq"]) == (1, 2), (created, paid)
    assert paid["time"] < created["time"], "paid's apply op must be logged before created's"
    assert any(op["f"] == "failpoint" and op.get("etype") == "created" for op in history)

    assert cell.counts.reordered == 0 and cell.verdict == "valid", cell.counts
    final = FinalState(rows=run.final_state)
    assert check_run(history, final).counts.reordered == 0
    by_log_time = check_run(_without_commit_order(history), final).counts
    assert by_log_time.reordered == 1, "ordered by the time of the log line, created would come after paid"
