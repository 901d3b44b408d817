"""A hand-written redis-py consumer done right, for contrast with redis_py_ack_first.py:
acknowledge after the write, recover other consumers' abandoned entries with XAUTOCLAIM,
and write only a newer business version (compare-and-set), sending the e-mail in the same
transaction only when the row changed; an entry it cannot parse (a poison payload) is moved
to the dead-letter stream ``ORDERS_DLQ_STREAM`` and acked in one MULTI, never retried. Run as
``python -m examples.redis_py_cas``.
"""
from __future__ import annotations

import os
import time

import psycopg
import redis

from examples.orders_db import apply_event_if_newer

STREAM = os.environ["CHAOS_STREAM"]
GROUP = os.environ["CHAOS_GROUP"]
CONSUMER = os.environ["CHAOS_CONSUMER"]
IDLE_MS = int(os.environ.get("ORDERS_IDLE_TIMEOUT_MS", "1000"))
WORK_S = float(os.environ.get("ORDERS_WORK_MS", "0")) / 1000
DLQ = os.environ.get("ORDERS_DLQ_STREAM", "")
BATCH = 50


def entries(r: redis.Redis) -> list[tuple[str, dict]]:
    """Abandoned entries of dead consumers first, then new ones."""
    _, claimed, *_ = r.xautoclaim(STREAM, GROUP, CONSUMER, min_idle_time=IDLE_MS, count=BATCH)
    if claimed:
        return claimed
    reply = r.xreadgroup(GROUP, CONSUMER, {STREAM: ">"}, count=BATCH, block=200)
    return reply[0][1] if reply else []


def consume(r: redis.Redis, db: psycopg.Connection, retry_on: type[Exception] = redis.ConnectionError) -> None:
    """Work forever: apply each entry (guarded), then XACK it; on ``retry_on`` wait and go on."""
    while True:
        try:
            batch = entries(r)
            for entry_id, fields in batch:
                if not fields:  # an entry trimmed or lost while pending: nothing to apply
                    r.xack(STREAM, GROUP, entry_id)
                    continue
                try:
                    order_id, status, version, event_id = (fields["order_id"], fields["status"],
                                                           int(fields["version"]), fields["event_id"])
                except (KeyError, ValueError) as exc:   # poison: retrying cannot help
                    dead_letter(r, entry_id, fields, exc)
                    continue
                time.sleep(WORK_S)
                apply_event_if_newer(db, order_id, status, version, event_id)
                r.xack(STREAM, GROUP, entry_id)  # only once the effect is committed
        except retry_on:
            time.sleep(0.05)  # failover: the proxy is repointed, the next call reconnects


def dead_letter(r: redis.Redis, entry_id: str, fields: dict, exc: Exception) -> None:
    """Copy the entry to the dead-letter stream (if one is named) and ack it, in one MULTI."""
    pipe = r.pipeline(transaction=True)
    if DLQ:
        pipe.xadd(DLQ, {**fields, "dead_letter_of": entry_id, "error": f"{type(exc).__name__}: {exc}"})
    pipe.xack(STREAM, GROUP, entry_id)
    pipe.execute()


def main() -> None:
    r = redis.Redis.from_url(os.environ["CHAOS_REDIS_URL"], decode_responses=True, protocol=2)
    consume(r, psycopg.connect(os.environ["CHAOS_PG_DSN"], autocommit=True))


if __name__ == "__main__":
    main()
