"""One delivered entry's life: deliver -> guard (work + effect) -> ack, or the DLQ.

Shared by the group consumer (all three steps in one process) and the fan-out reader
and workers (the reader delivers and acks, a worker applies). The ops written here are
the ones the checker reads: `deliver`, `apply` invoke/ok/fail, `ack`, `dlq`.
"""
from __future__ import annotations

from typing import Any, Callable

import redis

from chaos.history import json_fields
from chaos.strategies.ack import AckPolicy
from chaos.strategies.guards.base import Guard
from chaos.workload.env import WorkerEnv
from chaos.events import Event
from chaos.workload.failpoints import FailpointFailure
from chaos.workload.link import exchange, send_only, stream_entries

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
        self.unwritten: list[bytes] = []   # a deliver op that goes out with the apply's invoke
        # > 0 (the group consumer): XACKs go out at once without waiting for their replies, up
        # to this many unconfirmed (link.send_only); their ack ops are written when the replies
        # are read, at the next exchange on the connection
        self.pipelined_acks = 0
        # the policy's values, read once (Part parameters are looked up by name)
        self.mode, self.after, self.batch = ack.mode, ack.after, ack.batch
        self.max_attempts, self.uses_noack = ack.max_attempts, ack.uses_noack
        self._extras: dict[tuple[str, int, str], bytes] = {}   # a deliver op's stream/count/via, serialised
        self._last_body: tuple[str, Event | None, bytes] = ("", None, b"")
        self._streams: dict[str, bytes] = {}

    def _body(self, ev: Event, entry_id: str) -> bytes:
        """The fields every op about this delivered entry carries (the event's and its entry id),
        serialised once for the entry's deliver, apply and ack ops."""
        last_id, last_ev, body = self._last_body
        if last_id == entry_id and last_ev is ev:
            return body
        fields = ev.op_fields()
        fields["entry_id"] = entry_id
        body = json_fields(fields)
        self._last_body = (entry_id, ev, body)
        return body

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
        extras = self._extras.get((stream, delivery_count, via))
        if extras is None:
            extras = self._extras[stream, delivery_count, via] = json_fields(
                {"stream": stream, "delivery_count": delivery_count, "via": via})
        line = env.history.line("ok", "deliver", self._body(ev, entry_id) + extras)
        if with_apply and self.after and "after_read" not in env.failpoints.armed:
            self.unwritten.append(line)
            return ev
        env.history.lines([line])
        env.failpoints.hit("after_read", **ev.op_fields())
        if self.mode == "on-receive":
            if not self.uses_noack:
                r.xack(stream, self.group, entry_id)
            env.op("ok", "ack", **ev.op_fields(), entry_id=entry_id, stream=stream,
                   value="noack" if self.uses_noack else "on-receive")
        return ev

    def work(self, ev: Event) -> None:
        if "in_work" in self.env.failpoints.armed:   # a job that runs long (fault long-job)
            self.env.failpoints.hit("in_work", **ev.op_fields())
        self.env.sleep_ms(ev.cost_ms)
        if ev.poison:
            raise PoisonJob(f"poison job {ev.event_id}")

    def apply(self, ev: Event, entry_id: str) -> str:
        """Run the guard; DONE when the effect committed (or was rejected), FAILED otherwise."""
        env, armed, history = self.env, self.env.failpoints.armed, self.env.history
        body = self._body(ev, entry_id)
        unwritten, self.unwritten = self.unwritten, []
        unwritten.append(history.line("invoke", "apply", body))
        history.lines(unwritten)
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
            result = {"rows": outcome.rows, "effect": outcome.effect}
            if outcome.value is not None:
                result["value"] = outcome.value
            history.lines([history.line("ok", "apply", body + json_fields(result))])
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
            if self.after and (self.batch or self.hold_ack):
                self.deferred.append((stream, entry_id, ev, "batch" if self.batch else None))
            elif self.after:
                command, token = ("XACK", stream, self.group, entry_id), (stream, self._body(ev, entry_id))
                if not (self.pipelined_acks and send_only(r, command, self._ack_replies, token, self.pipelined_acks)):
                    exchange(r, [command])  # (redis-py's r.xack: 2-3x the CPU)
                    self._ack_replies([(token, 1)])
            return
        if self.max_attempts and delivery_count >= self.max_attempts:
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

    def _ack_replies(self, replies: list[tuple[tuple[str, bytes], Any]]) -> None:
        """The replies of XACKs sent by `finish`: their ack ops in one write; a refused XACK
        (NOREPLICAS, OOM: it did not run, the entry stays pending) is logged instead."""
        history, lines = self.env.history, []
        for (stream, body), reply in replies:
            if isinstance(reply, Exception):
                lines.append(history.line("info", "log", body + json_fields(
                    {"value": {"ack": "refused", "error": f"{type(reply).__name__}: {reply}"}})))
            else:
                lines.append(history.line("ok", "ack", body + self._stream_field(stream)))
        history.lines(lines)

    def _stream_field(self, stream: str) -> bytes:
        field = self._streams.get(stream)
        if field is None:
            field = self._streams[stream] = json_fields({"stream": stream})
        return field

    def _acked(self, deferred: list[tuple[str, str, Event, str | None]]) -> None:
        history = self.env.history  # sent together: their ops in one write
        history.lines([history.line("ok", "ack", self._body(ev, entry_id) + (
            self._stream_field(stream) if value is None else json_fields({"stream": stream, "value": value})))
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
        if self.max_attempts and delivery_count > self.max_attempts:
            unwritten, self.unwritten = self.unwritten, []
            self.env.history.lines(unwritten)
            self.dead_letter(r, stream, entry_id, ev, delivery_count)
            return
        status = self.apply(ev, entry_id)
        if self.after:
            self.finish(r, stream, entry_id, ev, status, delivery_count)


def _ack_commands(group: str, deferred: list[tuple[str, str, Event, str | None]]) -> list[tuple[str, ...]]:
    """One XACK per stream for the deferred entries."""
    return [("XACK", stream, group, *[entry_id for s, entry_id, _, _ in deferred if s == stream])
            for stream in dict.fromkeys(s for s, _, _, _ in deferred)]


def delivery_count(r: redis.Redis, stream: str, group: str, entry_id: str) -> int:
    """Times delivered, from XPENDING (after a claim or a re-read of one's own PEL)."""
    rows = r.xpending_range(stream, group, min=entry_id, max=entry_id, count=1)
    return int(rows[0]["times_delivered"]) if rows else 1
