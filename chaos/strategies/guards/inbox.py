"""`inbox`: `INSERT INTO inbox (event_id) ... ON CONFLICT DO NOTHING RETURNING` and the effect in one tx.

A resent event (same event_id, another stream entry) finds its id already in the inbox
and changes nothing (`duplicate`). With `cas=1` the effect is also version-guarded,
which is the write side of the `recommended` preset.
"""
from __future__ import annotations

from typing import Callable

from chaos.strategies.guards.base import APPLIED, DUPLICATE, STALE, Guard, Outcome
from chaos.strategies.guards.effect import Written
from chaos.strategies.guards.prepared import INT8, TEXT, PreparedStatement, int_or_none
from chaos.params import Param
from chaos.events import Event

# The inbox row and the effect write (chaos/strategies/guards/effect.py, with its write_seq) as
# one statement. A statement is atomic, so without a `before_commit` failpoint to fire between
# write and COMMIT it runs on its own in autocommit: one round trip per event. Each step is
# gated by a one-time EXISTS on the previous one's output (no join, no aggregate: the server's
# per-execution plan setup is most of its cost); it answers (inbox row new?, write_seq taken or NULL).
_ONE = ("WITH seen AS (INSERT INTO inbox (event_id) VALUES (%(event_id)s) ON CONFLICT DO NOTHING RETURNING 1), "
        "changed AS (UPDATE orders SET status = %(status)s, version = %(version)s, write_seq = write_seq + 1 "
        "WHERE id = %(key)s AND EXISTS (SELECT FROM seen) {guard} RETURNING write_seq), "
        "counted AS (UPDATE projection SET count = count + 1 WHERE key = %(key)s AND EXISTS (SELECT FROM changed)) "
        "SELECT EXISTS (SELECT FROM seen), (SELECT write_seq FROM changed)")
_PARAMS = {"event_id": TEXT, "status": TEXT, "version": INT8, "key": TEXT}
_ONE_PLAIN = PreparedStatement("inbox", _ONE.format(guard=""), _PARAMS)
_ONE_CAS = PreparedStatement("inbox_cas", _ONE.format(guard="AND version < %(version)s"), _PARAMS)


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
        statement = _ONE_CAS if self.cas else _ONE_PLAIN
        self.write_sent = True  # the inbox row is part of the effect: a lost reply leaves the outcome unknown
        if "before_commit" not in self.env.failpoints.armed:   # one autocommit statement, prepared
            result = statement.execute(conn, params)
            seen, seq = result.get_value(0, 0) == b"t", int_or_none(result.get_value(0, 1))
        else:  # BEGIN and the statement in one pipeline, the failpoint, then COMMIT
            with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
                seen, seq = cur.execute(statement.sql, params).fetchone()
                if seen:
                    self.env.failpoints.hit("before_commit", **ev.op_fields())
        if not seen:
            return Outcome(0, DUPLICATE, {"status": ev.etype, "inbox": "seen"})
        rows = 0 if seq is None else 1   # (write_seq is NOT NULL: a NULL seq means no row changed)
        return Outcome(Written(rows, seq), APPLIED if rows or not self.cas else STALE, {"status": ev.etype})
