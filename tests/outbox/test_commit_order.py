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
            # the dispatcher sees only e42-2 meanwhile, and relays it before e42-1 exists
            r, deadline = cluster.direct_redis(), time.monotonic() + 10
            while "e42-2" not in stream_order(r).get("42", []) and time.monotonic() < deadline:
                time.sleep(0.005)
    relay.drain(outbox_db)
    assert stream_order(cluster.direct_redis())["42"] == ["e42-2", "e42-1"]


def blocked_by(observer, waiter_pid: int, holder_pid: int, timeout_s: float = 10.0) -> bool:
    """True once PostgreSQL reports `waiter_pid` waiting on a lock that `holder_pid` holds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        row = observer.execute("SELECT pg_blocking_pids(%s)", (waiter_pid,)).fetchone()
        if row and holder_pid in row[0]:
            return True
        time.sleep(0.005)
    return False


def test_business_row_first_makes_the_second_writer_wait_for_the_first(outbox_db, cluster, relay):
    relay.start(1, "per-key", poll_ms=10)
    relay.wait_started(1)
    early, late = event(42, 1, "created"), event(42, 2, "paid")
    started, done = threading.Event(), threading.Event()
    second_pid: list[int] = []

    def second_service() -> None:
        with cluster.pg_connect() as conn:
            second_pid.append(conn.info.backend_pid)
            started.set()
            record_event(conn, late)
            done.set()

    with cluster.pg_connect() as slow, cluster.pg_connect() as observer:
        with slow.transaction():
            slow.execute(outbox.UPSERT_SOURCE, (early.key, early.etype, early.version))
            other = threading.Thread(target=second_service)
            other.start()
            assert started.wait(10), "the second service never connected"
            # Proof of the wait, from PostgreSQL itself: the second service's backend is
            # blocked by ours on the business row, and has not committed.
            blocked = blocked_by(observer, second_pid[0], slow.info.backend_pid)
            committed_meanwhile = done.is_set()
            slow.execute(outbox.INSERT_OUTBOX, (early.event_id, early.key, early.version, early.etype,
                                                 STREAM, '{"event_id": "e42-1", "key": "42"}'))
        other.join(10)
    relay.drain(outbox_db)
    ids = {r.event_id: r.id for r in outbox.read_outbox(outbox_db)}
    assert blocked, "PostgreSQL never showed the second service waiting for the first's row lock"
    assert not committed_meanwhile, "the second service committed while the first held the business row's lock"
    assert done.is_set(), "the second service never committed after the first did"
    assert ids["e42-1"] < ids["e42-2"], ids
    assert stream_order(cluster.direct_redis())["42"] == ["e42-1", "e42-2"]
