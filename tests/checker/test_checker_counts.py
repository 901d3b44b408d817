"""Every count of check_run on hand-made histories (docs/checker.md defines them)."""
from __future__ import annotations

import pytest
from checker_histories import CREATED_42, CREATED_43, PAID_42, PAID_43, Ev, History, final

from chaos.checker import INVALID, UNKNOWN, VALID, check_run
from chaos.history import HistoryError

PAID = {"42": ("paid", 2)}


def applied_versions(h: History) -> list:
    """The key's applied versions as an anomaly reports them (a lost event of the key forces one)."""
    lost = History(start=h.time).publish(Ev("e42-9", "42", 9, "late"), entry_id="9-0")
    return next(a.versions for a in check_run(h.ops + lost.ops, final(PAID)).anomalies if a.kind == "lost")


def both_handled() -> History:
    h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
    return h.handle(CREATED_42, "1-0").handle(PAID_42, "2-0")


def test_clean_run_is_valid_with_every_event_published_and_handled():
    result = check_run(both_handled().ops, final(PAID))
    c = result.counts
    assert (c.published, c.handled, c.delivered, c.lost, c.duplicated, c.reordered) == (2, 2, 2, 0, 0, 0)
    assert result.verdict == VALID
    assert result.final_state == {"42": {"status": "paid", "version": 2}}


class TestPublished:
    def test_failed_publish_is_not_published(self):
        h = History().publish(CREATED_42, "fail").publish(PAID_42, entry_id="2-0").handle(PAID_42, "2-0")
        assert check_run(h.ops, final(PAID)).counts.published == 1

    def test_every_attempt_refused_is_dropped_not_lost(self):
        """A producer that gave up (OOM at every attempt): the event never existed downstream."""
        h = (History().publish(CREATED_42, "fail").publish(CREATED_42, "fail")
             .publish(PAID_42, entry_id="2-0").handle(PAID_42, "2-0"))
        result = check_run(h.ops, final(PAID))
        c = result.counts
        assert (c.published, c.lost, c.dropped, c.indeterminate) == (1, 0, 1, 0)
        assert result.verdict == VALID, "the producer knew: dropped is a figure, not a violation"

    def test_a_failed_attempt_then_ok_is_not_dropped(self):
        h = History().publish(CREATED_42, "fail").publish(CREATED_42, entry_id="1-0").handle(CREATED_42, "1-0")
        assert check_run(h.ops, final({"42": ("created", 1)})).counts.dropped == 0

    def test_info_publish_found_in_the_stream_is_published(self):
        h = History().publish(CREATED_42, "info").publish(PAID_42, entry_id="2-0").handle(PAID_42, "2-0")
        stream = [{"entry_id": "1-0", "stream": "orders", "event_id": "e42-1"}]
        result = check_run(h.ops, final(PAID, stream_entries=stream))
        assert result.counts.published == 2
        assert result.counts.lost == 1  # in the stream, acked by nobody, never handled

    def test_info_publish_that_was_delivered_is_published_even_if_trimmed(self):
        h = History().publish(CREATED_42, "info").handle(CREATED_42, "1-0")
        assert check_run(h.ops, final({"42": ("created", 1)})).counts.published == 1

    def test_info_publish_never_seen_is_indeterminate_not_lost(self):
        h = History().publish(CREATED_42, "info")
        c = check_run(h.ops, final()).counts
        assert (c.published, c.lost, c.indeterminate) == (0, 0, 1)

    def test_dangling_invoke_counts_as_info(self):
        h = History().publish(CREATED_42, "dangling")
        stream = [{"entry_id": "1-0", "stream": "orders", "event_id": "e42-1"}]
        seen = check_run(h.ops, final(stream_entries=stream)).counts
        unseen = check_run(h.ops, final()).counts
        assert (seen.published, unseen.published, unseen.indeterminate) == (1, 0, 1)

    def test_retry_after_fail_counts_once(self):
        h = History().publish(CREATED_42, "fail").publish(CREATED_42, "fail").publish(CREATED_42, entry_id="9-0")
        assert check_run(h.ops, final()).counts.published == 1

    def test_committed_outbox_row_is_published(self):
        outbox = [{"id": 1, "event_id": "e42-1", "key": "42", "version": 1, "published": False}]
        intended = [CREATED_42.fields]
        c = check_run([], final(outbox=outbox, events=intended)).counts
        assert (c.published, c.lost, c.wrong_keys) == (1, 1, 1)


