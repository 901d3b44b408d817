"""The team's consumer: read the orders stream in a consumer group, apply each event to the
order projection only when its business version is newer (compare-and-set), record the
e-mail in the same transaction only when the row changed, and acknowledge after the commit.
Entries a dead consumer left pending are claimed with XAUTOCLAIM.

Run as ``python -m orders_team.worker``; the endpoints come from the environment (the chaos
framework sets CHAOS_REDIS_URL, CHAOS_PG_DSN, CHAOS_STREAM, CHAOS_GROUP, CHAOS_CONSUMER).
"""
from __future__ import annotations

import os
import time

import psycopg
import redis

UPSERT_IF_NEWER = ("INSERT INTO orders (id, status, version) VALUES (%s, %s, %s) "
                   "ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, version = EXCLUDED.version "
                   "WHERE orders.version < EXCLUDED.version")
RECORD_EMAIL = "INSERT INTO order_emails (event_id, order_id, status) VALUES (%s, %s, %s)"
IDLE_MS = int(os.environ.get("ORDERS_IDLE_TIMEOUT_MS", "1000"))
BATCH = 50


def apply(db: psycopg.Connection, fields: dict[str, str]) -> None:
    with db.transaction():
        row = (fields["order_id"], fields["status"], int(fields["version"]))
        if db.execute(UPSERT_IF_NEWER, row).rowcount == 1:
            db.execute(RECORD_EMAIL, (fields["event_id"], fields["order_id"], fields["status"]))


def main() -> None:
    stream, group, me = os.environ["CHAOS_STREAM"], os.environ["CHAOS_GROUP"], os.environ["CHAOS_CONSUMER"]
    r = redis.Redis.from_url(os.environ["CHAOS_REDIS_URL"], decode_responses=True, protocol=2)
    db = psycopg.connect(os.environ["CHAOS_PG_DSN"], autocommit=True)
    while True:
        try:
            _, batch, *_ = r.xautoclaim(stream, group, me, min_idle_time=IDLE_MS, count=BATCH)
            if not batch:
                reply = r.xreadgroup(group, me, {stream: ">"}, count=BATCH, block=200)
                batch = reply[0][1] if reply else []
            for entry_id, fields in batch:
                if fields:
                    apply(db, fields)
                r.xack(stream, group, entry_id)
        except redis.ConnectionError:
            time.sleep(0.05)   # a failover or a cut link: the next call reconnects


if __name__ == "__main__":
    main()
