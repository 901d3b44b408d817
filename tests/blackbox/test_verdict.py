"""The adapter gives the built-in checker's counts from observed effects alone."""
from __future__ import annotations

import pytest

from chaos.blackbox import expect
from chaos.blackbox.config import parse_config
from chaos.blackbox.counts import NO_PROGRESS, NOBODY_LEFT, SETTLED, Liveness, stalled_after_heal
from chaos.blackbox.effects import Effect
from chaos.blackbox.redis_state import StreamState
from chaos.blackbox.verdict import check_blackbox_run
from chaos.events import Event

CONFIG = parse_config({"state": {"table": "orders", "key": "id", "status": "status", "version": "version"},
                       "side_effects": {"table": "order_emails", "event_id": "event_id"}})
EVENTS = [Event("e42-1", "42", "created", 1), Event("e42-2", "42", "paid", 2),
          Event("e43-1", "43", "created", 1), Event("e43-2", "43", "paid", 2)]


def published() -> list[dict]:
    return [{"time": 0.0, "process": "P-order", "type": "ok", "f": "publish", **e.op_fields(),
             "entry_id": f"1-{n}", "stream": "orders"} for n, e in enumerate(EVENTS)]


def state(seq: int, key: str, version: int, status: str, op: str = "UPDATE") -> Effect:
    return Effect(seq, seq, 100 + seq, "state", op, key, version, status, None, 1000.0 + seq)


def email(seq: int, event_id: str) -> Effect:
    return Effect(seq, seq, 100 + seq, "side_effect", "INSERT", None, None, None, event_id, 1000.0 + seq)


def check(effects: list[Effect], rows: dict, stream: StreamState | None = None):
    return check_blackbox_run(CONFIG, history=published(), effects=effects, rows=rows,
                              stream=stream or StreamState(), events=EVENTS, offset=-1000.0)


def rows(**final: tuple[str, int]) -> dict:
    return {k.lstrip("k"): {"status": s, "version": v} for k, (s, v) in final.items()}


def test_clean_run_is_valid() -> None:
    effects = [state(1, "42", 1, "created", "INSERT"), email(2, "e42-1"), state(3, "43", 1, "created", "INSERT"),
               email(4, "e43-1"), state(5, "42", 2, "paid"), email(6, "e42-2"), state(7, "43", 2, "paid"),
               email(8, "e43-2")]
    run = check(effects, rows(k42=("paid", 2), k43=("paid", 2)))
    assert run.result.verdict == "valid"
    c = run.result.counts
    assert (c.published, c.lost, c.duplicated, c.reordered, c.wrong_keys, c.handled) == (4, 0, 0, 0, 0, 4)
    assert run.extra.side_effects == 4 and run.extra.duplicated_side_effects == 0


def test_lost_duplicated_reordered_and_wrong_final_state_are_counted() -> None:
    effects = [state(1, "42", 2, "paid", "INSERT"), state(2, "42", 1, "created"),   # 42: paid overwritten
               state(3, "43", 1, "created", "INSERT"), state(4, "43", 1, "created"),  # 43 v1 twice, v2 lost
               email(5, "e43-1"), email(6, "e43-1")]
    run = check(effects, rows(k42=("created", 1), k43=("created", 1)))
    c = run.result.counts
    assert c.reordered == 1 and c.duplicated == 1 and c.lost == 1 and c.wrong_keys == 2
    assert c.wrong_final_state_runs == 1 and run.result.verdict == "invalid"
    assert run.result.anomaly_counts["lost"] == 1
    assert run.extra.duplicated_side_effects == 1 and run.extra.missing_side_effects == 2


def test_unwritten_event_of_a_superseded_version_counts_as_stale_not_lost() -> None:
    effects = [state(1, "42", 2, "paid", "INSERT"), state(2, "43", 1, "created", "INSERT"),
               state(3, "43", 2, "paid")]
    run = check(effects, rows(k42=("paid", 2), k43=("paid", 2)))
    assert run.result.counts.lost == 0 and run.extra.superseded_unobserved == 1
    assert run.result.verdict == "valid"


def test_pending_events_are_not_lost_and_are_counted() -> None:
    effects = [state(1, "42", 1, "created", "INSERT"), state(2, "42", 2, "paid"), state(3, "43", 1, "created")]
    pending = StreamState(pending=[{"entry_id": "1-3", "stream": "orders", "event_id": "e43-2",
                                    "consumer": "C1", "delivery_count": 1}])
    run = check(effects, rows(k42=("paid", 2), k43=("created", 1)), pending)
    c = run.result.counts
    assert c.lost == 0 and c.pending_left == 1 and c.wrong_keys == 1


def test_writes_of_versions_no_event_has_are_counted_apart() -> None:
    effects = [state(1, "42", 7, "paid", "INSERT")]
    run = check(effects, rows(k42=("paid", 7)))
    assert run.extra.unattributed_writes == 1


