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

_INSERT = "INSERT INTO inbox (event_id) VALUES (%s) ON CONFLICT DO NOTHING RETURNING event_id"


class Inbox(Guard):
    name = "inbox"
    summary = "inbox row by event_id (ON CONFLICT DO NOTHING) + effect in one transaction"
    params = (Param("cas", False, "also guard the effect with version < $v"),)

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        work()
        conn = self.env.pg()
        with conn.transaction(), conn.cursor() as cur:
            self.write_sent = True  # the inbox row is part of the effect: a lost COMMIT reply is unknown
            if cur.execute(_INSERT, (ev.event_id,)).fetchone() is None:
                return Outcome(0, DUPLICATE, {"status": ev.etype, "inbox": "seen"})
            rows = self.write(cur, ev, if_older=self.cas)
            locked_at = time.monotonic()  # row lock held until COMMIT: orders the writes of a key
        return Outcome(rows, APPLIED if rows or not self.cas else STALE, {"status": ev.etype, "locked_at": locked_at})
