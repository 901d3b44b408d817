"""One delivered entry's life: deliver -> guard (work + effect) -> ack, or the DLQ.

Shared by the group consumer (all three steps in one process) and the fan-out reader
and workers (the reader delivers and acks, a worker applies). The ops written here are
the ones the checker reads: `deliver`, `apply` invoke/ok/fail, `ack`, `dlq`.
"""
from __future__ import annotations

from typing import Any, Callable

import redis

from chaos.strategies.ack import AckPolicy
from chaos.strategies.guards.base import Guard
from chaos.workload.env import WorkerEnv
from chaos.events import Event
from chaos.workload.failpoints import FailpointFailure
from chaos.workload.link import exchange, stream_entries

DONE, FAILED = "done", "failed"


class PoisonJob(Exception):
    """A job that fails every time it is handled (the poison reference rows)."""


class JobRunner:
    def __init__(self, env: WorkerEnv, guard: Guard | None, ack: AckPolicy, group: str) -> None:
        self.env, self.guard, self.ack, self.group = env, guard, ack, group
        # acks not sent yet: a batch's (ack policy batch=1), or the last entry of a read, whose
        # XACK goes out in one pipeline with the next XREADGROUP (one round trip saved per read)
        self.deferred: list[tuple[str, str, Event, str | None]] = []
        self.hold_ack = False   # set by the consumer for the last entry of a read
        self.unwritten: list[dict] = []   # a deliver op that goes out with the apply's invoke

    def deliver(self, r: redis.Redis, stream: str, entry_id: str, fields: dict | None,
                via: str, delivery_count: int, *, with_apply: bool = False) -> Event | None:
        """Record the delivery; None for an entry that is gone (trimmed) or not an event.
        `with_apply`: the apply follows at once (the group consumer), so when nothing may happen
        in between (no `after_read` failpoint, no ack on receipt) the deliver op is written
        together with the apply's invoke, in one write (ops produced together, as the history
        allows: a SIGKILL keeps a prefix of them)."""
        env = self.env
        if fields is None:
            env.op("info", "deliver", entry_id=entry_id, stream=stream, via=via, value="entry deleted")
            r.xack(stream, self.group, entry_id)
            return None
        try:
            ev = Event.from_fields(fields, stream)
        except ValueError as exc:
            env.op("info", "deliver", entry_id=entry_id, stream=stream, via=via, value=str(exc))
            r.xack(stream, self.group, entry_id)
            return None
        if with_apply and self.ack.mode == "after" and "after_read" not in env.failpoints.armed:
            self.unwritten.append(env.history.make("ok", "deliver", **ev.op_fields(), entry_id=entry_id,
                                                   stream=stream, delivery_count=delivery_count, via=via))
            return ev
        env.op("ok", "deliver", **ev.op_fields(), entry_id=entry_id, stream=stream,
               delivery_count=delivery_count, via=via)
        env.failpoints.hit("after_read", **ev.op_fields())
        if self.ack.mode == "on-receive":
            if not self.ack.uses_noack:
                r.xack(stream, self.group, entry_id)
            env.op("ok", "ack", **ev.op_fields(), entry_id=entry_id, stream=stream,
                   value="noack" if self.ack.uses_noack else "on-receive")
        return ev

    def work(self, ev: Event) -> None:
        self.env.sleep_ms(ev.cost_ms)
        if ev.poison:
            raise PoisonJob(f"poison job {ev.event_id}")

    def apply(self, ev: Event, entry_id: str) -> str:
        """Run the guard; DONE when the effect committed (or was rejected), FAILED otherwise."""
        env, armed = self.env, self.env.failpoints.armed
        invoke = env.history.make("invoke", "apply", **ev.op_fields(), entry_id=entry_id)
        unwritten, self.unwritten = self.unwritten, []
        env.history.ops([*unwritten, invoke])
        self.guard.write_sent = False
        try:
            try:
                if "before_apply" in armed:  # (the common case builds no arguments)
                    env.failpoints.hit("before_apply", **ev.op_fields())
                outcome = self.guard.apply(ev, entry_id, lambda: self.work(ev))
            except (PoisonJob, FailpointFailure) as exc:
                env.op("fail", "apply", **ev.op_fields(), entry_id=entry_id, value=f"poison: {exc}")
                return FAILED
            except Exception as exc:  # noqa: BLE001 - a broken link or a DB error: the entry stays pending
                # after the effect write was sent (a lost COMMIT reply) the outcome is unknown: info
                kind = "info" if self.guard.write_sent else "fail"
                env.op(kind, "apply", **ev.op_fields(), entry_id=entry_id, value=f"{type(exc).__name__}: {exc}")
                if not isinstance(exc, (redis.RedisError, OSError)):
                    self._reset_pg()
                return FAILED
            if "after_commit" in armed:
                env.failpoints.hit("after_commit", **ev.op_fields())  # committed, its apply op not yet written
            env.op("ok", "apply", **ev.op_fields(), entry_id=entry_id, rows=outcome.rows,
                   effect=outcome.effect, value=outcome.value)
        finally:
            self.guard.after_apply()
        if "after_apply_before_ack" in armed:
            env.failpoints.hit("after_apply_before_ack", **ev.op_fields())
        return DONE

    def _reset_pg(self) -> None:
        try:
            self.env.pg().close()
        except Exception:  # noqa: BLE001
            pass

    def finish(self, r: redis.Redis, stream: str, entry_id: str, ev: Event, status: str,
               delivery_count: int) -> None:
        """XACK a done entry (ack after), or dead-letter one that failed its last attempt."""
        if status == DONE:
            if self.ack.after and (self.ack.batch or self.hold_ack):
                self.deferred.append((stream, entry_id, ev, "batch" if self.ack.batch else None))
            elif self.ack.after:
                exchange(r, [("XACK", stream, self.group, entry_id)])  # (redis-py's r.xack: 2-3x the CPU)
                self.env.op("ok", "ack", **ev.op_fields(), entry_id=entry_id, stream=stream)
            return
        if self.ack.max_attempts and delivery_count >= self.ack.max_attempts:
            self.dead_letter(r, stream, entry_id, ev, delivery_count)

    def flush_acks(self, r: redis.Redis) -> None:
        """Send the acks not sent yet, one XACK per stream (their ops in one history write).
        A link error drops them unrecorded, as it does a lone XACK's: they stay pending."""
        deferred, self.deferred = self.deferred, []
        if deferred:
            exchange(r, _ack_commands(self.group, deferred))
            self._acked(deferred)

    def read_after_acks(self, r: redis.Redis, read_now: tuple[Any, ...],
                        read_blocking: Callable[[], list]) -> list:
        """The next read, with the acks not sent yet in the same write before it (Redis runs
        them in order, so every XACK still precedes the read). `read_now` is a non-blocking
        XREADGROUP command; when it finds nothing, `read_blocking()` waits for entries."""
        deferred, self.deferred = self.deferred, []
        if not deferred:
            return read_blocking()
        replies = exchange(r, [*_ack_commands(self.group, deferred), read_now])
        self._acked(deferred)
        return stream_entries(replies[-1]) or read_blocking()

    def _acked(self, deferred: list[tuple[str, str, Event, str | None]]) -> None:
        history = self.env.history  # sent together: their ops in one write
        history.ops([history.make("ok", "ack", **ev.op_fields(), entry_id=entry_id, stream=stream, value=value)
                     for stream, entry_id, ev, value in deferred])

    def dead_letter(self, r: redis.Redis, stream: str, entry_id: str, ev: Event, delivery_count: int) -> None:
        fields: dict[str, Any] = {**ev.fields(), "source_stream": stream, "source_id": entry_id,
                                  "deliveries": str(delivery_count)}
        dlq_id = r.xadd(self.ack.dlq, fields)
        r.xack(stream, self.group, entry_id)
        self.env.op("ok", "dlq", **ev.op_fields(), entry_id=entry_id, stream=stream,
                    delivery_count=delivery_count, value={"dlq_entry": dlq_id})

    def handle(self, r: redis.Redis, stream: str, entry_id: str, fields: dict | None,
               via: str, delivery_count: int) -> None:
        """All three steps in this process (the group consumer)."""
        ev = self.deliver(r, stream, entry_id, fields, via, delivery_count, with_apply=True)
        if ev is None:
            return
        if self.ack.max_attempts and delivery_count > self.ack.max_attempts:
            unwritten, self.unwritten = self.unwritten, []
            self.env.history.ops(unwritten)
            self.dead_letter(r, stream, entry_id, ev, delivery_count)
            return
        status = self.apply(ev, entry_id)
        if self.ack.mode == "after":
            self.finish(r, stream, entry_id, ev, status, delivery_count)


def _ack_commands(group: str, deferred: list[tuple[str, str, Event, str | None]]) -> list[tuple[str, ...]]:
    """One XACK per stream for the deferred entries."""
    return [("XACK", stream, group, *[entry_id for s, entry_id, _, _ in deferred if s == stream])
            for stream in dict.fromkeys(s for s, _, _, _ in deferred)]


def delivery_count(r: redis.Redis, stream: str, group: str, entry_id: str) -> int:
    """Times delivered, from XPENDING (after a claim or a re-read of one's own PEL)."""
    rows = r.xpending_range(stream, group, min=entry_id, max=entry_id, count=1)
    return int(rows[0]["times_delivered"]) if rows else 1