def test_version_derived_from_status() -> None:
    config = parse_config({"state": {"table": "orders", "key": "id", "status": "status",
                                     "version_from_status": {"created": 1, "paid": 2}}})
    effects = [Effect(1, 1, 1, "state", "INSERT", "42", None, "paid", None, 1.0),
               Effect(2, 2, 2, "state", "UPDATE", "42", None, "created", None, 2.0)]
    run = check_blackbox_run(config, history=published()[:2], effects=effects,
                             rows={"42": {"status": "created", "version": 1}}, stream=StreamState(),
                             events=EVENTS[:2], offset=0.0)
    assert run.result.counts.reordered == 1 and run.result.counts.wrong_keys == 1


def test_a_consumer_that_writes_every_event_loses_the_superseded_one() -> None:
    config = parse_config({"state": {"table": "orders", "key": "id", "status": "status", "version": "version",
                                     "skips_stale": False}})
    effects = [state(1, "42", 2, "paid", "INSERT"), state(2, "43", 1, "created", "INSERT"),
               state(3, "43", 2, "paid")]
    run = check_blackbox_run(config, history=published(), effects=effects,
                             rows=rows(k42=("paid", 2), k43=("paid", 2)), stream=StreamState(), events=EVENTS,
                             offset=-1000.0)
    assert run.result.counts.lost == 1 and run.extra.superseded_unobserved == 1
    assert run.result.anomaly_counts["lost"] == 1 and run.result.verdict == "invalid"


def test_an_event_that_never_reached_the_stream_is_neither_superseded_nor_lost() -> None:
    config = parse_config({"state": {"table": "orders", "key": "id", "status": "status", "version": "version",
                                     "skips_stale": False}})
    history = [op for op in published() if op["event_id"] != "e42-1"]
    history.append({"time": 0.0, "process": "P-order", "type": "fail", "f": "publish", **EVENTS[0].op_fields()})
    run = check_blackbox_run(config, history=history, effects=[state(1, "42", 2, "paid", "INSERT"),
                                                               state(2, "43", 1, "created", "INSERT"),
                                                               state(3, "43", 2, "paid")],
                             rows=rows(k42=("paid", 2), k43=("paid", 2)), stream=StreamState(), events=EVENTS,
                             offset=-1000.0)
    assert run.extra.superseded_unobserved == 0 and run.result.counts.lost == 0
    assert run.result.counts.published == 3 and run.result.verdict == "valid"


# ---------------------------------------------------------------------------------------------
# liveness: what a live consumer left waiting, and runs whose events' fate is mostly unknown
# ---------------------------------------------------------------------------------------------
STOPPED = Liveness(drain_end=NO_PROGRESS, live_workers=["C1"], stalled_after_heal_s=30.0)


def waiting_43() -> StreamState:
    """43's events never read: undelivered in the stream at the end."""
    return StreamState(undelivered=[{"entry_id": f"1-{n}", "stream": "orders", "event_id": eid}
                                    for n, eid in ((2, "e43-1"), (3, "e43-2"))])


def test_events_a_live_consumer_left_undelivered_are_stopped_consuming() -> None:
    effects = [state(1, "42", 1, "created", "INSERT"), state(2, "42", 2, "paid")]
    run = check_blackbox_run(CONFIG, history=published(), effects=effects, rows=rows(k42=("paid", 2)),
                             stream=waiting_43(), events=EVENTS, offset=-1000.0, liveness=STOPPED)
    assert run.result.verdict == "invalid"
    assert run.result.anomaly_counts["stopped-consuming"] == 2 and run.extra.stopped_consuming == 2
    c = run.result.counts
    assert (c.undelivered, c.lost, c.wrong_keys, c.unsettled_keys) == (2, 0, 1, 0)
    (mismatch,) = expect.check({}, run_cell(run), run.extra)   # promised without any [expect]
    assert mismatch == "stopped_consuming: expected == 0, measured 2 [STOPPED_CONSUMING: 2]"   # a count now
    assert expect.check({"stopped_consuming": ("<=", 2)}, run_cell(run), run.extra) == []   # a declared bound wins


def test_a_black_box_bound_names_its_measured_figure() -> None:
    """A bound on a black-box figure (not a checker count) says what it measured, as a count's does."""
    from chaos.blackbox.counts import BlackBoxCounts
    run = check_blackbox_run(CONFIG, history=published(), effects=[state(1, "42", 1, "created", "INSERT"),
                                                                    state(2, "42", 2, "paid")],
                             rows=rows(k42=("paid", 2)), stream=StreamState(), events=EVENTS, offset=-1000.0)
    extra = BlackBoxCounts(duplicated_side_effects=3, missing_side_effects=0)
    (text,) = expect.check({"duplicated_side_effects": ("==", 0), "missing_side_effects": ("==", 0)},
                           run_cell(run), extra)
    assert text == "duplicated_side_effects: expected == 0, measured 3 [DUPLICATED_SIDE_EFFECTS: 3]"


def run_cell(run):
    from chaos.checker import summarize
    return summarize([run.result])


