"""`inbox`: `INSERT INTO inbox (event_id) ... ON CONFLICT DO NOTHING RETURNING` and the effect in one tx.

A resent event (same event_id, another stream entry) finds its id already in the inbox
and changes nothing (`duplicate`). With `cas=1` the effect is also version-guarded,
which is the write side of the `recommended` preset.
"""
from __future__ import annotations

from typing import Callable

from chaos.strategies.guards.base import APPLIED, DUPLICATE, STALE, Guard, Outcome
from chaos.strategies.guards.effect import Written
from chaos.params import Param
from chaos.events import Event

# The inbox row and the effect write (chaos/strategies/guards/effect.py, with its write_seq) as
# one statement. A statement is atomic, so without a `before_commit` failpoint to fire between
# write and COMMIT it runs on its own in autocommit: one round trip per event.
_ONE = ("WITH seen AS (INSERT INTO inbox (event_id) VALUES (%(event_id)s) ON CONFLICT DO NOTHING "
        "RETURNING event_id), changed AS (UPDATE orders SET status = %(status)s, version = %(version)s, "
        "write_seq = write_seq + 1 WHERE id = %(key)s AND EXISTS (SELECT 1 FROM seen) {guard} "
        "RETURNING id, write_seq), "
        "counted AS (UPDATE projection SET count = count + 1 WHERE key IN (SELECT id FROM changed) "
        "RETURNING key) SELECT (SELECT count(*) FROM seen), (SELECT count(*) FROM changed), "
        "(SELECT max(write_seq) FROM changed)")
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
        params = {"event_id": ev.event_id, "status": ev.etype, "version": ev.version, "key": ev.key}
        sql = _ONE_CAS if self.cas else _ONE_PLAIN
        self.write_sent = True  # the inbox row is part of the effect: a lost reply leaves the outcome unknown
        if "before_commit" not in self.env.failpoints.armed:
            with conn.cursor() as cur:
                seen, rows, seq = cur.execute(sql, params).fetchone()
        else:  # BEGIN and the statement in one pipeline, the failpoint, then COMMIT
            with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
                seen, rows, seq = cur.execute(sql, params).fetchone()
                if seen:
                    self.env.failpoints.hit("before_commit", **ev.op_fields())
        if not seen:
            return Outcome(0, DUPLICATE, {"status": ev.etype, "inbox": "seen"})
        return Outcome(Written(rows, seq), APPLIED if rows or not self.cas else STALE, {"status": ev.etype})
