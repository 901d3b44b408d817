"""Observation by triggers: every committed write, in commit order; the schema restored after."""
from __future__ import annotations

import threading

import psycopg
import pytest

from chaos.blackbox.config import parse_config
from chaos.blackbox.effects import SCHEMA, EffectRecorder, schema_fingerprint

CONFIG = parse_config({"state": {"table": "orders", "key": "id", "status": "status", "version": "version"},
                       "side_effects": {"table": "order_emails", "event_id": "event_id"}})
SCHEMA_SQL = """
CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL, version int NOT NULL DEFAULT 0);
CREATE TABLE order_emails (id bigserial PRIMARY KEY, event_id text NOT NULL, order_id text);
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER users_own BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION touch();
"""


@pytest.fixture
def db(cluster):
    conn = cluster.pg_connect()
    conn.execute(SCHEMA_SQL)
    yield conn
    conn.close()


def client(cluster, **kw) -> psycopg.Connection:
    return psycopg.connect(cluster.pg_dsn(), **kw)


def test_commit_order_not_txid_order_and_rollbacks_unseen(cluster, db) -> None:
    with EffectRecorder(db, CONFIG) as recorder:
        first, second, third = client(cluster), client(cluster), client(cluster)
        first.execute("INSERT INTO orders VALUES ('42', 'created', 1)")      # takes its txid first
        second.execute("INSERT INTO orders VALUES ('43', 'created', 1)")
        second.execute("INSERT INTO order_emails (event_id, order_id) VALUES ('e43-1', '43')")
        second.commit()                                                     # ... but commits second
        first.commit()
        third.execute("UPDATE orders SET status = 'paid', version = 2 WHERE id = '42'")
        third.rollback()
        third.execute("DELETE FROM orders WHERE id = '43'")
        third.commit()
        for c in (first, second, third):
            c.close()
        effects = recorder.read()
    assert [(e.role, e.op, e.key or e.event_id) for e in effects] == [
        ("state", "INSERT", "43"), ("side_effect", "INSERT", "e43-1"), ("state", "INSERT", "42"),
        ("state", "DELETE", "43")]
    assert effects[0].txid > effects[2].txid  # txid order would have put 42 first
    assert effects[0].commit_seq == effects[1].commit_seq < effects[2].commit_seq < effects[3].commit_seq
    assert effects[2].version == 1 and effects[2].status == "created"


def test_removal_leaves_the_schema_as_it_was(cluster, db) -> None:
    before = schema_fingerprint(db)
    assert any("users_own" in item for _, item in before)  # the user's own trigger is in the picture
    recorder = EffectRecorder(db, CONFIG)
    recorder.install()
    during = schema_fingerprint(db)
    assert any("chaos_bb_commit" in item for _, item in during) and len(during) > len(before)
    recorder.remove()
    assert schema_fingerprint(db) == before
    recorder.remove()  # twice is harmless


def test_leftovers_of_a_crashed_run_are_refused(cluster, db) -> None:
    recorder = EffectRecorder(db, CONFIG)
    recorder.install()
    try:
        with pytest.raises(RuntimeError, match=f"DROP SCHEMA {SCHEMA} CASCADE"):
            EffectRecorder(db, CONFIG).install()
    finally:
        recorder.remove()


def test_no_serialization_failure_added_under_repeatable_read(cluster, db) -> None:
    """Two concurrent REPEATABLE READ writers of different rows both commit: the commit
    numbering takes an advisory lock, not a row lock, so it adds no 40001."""
    errors: list[BaseException] = []
    with EffectRecorder(db, CONFIG) as recorder:
        conns = [client(cluster) for _ in range(2)]
        for c in conns:
            c.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        for n, c in enumerate(conns):
            c.execute("SELECT count(*) FROM orders")  # both snapshots taken before either commits
            c.execute("INSERT INTO orders VALUES (%s, 'created', 1)", (str(50 + n),))

        def commit(c: psycopg.Connection) -> None:
            try:
                c.commit()
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=commit, args=(c,)) for c in conns]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        for c in conns:
            c.close()
        assert errors == []
        assert sorted(e.key for e in recorder.read()) == ["50", "51"]
