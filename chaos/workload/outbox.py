"""The transactional outbox: the producing service's business row and its event, in one transaction.

A service that must both change its own state and publish an event cannot do both
atomically against two systems (PostgreSQL and Redis). The outbox pattern writes the
event into a table of the same database, in the same transaction as the business row,
and a separate dispatcher process (chaos.workload.dispatcher) relays committed rows to
the stream. So an event exists if and only if its business change committed, and a
failed publish can be retried from the row without the service's involvement.

Tables (created by ``create_schema``, idempotent):

* ``source_orders``: the order service's own record of an order (its source of truth,
  not the consumer's projection, which the workload engine keeps in its state table).
* ``outbox``: one row per event, ``published_at`` NULL until a dispatcher relayed it.

Per-key order of ``outbox.id`` equals commit order because the business row is written
*first*: a second transaction on the same key blocks on the row lock before it draws its
id from the sequence. Inserting the outbox row first would let two services on one key
commit in the opposite order of their ids, and a dispatcher reading ``ORDER BY id`` would
then see the later event first.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

import psycopg

from chaos.events import Event
from chaos.workload import planfile
from chaos.strategies.outbox_relay import (  # noqa: F401 - the contract, used here and by tests
    OUTBOX_TABLE, SOURCE_TABLE, WRITER_ROLE, has_schema, unpublished_count)

if TYPE_CHECKING:  # the worker side only; keeps this module importable without a WorkerEnv
    from chaos.workload.env import WorkerEnv

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {SOURCE_TABLE} (
    key      text PRIMARY KEY,
    status   text NOT NULL,
    version  integer NOT NULL
);
CREATE TABLE IF NOT EXISTS {OUTBOX_TABLE} (
    id           bigserial PRIMARY KEY,
    event_id     text NOT NULL UNIQUE,
    key          text NOT NULL,
    version      integer NOT NULL,
    etype        text NOT NULL,
    stream       text NOT NULL,
    fields       jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    published_at timestamptz,
    entry_id     text,
    attempts     integer NOT NULL DEFAULT 0,
    last_error   text
);
CREATE INDEX IF NOT EXISTS outbox_unpublished_by_key ON {OUTBOX_TABLE} (key, id) WHERE published_at IS NULL;
"""

# The business row keeps the highest version the service has recorded for the key.
UPSERT_SOURCE = f"""
INSERT INTO {SOURCE_TABLE} (key, status, version) VALUES (%s, %s, %s)
ON CONFLICT (key) DO UPDATE SET status = EXCLUDED.status, version = EXCLUDED.version
WHERE {SOURCE_TABLE}.version < EXCLUDED.version
"""
INSERT_OUTBOX = f"""
INSERT INTO {OUTBOX_TABLE} (event_id, key, version, etype, stream, fields)
VALUES (%s, %s, %s, %s, %s, %s) RETURNING id
"""


@dataclass(frozen=True)
class OutboxEvent:
    """What the service records: the event's identity and the exact stream entry fields.

    ``fields`` is what the dispatcher XADDs verbatim, so the consumer sees the same
    entry shape whether the event came through the outbox or a direct producer.
    """

    event_id: str
    key: str
    version: int
    etype: str
    stream: str
    fields: Mapping[str, str]

    @classmethod
    def of(cls, event: Event) -> OutboxEvent:
        """The outbox record of a workload event (its stream is the one the delivery routed it to)."""
        if not event.stream:
            raise ValueError(f"event {event.event_id} has no stream: route it through the delivery first")
        return cls(event.event_id, event.key, event.version, event.etype, event.stream, event.fields())


@dataclass(frozen=True)
class OutboxRow:
    """One outbox row as a dispatcher or the checker reads it."""

    id: int
    event_id: str
    key: str
    version: int
    etype: str
    stream: str
    fields: dict[str, str]
    published: bool
    entry_id: str | None
    attempts: int

    def as_final_state(self) -> dict[str, Any]:
        """The shape of ``FinalState.outbox`` entries (docs/INTERFACES.md section 5)."""
        return {"id": self.id, "event_id": self.event_id, "key": self.key, "version": self.version,
                "etype": self.etype, "published": self.published, "entry_id": self.entry_id,
                "attempts": self.attempts}