class TestLost:
    def test_published_never_handled_is_lost_and_invalid(self):
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0").handle(PAID_42, "2-0")
        result = check_run(h.ops, final(PAID))
        assert result.counts.lost == 1
        assert result.verdict == INVALID
        (anomaly,) = [a for a in result.anomalies if a.kind == "lost"]
        assert (anomaly.key, anomaly.examples) == ("42", ["e42-1"])

    @pytest.mark.parametrize("where", ["pending", "undelivered", "dlq"])
    def test_event_still_in_redis_is_not_lost(self, where):
        h = History().publish(CREATED_42, entry_id="1-0")
        entry = {"entry_id": "1-0", "stream": "orders", "event_id": "e42-1", "consumer": "C1",
                 "delivery_count": 1}
        result = check_run(h.ops, final({"42": ("created", 1)}, **{where: [entry]}))
        assert result.counts.lost == 0
        assert getattr(result.counts, "pending_left" if where == "pending" else where) == 1

    def test_handled_but_unacked_entry_is_handled_pending(self):
        """ack after, killed between the write and the XACK: handled, yet still in the PEL."""
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
        h.deliver(CREATED_42, "1-0").apply(CREATED_42).deliver(PAID_42, "2-0")
        pending = [{"entry_id": e, "stream": "orders", "event_id": eid, "consumer": "C1", "delivery_count": 1}
                   for e, eid in (("1-0", "e42-1"), ("2-0", "e42-2"))]
        c = check_run(h.ops, final({"42": ("created", 1)}, pending=pending)).counts
        assert (c.handled, c.handled_pending, c.pending_left, c.lost) == (1, 1, 2, 0)
        assert c.pending_left == c.published - c.undelivered - c.handled + c.handled_pending

    def test_dlq_op_keeps_an_event_from_being_lost(self):
        h = History().publish(CREATED_42, entry_id="1-0").deliver(CREATED_42, "1-0")
        h.op("C1", "ok", "dlq", **CREATED_42.fields, entry_id="1-0")
        assert check_run(h.ops, final({"42": ("created", 1)})).counts.lost == 0

    def test_stale_rejection_counts_as_handled(self):
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
        h.handle(PAID_42, "2-0").handle(CREATED_42, "1-0", effect="stale")
        c = check_run(h.ops, final(PAID)).counts
        assert (c.lost, c.handled, c.reordered) == (0, 2, 0)

    def test_dedupe_saying_seen_without_any_effect_is_lost(self):
        h = History().publish(CREATED_42, entry_id="1-0").handle(CREATED_42, "1-0", effect="duplicate")
        assert check_run(h.ops, final({"42": ("created", 1)})).counts.lost == 1

    def test_ack_on_receive_kill_loses_exactly_delivered_minus_handled(self):
        h = History()
        events = [CREATED_42, PAID_42, CREATED_43, PAID_43]
        for i, ev in enumerate(events):
            h.publish(ev, entry_id=f"{i}-0")
        for i, ev in enumerate(events):
            h.deliver(ev, f"{i}-0").ack(ev, f"{i}-0")
        h.apply(CREATED_42)
        c = check_run(h.ops, final()).counts
        assert c.lost == c.delivered - c.handled == 3


