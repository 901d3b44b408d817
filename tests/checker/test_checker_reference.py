"""The reference scenarios of DESIGN.md as histories: the checker must classify each one as
the reference result says (wrong or not, lost, duplicated, pending, DLQ)."""
from __future__ import annotations

from checker_histories import CREATED_42, CREATED_43, PAID_42, PAID_43, Ev, History, final

from chaos.checker import INVALID, VALID, check_run

PAID = {"42": ("paid", 2)}
CREATED = {"42": ("created", 1)}


def pair_published(h: History) -> History:
    return h.publish(CREATED_42, entry_id="1-0").publish(PAID_42, entry_id="2-0")


def parallel(h: History, first: Ev, second: Ev, second_effect: str = "applied") -> History:
    """Two consumers: both deliver, `first` finishes its write before `second`."""
    h.deliver(CREATED_42, "1-0", process="C1").deliver(PAID_42, "2-0", process="C2")
    p_first = "C1" if first is CREATED_42 else "C2"
    p_second = "C2" if p_first == "C1" else "C1"
    return h.apply(first, process=p_first).apply(second, second_effect, process=p_second)


def test_s5_cas_rejects_the_late_created_as_stale():
    h = parallel(pair_published(History()), PAID_42, CREATED_42, "stale")
    result = check_run(h.ops, final(PAID))
    assert (result.counts.wrong_final_state_runs, result.counts.reordered, result.verdict) == (0, 0, VALID)


def test_s4c_lock_expired_release_returns_zero_and_state_is_wrong():
    h = pair_published(History())
    h.op("C1", "ok", "lock", key="42", value="t1").deliver(CREATED_42, "1-0", process="C1")
    h.op("C2", "ok", "lock", key="42", value="t2").deliver(PAID_42, "2-0", process="C2")
    h.apply(PAID_42, process="C2").op("C2", "ok", "unlock", key="42", value=1)
    h.apply(CREATED_42, process="C1").op("C1", "ok", "unlock", key="42", value=0)
    c = check_run(h.ops, final(CREATED)).counts
    assert (c.wrong_final_state_runs, c.reordered, c.releases_failed) == (1, 1, 1)


def producer_reorder(version_guard: str) -> History:
    """created fails at 0 and 500 ms and succeeds at 1000 ms; paid succeeds at 300 ms."""
    h = History().publish(CREATED_42, "fail").publish(PAID_42, entry_id="300-0")
    h.publish(CREATED_42, "fail").publish(CREATED_42, entry_id="1000-0")
    h.handle(PAID_42, "300-0")
    effect = "stale" if version_guard == "business" else "applied"
    return h.handle(CREATED_42, "1000-0", effect=effect)


def test_producer_reorder_plain_or_entry_id_cas_is_wrong():
    result = check_run(producer_reorder("entry_id").ops, final(CREATED))
    assert (result.counts.published, result.counts.wrong_keys, result.counts.reordered) == (2, 1, 1)
    assert result.verdict == INVALID


def test_producer_reorder_business_version_cas_is_right():
    result = check_run(producer_reorder("business").ops, final(PAID))
    assert (result.counts.wrong_keys, result.counts.reordered, result.verdict) == (0, 0, VALID)


def test_outbox_rolled_back_publishes_nothing_and_is_valid():
    h = History().publish(CREATED_42, "fail", process="order-service")
    result = check_run(h.ops, final(events=[CREATED_42.fields]))
    assert (result.counts.published, result.counts.lost, result.verdict) == (0, 0, VALID)


def test_relay_twice_with_inbox_is_two_entries_one_effect():
    h = History().publish(CREATED_42, entry_id="1-0", process="dispatcher-1")
    h.publish(CREATED_42, entry_id="1-1", process="dispatcher-1")
    h.handle(CREATED_42, "1-0").handle(CREATED_42, "1-1", effect="duplicate")
    result = check_run(h.ops, final(CREATED, projection={"42": 1}))
    c = result.counts
    assert (c.duplicate_entries, c.duplicated, c.projection_drift, c.lost) == (1, 0, 0, 0)
    assert result.verdict == VALID


def poison_run(with_dlq: bool):
    h = History()
    pending, dlq = [], []
    for n in range(20):
        job = {"event_id": f"j{n}", "key": str(n)}  # bulk jobs: no business version
        h.op("P-bulk", "invoke", "publish", **job).op("P-bulk", "ok", "publish", **job, entry_id=f"{n}-0")
        h.op("C1", "ok", "deliver", **job, entry_id=f"{n}-0", via="read", delivery_count=1)
        if n % 2:  # every other job is poison
            h.op("C1", "fail", "apply", **job, value="poison")
            entry = {**job, "entry_id": f"{n}-0", "stream": "jobs"}
            if with_dlq:
                h.op("C1", "ok", "dlq", **job, entry_id=f"{n}-0")
                dlq.append(entry)
            else:
                pending.append({**entry, "consumer": "C1", "delivery_count": 5})
        else:
            h.op("C1", "ok", "apply", **job, rows=1, effect="applied").op("C1", "ok", "ack", **job)
    return check_run(h.ops, final(pending=pending, dlq=dlq))


def test_poison_without_dlq_stays_pending_and_is_not_lost():
    c = poison_run(with_dlq=False).counts
    assert (c.pending_left, c.dlq, c.lost, c.wrong_keys) == (10, 0, 0, 0)


def test_poison_with_dlq_goes_to_the_dlq():
    result = poison_run(with_dlq=True)
    assert (result.counts.dlq, result.counts.pending_left, result.counts.lost) == (10, 0, 0)
    assert result.verdict == VALID


def failover_run(guard_effect: str):
    """42's pair was handled while replication was held; after the promotion both come back
    as new entries (the group cursor rolled back). 43's pair was acked by XADD on the old
    primary and never replicated: lost."""
    h = pair_published(History())
    h.fault("promote-replica", "start").handle(CREATED_42, "1-0").handle(PAID_42, "2-0")
    h.publish(CREATED_43, entry_id="3-0").publish(PAID_43, entry_id="4-0")
    h.fault("promote-replica", "stop")
    h.handle(CREATED_42, "1-0", effect=guard_effect, process="C2")
    h.handle(PAID_42, "2-0", effect=guard_effect, process="C2")
    return check_run(h.ops, final(PAID))  # 42 ends paid either way; 43 has no row


def test_failover_loses_acked_entries_and_plain_applies_redelivered_copies_again():
    c = failover_run("applied").counts
    assert (c.lost, c.redelivered, c.duplicated, c.recovered) == (2, 2, 2, 0)
    assert c.reordered == 1  # created v1 applied again after paid v2


def test_failover_with_cas_rejects_the_copies_but_still_loses():
    result = failover_run("stale")
    c = result.counts
    assert (c.lost, c.redelivered, c.duplicated, c.reordered) == (2, 2, 0, 0)
    assert result.verdict == INVALID
    assert {a.key for a in result.anomalies if a.kind == "lost"} == {"43"}
