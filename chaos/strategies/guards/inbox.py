"""`inbox`: `INSERT INTO inbox (event_id) ... ON CONFLICT DO NOTHING RETURNING` and the effect in one tx.

A resent event (same event_id, another stream entry) finds its id already in the inbox
and changes nothing (`duplicate`). With `cas=1` the effect is also version-guarded,
which is the write side of the `recommended` preset.
"""
from __future__ import annotations

import time
from typing import Callable

from chaos.strategies.guards.base import APPLIED, DUPLICATE, STALE, Guard, Outcome
from chaos.params import Param
from chaos.events import Event

# The inbox row and the effect write (chaos/strategies/guards/effect.py) as one statement, sent
# with BEGIN in one pipeline: two round trips per event (this, COMMIT) instead of four.
_ONE = ("WITH seen AS (INSERT INTO inbox (event_id) VALUES (%(event_id)s) ON CONFLICT DO NOTHING "
        "RETURNING event_id), changed AS (UPDATE orders SET status = %(status)s, version = %(version)s "
        "WHERE id = %(key)s AND EXISTS (SELECT 1 FROM seen) {guard} RETURNING id), "
        "counted AS (UPDATE projection SET count = count + 1 WHERE key IN (SELECT id FROM changed) "
        "RETURNING key) SELECT (SELECT count(*) FROM seen), (SELECT count(*) FROM changed)")
_ONE_PLAIN, _ONE_CAS = _ONE.format(guard=""), _ONE.format(guard="AND version < %(version)s")


class Inbox(Guard):
    name = "inbox"
    summary = "inbox row by event_id (ON CONFLICT DO NOTHING) + effect in one transaction"
    params = (Param("cas", False, "also guard the effect with version < $v"),)
    rejects_copies = True   # the inbox row of a seen event_id exists

    @property
    def rejects_older_versions(self) -> bool:  # type: ignore[override]
        return self.cas

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        work()
        conn = self.env.pg()
        with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
            self.write_sent = True  # the inbox row is part of the effect: a lost COMMIT reply is unknown
            seen, rows = cur.execute(_ONE_CAS if self.cas else _ONE_PLAIN,
                                     {"event_id": ev.event_id, "status": ev.etype, "version": ev.version,
                                      "key": ev.key}).fetchone()
            if not seen:
                return Outcome(0, DUPLICATE, {"status": ev.etype, "inbox": "seen"})
            self.env.failpoints.hit("before_commit", **ev.op_fields())
            locked_at = time.monotonic()  # row lock held until COMMIT: orders the writes of a key
        return Outcome(rows, APPLIED if rows or not self.cas else STALE, {"status": ev.etype, "locked_at": locked_at})
