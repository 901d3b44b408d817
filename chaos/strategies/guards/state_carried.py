"""`state-carried` (P4): the event carries the order's whole state; the consumer upserts it if newer.

`INSERT .. ON CONFLICT (id) DO UPDATE .. WHERE orders.version < EXCLUDED.version`: the
first event of a key creates the row (no row is seeded for this guard: the conditional
upsert when the row does not exist yet), a later one replaces it only when its version is
higher, so arrival order does not matter and no read of the current row is needed. The
creating insert takes write sequence 1, each later change the next (effect.py).
"""
from __future__ import annotations

import time
from typing import Callable

from chaos.strategies.guards.base import APPLIED, STALE, Guard, Outcome
from chaos.strategies.guards.effect import Written
from chaos.events import Event

_UPSERT = ("WITH changed AS (INSERT INTO orders (id, status, version, write_seq) "
           "VALUES (%(key)s, %(status)s, %(version)s, 1) "
           "ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, version = EXCLUDED.version, "
           "write_seq = orders.write_seq + 1 WHERE orders.version < EXCLUDED.version RETURNING id, write_seq) "
           "INSERT INTO projection (key, count) SELECT id, 1 FROM changed "
           "ON CONFLICT (key) DO UPDATE SET count = projection.count + 1 "
           "RETURNING (SELECT write_seq FROM changed)")


class StateCarried(Guard):
    name = "state-carried"
    summary = "the event carries the full state; conditional upsert WHERE version < new (P4)"
    params = ()
    rejects_copies = rejects_older_versions = True
    seeds_rows = False

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        work()
        conn = self.env.pg()
        with conn.transaction(), conn.cursor() as cur:
            self.write_sent = True
            cur.execute(_UPSERT, {"key": ev.key, "status": ev.etype, "version": ev.version})
            rows = cur.rowcount
            written = Written(rows, cur.fetchone()[0] if rows > 0 else None)  # its write_seq
            locked_at = time.monotonic()  # the row lock is held until COMMIT: a later writer comes after
            self.env.failpoints.hit("before_commit", **ev.op_fields())
        return Outcome(written, APPLIED if rows else STALE, {"status": ev.etype, "upsert": True, "locked_at": locked_at})