class TestRecovered:
    def claimed_after(self, h: History) -> History:
        h.deliver(CREATED_42, "1-0", process="C1")
        h.fault("kill-consumer", "start").fault("kill-consumer", "stop")
        return h.handle(CREATED_42, "1-0", process="C2", via="claim", count=2)

    def test_claimed_and_handled_after_a_fault_is_recovered(self):
        h = self.claimed_after(History().publish(CREATED_42, entry_id="1-0"))
        c = check_run(h.ops, final({"42": ("created", 1)})).counts
        assert (c.recovered, c.redelivered, c.lost) == (1, 1, 0)

    def test_handled_before_the_fault_is_not_recovered(self):
        h = History().publish(CREATED_42, entry_id="1-0").handle(CREATED_42, "1-0")
        h.fault("kill-consumer", "start")
        h.handle(CREATED_42, "1-0", process="C2", via="claim", count=2)
        c = check_run(h.ops, final({"42": ("created", 1)})).counts
        assert (c.recovered, c.duplicated) == (0, 1)

    def test_first_read_after_a_fault_is_not_recovered(self):
        h = History().publish(CREATED_42, entry_id="1-0").fault("latency", "start").handle(CREATED_42, "1-0")
        assert check_run(h.ops, final({"42": ("created", 1)})).counts.recovered == 0

    def test_redelivery_without_any_fault_is_not_recovered(self):
        h = History().publish(CREATED_42, entry_id="1-0").deliver(CREATED_42, "1-0")
        h.handle(CREATED_42, "1-0", via="pending", count=2)
        assert check_run(h.ops, final({"42": ("created", 1)})).counts.recovered == 0

    def test_failpoint_op_counts_as_a_fault_start(self):
        h = History().publish(CREATED_42, entry_id="1-0").deliver(CREATED_42, "1-0")
        h.op("C1", "info", "failpoint", value={"name": "mid_batch", "action": "kill"})
        h.handle(CREATED_42, "1-0", process="C2", via="claim", count=2)
        assert check_run(h.ops, final({"42": ("created", 1)})).counts.recovered == 1


class TestDuplicatesAndRedelivery:
    def test_applied_twice_is_one_duplicated_event_and_still_valid(self):
        h = both_handled().handle(PAID_42, "2-0", via="pending", count=2)
        result = check_run(h.ops, final(PAID))
        assert (result.counts.duplicated, result.counts.redelivered) == (1, 1)
        assert result.verdict == VALID
        assert [a.kind for a in result.anomalies] == ["duplicated"]

    def test_deliveries_beyond_the_first_are_redelivered(self):
        h = History().publish(CREATED_42, entry_id="1-0")
        for n in (1, 2, 3):
            h.deliver(CREATED_42, "1-0", count=n)
        h.apply(CREATED_42)
        assert check_run(h.ops, final({"42": ("created", 1)})).counts.redelivered == 2

    def test_second_stream_entry_of_one_event(self):
        h = History().publish(CREATED_42, "info").publish(CREATED_42, entry_id="5-0")
        h.handle(CREATED_42, "1-0").handle(CREATED_42, "5-0", effect="duplicate")
        c = check_run(h.ops, final({"42": ("created", 1)})).counts
        assert (c.duplicate_entries, c.redelivered, c.duplicated) == (1, 1, 0)

    def test_same_entry_seen_by_publish_deliver_and_stream_is_one_entry(self):
        h = History().publish(CREATED_42, entry_id="1-0").handle(CREATED_42, "1-0")
        stream = [{"entry_id": "1-0", "stream": "orders", "event_id": "e42-1"}]
        assert check_run(h.ops, final({"42": ("created", 1)}, stream_entries=stream)).counts.duplicate_entries == 0

    def test_one_entry_in_each_of_two_streams_is_not_a_duplicate(self):
        h = History().publish(CREATED_42, entry_id="1-0", stream="ingest")
        h.op("router", "ok", "publish", **CREATED_42.fields, entry_id="1-1", stream="orders:0")
        assert check_run(h.ops, final()).counts.duplicate_entries == 0

    def test_projection_above_events_applied_is_drift(self):
        h = both_handled()
        result = check_run(h.ops, final(PAID, projection={"42": 3}))
        assert result.counts.projection_drift == 1
        assert result.verdict == VALID