@pytest.mark.parametrize("liveness", [
    Liveness(drain_end=SETTLED, live_workers=["C1"]),              # the drain settled (not the case here)
    Liveness(drain_end=NOBODY_LEFT, live_workers=[]),              # every worker dead: nobody to blame for liveness
    Liveness(drain_end=NO_PROGRESS, live_workers=["C1"], rig_clear=False),   # a fault never healed
    Liveness(drain_end=NO_PROGRESS, live_workers=[]),
], ids=["settled", "nobody-left", "fault-not-healed", "no-live-worker"])
def test_waiting_events_are_only_unsettled_when_the_rig_cannot_vouch_for_liveness(liveness) -> None:
    effects = [state(1, "42", 1, "created", "INSERT"), state(2, "42", 2, "paid")]
    run = check_blackbox_run(CONFIG, history=published(), effects=effects, rows=rows(k42=("paid", 2)),
                             stream=waiting_43(), events=EVENTS, offset=-1000.0, liveness=liveness)
    assert "stopped-consuming" not in run.result.anomaly_counts and run.extra.stopped_consuming == 0
    assert run.result.counts.unsettled_keys == 1 and run.result.verdict == "valid"


def test_a_run_where_most_events_fate_is_unknown_is_not_valid() -> None:
    """3 of 4 publishes failed for good (dropped): the one event consumed says too little."""
    history = [op for op in published() if op["event_id"] == "e42-1"]
    history += [{"time": 0.0, "process": "P-order", "type": "fail", "f": "publish", **e.op_fields()}
                for e in EVENTS[1:]]
    run = check_blackbox_run(CONFIG, history=history, effects=[state(1, "42", 1, "created", "INSERT")],
                             rows=rows(k42=("created", 1)), stream=StreamState(), events=EVENTS, offset=-1000.0)
    assert run.result.counts.dropped == 3 and run.result.verdict == "unknown"
    assert any("fate of 3 of 4 intended events is unknown" in r for r in run.result.unknown_reasons)


def test_half_the_events_fate_unknown_is_still_judged() -> None:
    history = [op for op in published() if op["event_id"] in ("e42-1", "e43-1")]
    history += [{"time": 0.0, "process": "P-order", "type": "fail", "f": "publish", **e.op_fields()}
                for e in (EVENTS[1], EVENTS[3])]
    run = check_blackbox_run(CONFIG, history=history, effects=[state(1, "42", 1, "created", "INSERT"),
                                                               state(2, "43", 1, "created", "INSERT")],
                             rows=rows(k42=("created", 1), k43=("created", 1)), stream=StreamState(),
                             events=EVENTS, offset=-1000.0)
    assert run.result.counts.dropped == 2 and run.result.verdict == "valid"


INF = float("inf")


@pytest.mark.parametrize("healed, progress, work, stall", [
    (None, [5.0], [(1.0, INF)], None),                 # no fault healed: nothing to measure from
    (10.0, [11.0, 12.0], [(9.0, 11.0), (9.5, 12.0)], 1.0),   # caught up, one job a second: 1 s windows
    (10.0, [12.0], [(9.0, 12.0), (9.0, INF)], 28.0),   # progress after the heal, then none until the end at 40
    (10.0, [4.0], [(1.0, INF)], 30.0),                 # no progress at all after the heal
    (10.0, [], [(1.0, INF)], 30.0),
    (10.0, [], [], 0.0),                               # nothing outstanding: idle, not stalled
    (10.0, [30.0, 30.5], [(9.0, 30.0), (20.0, 30.5)], 20.0),   # a stall of 20 s that recovered at 30
    (10.0, [15.0, 35.0], [(9.0, 15.0), (25.0, 35.0)], 10.0),   # idle 15..25: only the 10 s with work count
])
def test_stalled_after_heal_is_the_longest_window_without_progress(healed, progress, work, stall) -> None:
    assert stalled_after_heal(healed, 40.0, progress, work) == stall


def test_a_stall_the_consumer_recovered_from_is_measured() -> None:
    """Published at 0, healed at 0.5; writes at 1, 2, then 9 and 10 (effect times 1000 + seq on
    the wall clock, offset -1000): nothing came from 2 to 9 while 43's events waited, a 7 s
    stall although the consumer caught up (the old measure, from the last progress to the
    drain's end, said 0)."""
    effects = [state(1, "42", 1, "created", "INSERT"), state(2, "42", 2, "paid"),
               state(9, "43", 1, "created", "INSERT"), state(10, "43", 2, "paid")]
    run = check_blackbox_run(CONFIG, history=published(), effects=effects, rows=rows(k42=("paid", 2), k43=("paid", 2)),
                             stream=StreamState(), events=EVENTS, offset=-1000.0,
                             liveness=Liveness(drain_end=SETTLED, healed_at=0.5, ended_at=12.0, progress_at=10.0))
    assert run.result.verdict == "valid"
    assert run.liveness.stalled_after_heal_s == 7.0
