"""Field incidents in the checker (chaos/vanished.py): a lost event is named by how it vanished
when a fault recorded it (stream-lost, pel-dropped), and a duplicated job whose two runs
overlapped gets both runs and the overlap in its detail."""
from __future__ import annotations

from chaos.checker import check_run
from chaos.vanished import overlaps

from checker_histories import CREATED_42, CREATED_43, PAID_42, PAID_43, History, final


def _loss(h: History, **value) -> History:
    return h.op("nemesis", "info", "fault", value={"name": "group-loss", "phase": "start", **value})


def test_a_lost_event_the_fault_saw_vanish_is_stream_lost_and_the_others_plain_lost():
    h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
    _loss(h, vanished_events=["e42-1", "e42-2"])
    h.publish(CREATED_43, entry_id="1-0").publish(PAID_43, entry_id="2-0")   # after the loss, never read
    result = check_run(h.ops, final({}))
    assert result.counts.lost == 4
    assert result.anomaly_counts.get("stream-lost") == 2 and result.anomaly_counts.get("lost") == 2
    kinds = {a.kind: a for a in result.anomalies}
    assert kinds["stream-lost"].examples == ["e42-1", "e42-2"] and "vanished" in kinds["stream-lost"].detail


def test_a_handled_event_that_vanished_afterwards_is_not_lost():
    h = History().publish(CREATED_42, entry_id="1-0").handle(CREATED_42, "1-0")
    h.op("nemesis", "info", "fault", value={"name": "delete-consumer", "phase": "start",
                                             "dropped_events": ["e42-1", "e42-2"]})
    h.publish(PAID_42, entry_id="2-0")
    result = check_run(h.ops, final({"42": ("created", 1)}))
    assert result.counts.lost == 1 and result.anomaly_counts == {"pel-dropped": 1, "wrong-final-state": 1}


def test_two_overlapping_runs_of_one_job_give_the_overlap_and_sequential_ones_none():
    h = History()
    h.publish(CREATED_42, entry_id="1-0").deliver(CREATED_42, "1-0")
    h.op("C1", "invoke", "apply", **CREATED_42.fields)                  # C1 starts the long job
    h.deliver(CREATED_42, "1-0", via="claim", count=2, process="C2")
    h.op("C2", "invoke", "apply", **CREATED_42.fields)                  # C2 runs it too, meanwhile
    h.op("C1", "ok", "apply", **CREATED_42.fields, rows=1, effect="applied")
    h.op("C2", "ok", "apply", **CREATED_42.fields, rows=1, effect="applied")
    result = check_run(h.ops, final({"42": ("created", 1)}))
    dup = [a for a in result.anomalies if a.kind == "duplicated"]
    assert result.counts.duplicated == 1 and len(dup) == 1
    assert dup[0].detail.endswith("ran twice at once: C1 3 ms-6 ms and C2 5 ms-7 ms, overlap 1 ms")

    later = History().publish(CREATED_42, entry_id="1-0").handle(CREATED_42, "1-0").handle(
        CREATED_42, "1-0", process="C2")
    assert overlaps(later.ops, ["e42-1"]) == {}
    result = check_run(later.ops, final({"42": ("created", 1)}))
    assert [a.detail for a in result.anomalies if a.kind == "duplicated"] == ["effect applied more than once"]


def test_the_overlap_is_found_when_another_fold_observes_the_checkers_pass():
    """The orchestrator's check folds its work notes into the checker's pass (`observe`), which
    gives the ops on through a one-shot generator: the overlap's second pass must read the
    history again, not that spent generator (it once gave 'effect applied more than once' only)."""
    h = History()
    h.publish(CREATED_42, entry_id="1-0").deliver(CREATED_42, "1-0")
    h.op("C1", "invoke", "apply", **CREATED_42.fields)
    h.deliver(CREATED_42, "1-0", via="claim", count=2, process="C2")
    h.op("C2", "invoke", "apply", **CREATED_42.fields)
    h.op("C1", "ok", "apply", **CREATED_42.fields, rows=1, effect="applied")
    h.op("C2", "ok", "apply", **CREATED_42.fields, rows=1, effect="applied")
    seen = []

    def observe(ops, events):
        for op in ops:
            seen.append(op)
            yield op

    result = check_run(h.ops, final({"42": ("created", 1)}), observe=observe)
    (dup,) = [a for a in result.anomalies if a.kind == "duplicated"]
    assert "ran twice at once: C1" in dup.detail and len(seen) == len(h.ops)
