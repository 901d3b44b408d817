"""A hand-written redis-py consumer with a deliberate bug: it acknowledges a batch
BEFORE writing its effects (XACK of every entry read, then one PostgreSQL transaction
per entry).

A crash in between loses every acknowledged entry not yet written, for good: they are
no longer pending, so no XAUTOCLAIM can bring them back. The framework must catch this (docs/blackbox.md). Run
from the repository root as ``python -m examples.redis_py_ack_first``.
"""
from __future__ import annotations

import os
import time

import psycopg
import redis

from examples.orders_db import apply_event

STREAM = os.environ["CHAOS_STREAM"]
GROUP = os.environ["CHAOS_GROUP"]
CONSUMER = os.environ["CHAOS_CONSUMER"]
IDLE_MS = int(os.environ.get("ORDERS_IDLE_TIMEOUT_MS", "1000"))
WORK_S = float(os.environ.get("ORDERS_WORK_MS", "0")) / 1000  # the job's own cost
BATCH = 50


def entries(r: redis.Redis) -> list[tuple[str, dict]]:
    """Entries to work on: another consumer's abandoned ones first, then new ones."""
    _, claimed, *_ = r.xautoclaim(STREAM, GROUP, CONSUMER, min_idle_time=IDLE_MS, count=BATCH)
    if claimed:
        return claimed
    reply = r.xreadgroup(GROUP, CONSUMER, {STREAM: ">"}, count=BATCH, block=200)
    return reply[0][1] if reply else []


def main() -> None:
    r = redis.Redis.from_url(os.environ["CHAOS_REDIS_URL"], decode_responses=True, protocol=2)
    db = psycopg.connect(os.environ["CHAOS_PG_DSN"], autocommit=True)
    while True:
        try:
            batch = entries(r)
        except redis.ConnectionError:
            time.sleep(0.05)  # failover: the proxy is repointed, the next call reconnects
            continue
        if batch:
            r.xack(STREAM, GROUP, *[entry_id for entry_id, _ in batch])  # BUG: acked before the work is done
        for entry_id, fields in batch:
            time.sleep(WORK_S)
            apply_event(db, fields["order_id"], fields["status"], int(fields["version"]), fields["event_id"])


if __name__ == "__main__":
    main()
