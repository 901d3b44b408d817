"""Why the service writes its business row before the outbox row: id order = commit order per key.

Two services write events of one order concurrently. If the outbox row were inserted
first, the later event could draw the higher id yet commit first, and a dispatcher reading
`ORDER BY id` (even a per-key one) relays it before the earlier event exists. Writing the
business row first makes the second transaction wait on the row lock before it draws its id.
"""
from __future__ import annotations

import threading
import time

from test_dispatcher import STREAM, event, stream_order

from chaos.workload import outbox
from chaos.workload.outbox import record_event


def test_outbox_first_lets_a_later_event_commit_first_and_be_relayed_first(outbox_db, cluster, relay):
    """The counter-example, in raw SQL: e42-1 draws id 1, e42-2 id 2 and commits first."""
    relay.start(1, "per-key", poll_ms=10)
    relay.wait_started(1)
    early, late = event(42, 1, "created"), event(42, 2, "paid")
    with cluster.pg_connect() as slow, cluster.pg_connect() as fast:
        with slow.transaction():
            slow.execute(outbox.INSERT_OUTBOX, (early.event_id, early.key, early.version, early.etype,
                                                 STREAM, '{"event_id": "e42-1", "key": "42"}'))
            with fast.transaction():
                fast.execute(outbox.INSERT_OUTBOX, (late.event_id, late.key, late.version, late.etype,
                                                     STREAM, '{"event_id": "e42-2", "key": "42"}'))
            time.sleep(0.3)  # the dispatcher sees only e42-2 meanwhile
    relay.drain(outbox_db)
    assert stream_order(cluster.direct_redis())["42"] == ["e42-2", "e42-1"]


def test_business_row_first_makes_the_second_writer_wait_for_the_first(outbox_db, cluster, relay):
    relay.start(1, "per-key", poll_ms=10)
    relay.wait_started(1)
    early, late = event(42, 1, "created"), event(42, 2, "paid")
    started, done = threading.Event(), threading.Event()

    def second_service() -> None:
        with cluster.pg_connect() as conn:
            started.set()
            record_event(conn, late)
            done.set()

    with cluster.pg_connect() as slow:
        with slow.transaction():
            slow.execute(outbox.UPSERT_SOURCE, (early.key, early.etype, early.version))
            other = threading.Thread(target=second_service)
            other.start()
            assert started.wait(10), "the second service never connected"
            time.sleep(0.3)  # the second service is blocked on the business row meanwhile
            blocked = not done.is_set()
            slow.execute(outbox.INSERT_OUTBOX, (early.event_id, early.key, early.version, early.etype,
                                                 STREAM, '{"event_id": "e42-1", "key": "42"}'))
        other.join(10)
    relay.drain(outbox_db)
    ids = {r.event_id: r.id for r in outbox.read_outbox(outbox_db)}
    assert blocked, "the second service committed while the first held the business row's lock"
    assert done.is_set(), "the second service never committed after the first did"
    assert ids["e42-1"] < ids["e42-2"], ids
    assert stream_order(cluster.direct_redis())["42"] == ["e42-1", "e42-2"]