class TestOrderAndFinalState:
    def test_baseline_older_write_after_newer_is_reordered_and_wrong(self):
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
        h.deliver(CREATED_42, "1-0", process="C1").deliver(PAID_42, "2-0", process="C2")
        h.apply(PAID_42, process="C2").apply(CREATED_42, process="C1")
        result = check_run(h.ops, final({"42": ("created", 1)}))
        c = result.counts
        assert (c.reordered, c.wrong_keys, c.wrong_final_state_runs) == (1, 1, 1)
        assert result.verdict == INVALID
        kinds = {a.kind: a for a in result.anomalies}
        assert (kinds["reordered"].versions, kinds["reordered"].examples) == ([2, 1], ["e42-1"])
        assert "expected paid (v=2), final created (v=1)" in kinds["wrong-final-state"].detail

    @pytest.mark.parametrize("created_lock, paid_lock, reordered, versions", [
        (None, None, 1, [2, 1]),          # no locked_at: the order of the apply ops (paid's first)
        (0.0002, 0.0003, 0, [1, 2]),      # created held the row lock first; only its op is late
        (0.0002, None, 0, [1, 2]),        # paid falls back to its op's time, after created's lock
        (0.0003, 0.0002, 1, [2, 1]),      # the locks agree with the ops: a real reorder
    ])
    def test_writes_are_ordered_by_locked_at_when_the_guard_gives_it(self, created_lock, paid_lock,
                                                                     reordered, versions):
        """C1: ops are written after COMMIT, so two writers' ops can land in the other order."""
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
        h.deliver(CREATED_42, "1-0", process="C1").deliver(PAID_42, "2-0", process="C2")
        start = h.time
        locks = {ev: {} if lock is None else {"locked_at": start + lock}
                 for ev, lock in ((CREATED_42, created_lock), (PAID_42, paid_lock))}
        h.apply(PAID_42, process="C2", **locks[PAID_42]).apply(CREATED_42, process="C1", **locks[CREATED_42])
        result = check_run(h.ops, final(PAID))
        assert result.counts.reordered == reordered
        assert applied_versions(h) == versions

    @pytest.mark.parametrize("created_seq, paid_seq, created_lock, paid_lock, reordered, versions", [
        (1, 2, None, None, 0, [1, 2]),            # created committed first; only its op is late
        (2, 1, None, None, 1, [2, 1]),            # paid committed first: a real reorder
        (1, 2, 0.0003, 0.0002, 0, [1, 2]),        # seq wins over locked_at
        (2, 1, 0.0002, 0.0003, 1, [2, 1]),        # ... both ways
        (1, None, None, None, 1, [2, 1]),         # a write without seq: the key falls back to op order
        (1, None, 0.0002, 0.0003, 0, [1, 2]),     # ... and to locked_at
        ("1", "2", None, None, 1, [2, 1]),        # a seq that is not an int is ignored
    ])
    def test_writes_are_ordered_by_seq_when_every_write_of_the_key_has_one(
            self, created_seq, paid_seq, created_lock, paid_lock, reordered, versions):
        """`value.seq` is the key's commit order, taken by the database (effect.py)."""
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
        h.deliver(CREATED_42, "1-0", process="C1").deliver(PAID_42, "2-0", process="C2")
        start = h.time
        value = {}
        for ev, seq, lock in ((CREATED_42, created_seq, created_lock), (PAID_42, paid_seq, paid_lock)):
            value[ev] = {**({} if seq is None else {"seq": seq}),
                         **({} if lock is None else {"locked_at": start + lock})}
        h.apply(PAID_42, process="C2", **value[PAID_42]).apply(CREATED_42, process="C1", **value[CREATED_42])
        result = check_run(h.ops, final(PAID))
        assert result.counts.reordered == reordered
        assert applied_versions(h) == versions

    def test_seq_orders_each_key_on_its_own(self):
        """Key 42 has seq on every write (commit order), key 43 on none (op order)."""
        h = History()
        for ev in (CREATED_42, PAID_42, CREATED_43, PAID_43):
            h.publish(ev, entry_id=f"{ev.event_id}-0")
        h.apply(PAID_42, process="C2", seq=2).apply(CREATED_42, seq=1)
        h.apply(PAID_43, process="C2").apply(CREATED_43)
        result = check_run(h.ops, final({"42": ("paid", 2), "43": ("created", 1)}))
        kinds = {a.kind: a for a in result.anomalies}
        assert result.counts.reordered == 1
        assert (kinds["reordered"].key, kinds["reordered"].versions) == ("43", [2, 1])

    def test_anomaly_versions_follow_lock_order_not_op_order(self):
        """The op order says created then paid; the locks say paid committed first."""
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
        start = h.time
        h.apply(CREATED_42, locked_at=start + 0.0009).apply(PAID_42, process="C2", locked_at=start + 0.0001)
        result = check_run(h.ops, final({"42": ("created", 1)}))
        kinds = {a.kind: a for a in result.anomalies}
        assert (kinds["reordered"].versions, kinds["reordered"].examples) == ([2, 1], ["e42-1"])
        assert kinds["wrong-final-state"].versions == [2, 1]

    @pytest.mark.parametrize("where", ["pending", "undelivered", "dlq"])
    def test_wrong_key_whose_top_event_still_waits_is_unsettled_not_invalid(self, where):
        """ack after + a killed consumer: paid is recoverable in the PEL, the row still says created."""
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
        h.handle(CREATED_42, "1-0").deliver(PAID_42, "2-0")
        entry = {"entry_id": "2-0", "stream": "orders", "event_id": "e42-2", "consumer": "C1",
                 "delivery_count": 1}
        result = check_run(h.ops, final({"42": ("created", 1)}, **{where: [entry]}))
        c = result.counts
        assert (c.wrong_keys, c.wrong_final_state_runs, c.unsettled_keys, c.lost) == (1, 1, 1, 0)
        assert result.verdict == VALID
        (anomaly,) = [a for a in result.anomalies if a.kind == "wrong-final-state"]
        assert "unsettled" in anomaly.detail

    @pytest.mark.parametrize("where", ["pending", "undelivered"])
    def test_what_a_live_consumer_left_waiting_is_stopped_consuming(self, where):
        """The same state when the caller vouches that a live, healed consumer made no more
        progress: paid was never consumed, the run is invalid and the wrong key is settled."""
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")
        h.handle(CREATED_42, "1-0").deliver(PAID_42, "2-0")
        entry = {"entry_id": "2-0", "stream": "orders", "event_id": "e42-2", "consumer": "C1",
                 "delivery_count": 1}
        result = check_run(h.ops, final({"42": ("created", 1)}, **{where: [entry]}), consumers_live=True)
        c = result.counts
        assert (c.wrong_keys, c.unsettled_keys, c.lost) == (1, 0, 0)
        assert result.verdict == INVALID
        assert result.anomaly_counts["stopped-consuming"] == 1
        (stopped,) = [a for a in result.anomalies if a.kind == "stopped-consuming"]
        assert stopped.examples == ["e42-2"]
        (wrong,) = [a for a in result.anomalies if a.kind == "wrong-final-state"]
        assert "stopped-consuming" in wrong.detail and "unsettled" not in wrong.detail

    def test_a_handled_event_still_pending_is_not_stopped_consuming(self):
        """Consumed, its ack lost: pending_left counts it, liveness does not."""
        h = History().publish(CREATED_42, entry_id="1-0").handle(CREATED_42, "1-0")
        entry = {"entry_id": "1-0", "stream": "orders", "event_id": "e42-1", "consumer": "C1",
                 "delivery_count": 1}
        result = check_run(h.ops, final({"42": ("created", 1)}, pending=[entry]), consumers_live=True)
        assert (result.verdict, result.counts.pending_left) == (VALID, 1)
        assert "stopped-consuming" not in result.anomaly_counts

    def test_missing_row_is_wrong(self):
        h = both_handled()
        assert check_run(h.ops, final()).counts.wrong_keys == 1

    def test_expected_state_ignores_versions_never_published(self):
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, "fail").handle(CREATED_42, "1-0")
        c = check_run(h.ops, final({"42": ("created", 1)})).counts
        assert (c.wrong_keys, c.lost) == (0, 0)

    def test_wrong_keys_count_keys_but_wrong_runs_at_most_one(self):
        h = History()
        for i, ev in enumerate([CREATED_42, PAID_42, CREATED_43, PAID_43]):
            h.publish(ev, entry_id=f"{i}-0").handle(ev, f"{i}-0")
        result = check_run(h.ops, final({"42": ("created", 1), "43": ("created", 1)}))
        c = result.counts
        assert (c.wrong_keys, c.wrong_final_state_runs, c.unsettled_keys) == (2, 1, 0)
        assert result.verdict == INVALID  # settled wrong keys alone are a violation


