"""read_final_state(paged=True), as the orchestrator's check reads it: the streams' entries in
pages and the intended events built as they are iterated give the same final state as the
lists read whole, on a real Redis and PostgreSQL (entries pending, undelivered, trimmed)."""
from __future__ import annotations

from typing import Any

import psycopg
import pytest
import redis

from chaos.cluster.endpoint import pg_dsn, redis_url
from chaos.events import Event
from chaos.workload import final_state as fs
from chaos.workload import schema


@pytest.mark.parametrize("page", [1, 7, 10_000])
def test_paged_final_state_is_the_whole_one(chaos_reset_cluster: Any, page: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = chaos_reset_cluster
    r = redis.Redis.from_url(redis_url(cluster.primary), decode_responses=True)
    events = [Event(f"e{i}", f"k{i % 5}", "paid", i, stream="orders") for i in range(40)]
    r.xgroup_create("orders", "g", id="0", mkstream=True)
    ids = [r.xadd("orders", ev.fields()) for ev in events]
    r.xadd("orders", {"no_event_id": "1"})                      # an entry without an event id
    r.xreadgroup("g", "C1", {"orders": ">"}, count=25)          # 25 pending, the rest undelivered
    r.xack("orders", "g", *ids[:10])                             # 15 pending
    r.xdel("orders", ids[12])                                    # pending, its entry trimmed
    r.xadd("dlq", {"event_id": "e3"})
    with psycopg.connect(pg_dsn(cluster.postgres), autocommit=True) as conn:
        schema.ensure_schema(conn)
        schema.seed_rows(conn, {ev.key for ev in events})
        conn.execute("UPDATE projection SET count = 3 WHERE key = 'k1'")
        whole = fs.read_final_state(r, conn, ["orders"], "g", "dlq", events + events[:3])
        monkeypatch.setattr(fs, "PAGE", page)
        monkeypatch.setattr(schema, "PAGE_ROWS", 2)
        paged = fs.read_final_state(r, conn, ["orders"], "g", "dlq", events + events[:3], paged=True)
        # the projection is read when its items are iterated (the checker's last step), each time whole
        assert not isinstance(paged.projection, dict)
        assert list(paged.projection.items()) == list(whole.projection.items()) == list(paged.projection.items())
        assert whole.projection["k1"] == 3 and len(whole.projection) == 5
    assert len(whole.pending) == 15 and len(whole.undelivered) == 16
    assert paged.pending == whole.pending and paged.undelivered == whole.undelivered
    assert paged.dlq == whole.dlq and paged.rows == whole.rows
    assert list(paged.stream_entries) == whole.stream_entries == list(paged.stream_entries)   # read again
    intended = list(paged.events)
    assert intended[:40] == whole.events and intended[40:] == whole.events[:3]   # (the checker keeps the first)
    assert next(p for p in whole.pending if p["entry_id"] == ids[12])["event_id"] is None


def test_rows_are_read_in_pages_and_equal_rows_shared(chaos_reset_cluster: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """read_rows goes through a server-side cursor (PAGE_ROWS a round trip) and gives what one
    plain query gives; rows equal in status and version are one dict up to SHARED_ROWS distinct
    ones (10^6 keys: no dict per key), past that each its own."""
    monkeypatch.setattr(schema, "PAGE_ROWS", 3)
    monkeypatch.setattr(schema, "SHARED_ROWS", 2)
    with psycopg.connect(pg_dsn(chaos_reset_cluster.postgres), autocommit=True) as conn:
        schema.ensure_schema(conn)
        schema.seed_rows(conn, [f"k{i}" for i in range(10)])
        conn.execute("UPDATE orders SET status = 'paid', version = 2 WHERE id IN ('k1', 'k2', 'k3')")
        conn.execute("UPDATE orders SET status = 'shipped', version = 3 WHERE id IN ('k4', 'k5')")
        rows = schema.read_rows(conn)
        plain = {k: {"status": s, "version": v} for k, s, v in conn.execute("SELECT id, status, version FROM orders")}
        assert schema.read_projection(conn) == {f"k{i}": 0 for i in range(10)}
    assert rows == plain and len(rows) == 10
    groups = [("k0", "k6", "k7", "k8", "k9"), ("k1", "k2", "k3"), ("k4", "k5")]
    objects = [len({id(rows[k]) for k in keys}) for keys in groups]
    # (whichever two distinct rows the scan meets first are shared; the third's keys get one each)
    assert sorted(objects) == sorted([1, 1, len(groups[objects.index(max(objects))])]), objects


def test_spilled_intended_events_read_back_as_planned(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The orchestrator's check spills the intended events to a file (Intended.spill) and drops
    the planned ones: read back, in pages or not, they are Event.intended's dicts, in order,
    as often as they are iterated; `remove` deletes the file."""
    monkeypatch.setattr(fs, "PAGE", 7)
    events = [Event(f"e{i}", f"k{i % 5}", "paid", i, stream="orders") for i in range(40)] + [
        Event("e0", "k0", "paid", 0, stream="orders")]
    spilled = fs.Intended.spill(iter(events), tmp_path / fs.INTENDED_FILE)
    assert list(spilled) == [ev.intended() for ev in events] == list(spilled)
    assert list(fs.Intended.spill([], tmp_path / "none")) == []
    spilled.remove()
    assert not (tmp_path / fs.INTENDED_FILE).exists()