ROW_COLUMNS = "id, event_id, key, version, etype, stream, fields, published_at IS NOT NULL, entry_id, attempts"


def row_from_record(record: tuple) -> OutboxRow:
    """An OutboxRow from a ``SELECT {ROW_COLUMNS}`` record."""
    id_, event_id, key, version, etype, stream, fields, published, entry_id, attempts = record
    if isinstance(fields, str):
        fields = json.loads(fields)
    return OutboxRow(id_, event_id, key, version, etype, stream, dict(fields), bool(published), entry_id, attempts)



def create_schema(conn: psycopg.Connection) -> None:
    """Create the outbox and the service's business table if they do not exist yet.

    Concurrent ``CREATE TABLE IF NOT EXISTS`` can still collide in the catalog (a
    UniqueViolation on pg_type); the loser retries and then sees the tables.
    """
    for attempt in range(5):
        try:
            with conn.transaction():
                conn.execute(SCHEMA)
            return
        except psycopg.errors.UniqueViolation:
            time.sleep(0.01 * (attempt + 1))
    with conn.transaction():
        conn.execute(SCHEMA)


def record_event(conn: psycopg.Connection, event: OutboxEvent, *, commit: bool = True) -> int:
    """Write the business row and the outbox row in one transaction; return the outbox id.

    With ``commit=False`` the transaction is rolled back after both writes (the reference
    row "outbox + order in one transaction, ROLLBACK": neither row may exist afterwards).
    The returned id then names a row that never became visible.
    """
    with conn.transaction() as tx:
        conn.execute(UPSERT_SOURCE, (event.key, event.etype, event.version))
        outbox_id = conn.execute(INSERT_OUTBOX, (event.event_id, event.key, event.version, event.etype,
                                                  event.stream, json.dumps(dict(event.fields)))).fetchone()[0]
        if not commit:
            raise psycopg.Rollback(tx)
    return outbox_id


def read_outbox(conn: psycopg.Connection) -> list[OutboxRow]:
    """Every outbox row in id order (final-state reads and tests)."""
    return [row_from_record(r) for r in conn.execute(f"SELECT {ROW_COLUMNS} FROM {OUTBOX_TABLE} ORDER BY id")]


def read_source(conn: psycopg.Connection) -> dict[str, dict[str, Any]]:
    """The service's own business rows: key -> {status, version}."""
    rows = conn.execute(f"SELECT key, status, version FROM {SOURCE_TABLE} ORDER BY key")
    return {key: {"status": status, "version": version} for key, status, version in rows}


def producer_main(env: WorkerEnv) -> int:
    """Worker role ``outbox-producer``: the service writes each event on schedule, in one transaction.

    History: ``publish invoke`` then ``ok`` (the transaction committed: the event now
    exists and a dispatcher will relay it), ``fail`` (rolled back, by the ``rollback``
    spec or an error before COMMIT was sent) or ``info`` (the link broke during COMMIT:
    the row may or may not exist; the final outbox decides).
    """
    rollback = set(env.spec.get("rollback") or ())
    events = planfile.schedule(env.spec)   # (read as they come due: planfile.py)
    create_schema(env.pg())
    for ev in events:
        if env.stopping:
            break
        env.sleep_until(ev.at_ms)
        env.failpoints.hit("before_publish", ev.etype, key=ev.key, event_id=ev.event_id, version=ev.version)
        env.op("invoke", "publish", **ev.op_fields(), stream=ev.stream, value={"via": "outbox"})
        commit = ev.event_id not in rollback
        try:
            outbox_id = record_event(env.pg(), OutboxEvent.of(ev), commit=commit)
        except psycopg.OperationalError as exc:
            env.op("info", "publish", **ev.op_fields(), stream=ev.stream,
                   value={"via": "outbox", "error": f"{type(exc).__name__}: {exc}"[:200]})
            continue
        if commit:
            env.op("ok", "publish", **ev.op_fields(), stream=ev.stream,
                   value={"via": "outbox", "outbox_id": outbox_id})
        else:
            env.op("fail", "publish", **ev.op_fields(), stream=ev.stream,
                   value={"via": "outbox", "rolled_back": True})
    env.op("info", "log", value={"producer": "done", "at": time.monotonic()})
    return 0