class TestUnexpectedAndCounters:
    def test_handled_event_nobody_published_is_unexpected(self):
        """Jepsen's `unexpected`: delivered although no process ever tried to publish it."""
        h = History().publish(CREATED_42, entry_id="1-0").handle(CREATED_42, "1-0").handle(PAID_42, "2-0")
        result = check_run(h.ops, final(PAID))
        assert (result.counts.unexpected, result.counts.published) == (1, 1)
        assert result.verdict == INVALID

    def test_failed_publish_that_shows_up_is_published_not_a_violation(self):
        """The producer misread its error (it should have said info): the event is in the log,
        so it is published, counts for the final state and must be handled."""
        h = History().publish(CREATED_42, entry_id="1-0").publish(PAID_42, "fail").handle(CREATED_42, "1-0")
        h.handle(PAID_42, "2-0")
        result = check_run(h.ops, final(PAID))
        c = result.counts
        assert (c.failed_publish_seen, c.published, c.unexpected, c.wrong_keys) == (1, 2, 0, 0)
        assert result.verdict == VALID

    def test_retries_and_failed_releases_are_counted(self):
        h = History().op("C1", "info", "retry", value="serialization failure")
        h.op("C1", "ok", "unlock", key="42", value=0).op("C2", "ok", "unlock", key="42", value=1)
        h.op("C1", "fail", "unlock", key="42")
        c = check_run(h.ops, final()).counts
        assert (c.retries, c.releases_failed) == (1, 2)


