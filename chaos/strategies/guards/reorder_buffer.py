"""`reorder-buffer` (P3): apply a key's events strictly in version order, parking early ones.

Under a per-key lock, in one transaction with the order row locked: an event whose
version is the next one (row version + 1) is applied, and then every parked event that
has become next is applied too (by this consumer, each recorded as its own `apply`); an
event further ahead is parked in `reorder_buffer` (effect `buffered`, not yet handled);
an event at or below the row's version is stale. Order holds across parallel consumers,
at the price of a gap that never fills (a lost event) stalling its key for good.
"""
from __future__ import annotations

import json
from typing import Callable

from chaos.strategies.guards.base import APPLIED, STALE, Guard, Outcome
from chaos.strategies.guards.effect import Written, with_seq
from chaos.events import Event

BUFFERED = "buffered"
SCHEMA = """CREATE TABLE IF NOT EXISTS reorder_buffer (
    key text NOT NULL, version bigint NOT NULL, event jsonb NOT NULL, PRIMARY KEY (key, version))"""


class ReorderBuffer(Guard):
    name = "reorder-buffer"
    summary = "apply in version order; park events that arrive early until the gap fills (P3)"
    params = ()
    rejects_copies = rejects_older_versions = True
    schema = SCHEMA

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        work()
        conn = self.env.pg()
        drained: list[tuple[Event, Written]] = []
        # A per-key session lock held until this consumer has recorded its applies (after_apply):
        # the next writer of the key starts after them, so the history shows the real write order.
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (ev.key,))
        self._locked = ev.key
        with conn.transaction(), conn.cursor() as cur:
            current = cur.execute("SELECT version FROM orders WHERE id = %s FOR UPDATE", (ev.key,)).fetchone()
            version = current[0] if current else 0
            if ev.version <= version:
                return Outcome(0, STALE, {"status": ev.etype, "row_version": version})
            if ev.version > version + 1:
                cur.execute("INSERT INTO reorder_buffer (key, version, event) VALUES (%s, %s, %s) "
                            "ON CONFLICT DO NOTHING", (ev.key, ev.version, _json(ev)))
                return Outcome(0, BUFFERED, {"status": ev.etype, "waiting_for": version + 1})
            written = self.write(cur, ev)
            nxt = ev.version + 1
            while True:
                parked = cur.execute("DELETE FROM reorder_buffer WHERE key = %s AND version = %s RETURNING event",
                                     (ev.key, nxt)).fetchone()
                if parked is None:
                    break
                later = Event.from_dict(parked[0])
                drained.append((later, self.write(cur, later)))
                nxt += 1
        self._released = drained
        return Outcome(written, APPLIED, {"status": ev.etype, "released": [e.event_id for e, _ in drained]})

    def after_apply(self) -> None:
        """Committed, and this event's own apply is recorded: now each released parked event
        is handled, by this consumer, after it (the history keeps the order of the writes)."""
        released, self._released = getattr(self, "_released", []), []
        for later, written in released:
            self.env.op("ok", "apply", **later.op_fields(), rows=int(written), effect=APPLIED,
                        value=with_seq({"status": later.etype, "from": "reorder_buffer"}, written))
        key, self._locked = getattr(self, "_locked", None), None
        if key is not None:
            self.env.pg().execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))


def _json(ev: Event) -> str:
    return json.dumps(ev.to_dict())
