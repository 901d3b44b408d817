"""Deliberately broken guards: each one the built-in guard with one defect, the kind a
reviewer misses. `python -m chaos mutants` registers them (chaos/extensions.py) and runs
them in the consumer processes against the rows of the guard they break."""
from __future__ import annotations

from typing import Callable

from chaos.events import Event
from chaos.strategies.guards.base import APPLIED, DUPLICATE, STALE, Outcome
from chaos.strategies.guards.cas import Cas, entry_version
from chaos.strategies.guards.inbox import Inbox
from chaos.strategies.guards.lock import Lock
from chaos.strategies.guards.plain import Plain
from chaos.strategies.guards.reorder_buffer import ReorderBuffer
from chaos.strategies.guards.setnx_dedupe import SetnxDedupe


class CasWithoutVersion(Cas):
    """CAS whose UPDATE lost its `AND version < $v`: the last writer wins again."""

    name = "mutant-cas-without-version"
    summary = "cas without its version predicate"

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        version = ev.version if self.version == "business" else entry_version(entry_id)
        with self.env.pg().transaction(), self.env.pg().cursor() as cur:
            cur.execute("SELECT version FROM orders WHERE id = %s", (ev.key,))
            work()
            written = self.write(cur, ev, version=version)   # the defect: no if_older=True
        return Outcome(written, APPLIED if written else STALE, {"status": ev.etype, "written_version": version})


class InboxWithoutCheck(Inbox):
    """An inbox that records the event id but applies the effect whatever it found."""

    name = "mutant-inbox-without-check"
    summary = "inbox that records but does not check"

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        work()
        with self.env.pg().transaction(), self.env.pg().cursor() as cur:
            cur.execute("INSERT INTO inbox (event_id) VALUES (%s) ON CONFLICT DO NOTHING", (ev.event_id,))
            written = self.write(cur, ev, if_older=self.cas)   # the defect: the insert's answer is ignored
        return Outcome(written, APPLIED if written or not self.cas else STALE, {"status": ev.etype})


class AckBeforeWrite(Plain):
    """Ack after, written wrongly: the XACK goes out before the work and the effect write."""

    name = "mutant-ack-before-write"
    summary = "ack-after that acks before the write"

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        self.env.redis().xack(ev.stream, self.env.spec["group"], entry_id)   # the defect
        work()
        rows = self.write_in_tx(ev)
        return Outcome(rows, APPLIED, {"status": ev.etype})


class DedupeMarkerAfterEffect(SetnxDedupe):
    """The SET NX dedupe marker (the check and the mark in one) moved after the effect."""

    name = "mutant-dedupe-marker-after-effect"
    summary = "dedupe marker set after the effect"

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        work()
        rows = self.write_in_tx(ev)   # the defect: the effect before the marker that should stop it
        fresh = self.env.redis().set(f"dedupe:{ev.event_id}", entry_id, nx=True, ex=self.ttl_s)
        return Outcome(rows, APPLIED, {"status": ev.etype, "dedupe": "new" if fresh else "seen"})


class ReorderReleasesEarly(ReorderBuffer):
    """A reorder buffer that applies an event arriving ahead of its gap instead of parking it."""

    name = "mutant-reorder-releases-early"
    summary = "reorder buffer that releases early"

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        work()
        conn = self.env.pg()
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (ev.key,))
        self._locked, self._released = ev.key, []
        with conn.transaction(), conn.cursor() as cur:
            current = cur.execute("SELECT version FROM orders WHERE id = %s FOR UPDATE", (ev.key,)).fetchone()
            version = current[0] if current else 0
            if ev.version == version:
                return Outcome(0, STALE, {"status": ev.etype, "row_version": version})
            written = self.write(cur, ev)   # the defect: `ev.version > version + 1` is not parked
        return Outcome(written, APPLIED, {"status": ev.etype})


class LockWithoutOwnerCheck(Lock):
    """A per-key lock released with a plain DEL: it deletes whoever holds the lock now."""

    name = "mutant-lock-without-owner-check"
    summary = "lock released without an owner check"

    def release(self, name: str, token: str) -> int:
        return int(self.env.redis().delete(name))   # the defect: no compare-and-delete