class TestVerdict:
    def test_unknown_reason_makes_a_clean_run_unknown(self):
        result = check_run(both_handled().ops, final(PAID), unknown_reasons=["C2 died: SIGSEGV"])
        assert result.verdict == UNKNOWN
        assert result.unknown_reasons == ["C2 died: SIGSEGV"]

    def test_invalid_outranks_unknown(self):
        h = History().publish(CREATED_42, entry_id="1-0")
        assert check_run(h.ops, final(), unknown_reasons=["drain timed out"]).verdict == INVALID

    def test_anomalies_are_bounded_but_counts_exact(self):
        h = History()
        for k in range(30):
            h.publish(type(CREATED_42)(f"e{k}-1", str(k), 1, "created"), entry_id=f"{k}-0")
        result = check_run(h.ops, final())
        assert result.counts.lost == 30 and result.anomaly_counts["lost"] == 30
        assert len([a for a in result.anomalies if a.kind == "lost"]) == 10


class TestBadInput:
    def test_op_without_f_names_the_fix(self):
        with pytest.raises(HistoryError, match="op without 'f'.*HistoryWriter.op"):
            check_run([{"time": 1.0, "process": "C1", "type": "ok"}], final())

    def test_versions_that_do_not_compare_name_the_event(self):
        h = History().apply(PAID_42)
        h.op("C1", "ok", "apply", event_id="e42-9", key="42", version="1700-0", rows=1, effect="applied")
        with pytest.raises(HistoryError, match="apply of e42-9 on key 42: version '1700-0'"):
            check_run(h.ops, final())

    def test_final_state_must_be_a_final_state(self):
        with pytest.raises(TypeError, match="needs a chaos.checker.FinalState, got dict"):
            check_run([], {"rows": {}})


class TestGroundTruth:
    """Counts the workers' own ops cannot make up: the database and the intended events judge."""

    def test_effects_the_projection_does_not_hold_are_a_violation(self):
        # two `apply ok` and a projection of 0: the workers claim what PostgreSQL does not hold
        result = check_run(both_handled().ops, final(PAID, projection={"42": 0}))
        assert result.counts.negative_drift == 2 and result.counts.projection_drift == 2
        assert result.verdict == INVALID
        assert [a.kind for a in result.anomalies if a.kind == "unheld-effect"] == ["unheld-effect"]

    def test_a_guard_that_writes_no_projection_is_not_judged_by_it(self):
        h = History().publish(CREATED_42, entry_id="1-0").deliver(CREATED_42, "1-0")
        h.apply(CREATED_42, projection=False).ack(CREATED_42, "1-0")
        result = check_run(h.ops, final({"42": ("created", 1)}, projection={"42": 0}))
        assert (result.counts.negative_drift, result.counts.projection_drift) == (0, 0)
        assert result.verdict == VALID

    def test_an_intended_event_never_attempted_is_counted_and_unknown(self):
        # 2 intended events, 1 published and handled: the other vanished without an op
        h = History().publish(CREATED_42, entry_id="1-0").handle(CREATED_42, "1-0")
        result = check_run(h.ops, final({"42": ("created", 1)}, events=[CREATED_42.fields, PAID_42.fields]))
        assert (result.counts.published, result.counts.unattempted) == (1, 1)
        assert result.verdict == UNKNOWN
        assert "1 intended events were never attempted" in result.unknown_reasons[0]

    def test_a_fault_that_explains_unattempted_events_keeps_the_run_valid(self):
        h = History().publish(CREATED_42, entry_id="1-0").handle(CREATED_42, "1-0")
        result = check_run(h.ops, final({"42": ("created", 1)}, events=[CREATED_42.fields, PAID_42.fields]),
                           explained={"unattempted"})
        assert result.counts.unattempted == 1 and result.verdict == VALID

    def test_an_entry_in_redis_that_nobody_published_is_unexpected(self):
        result = check_run([], final(stream_entries=[{"event_id": "e42-1", "entry_id": "1-0", "stream": "orders"}]))
        assert (result.counts.unexpected, result.counts.unattempted) == (1, 0)

    def test_every_event_is_in_exactly_one_fate(self):
        h = History().publish(CREATED_42, entry_id="1-0").handle(CREATED_42, "1-0")
        h.publish(PAID_42, "fail").publish(CREATED_43, "info")
        result = check_run(h.ops, final(events=[e.fields for e in (CREATED_42, PAID_42, CREATED_43, PAID_43)]))
        c = result.counts
        assert (c.published, c.dropped, c.indeterminate, c.unexpected, c.unattempted) == (1, 1, 1, 0, 1)

    def test_the_accounting_names_the_figures_when_an_event_falls_through(self, monkeypatch):
        from chaos import checker
        with pytest.raises(AssertionError, match="event accounting broken: published 1"):
            checker._check_accounting(2, checker.Counts(published=1), 0, 1)
