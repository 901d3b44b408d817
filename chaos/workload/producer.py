"""The producer process: publishes its events on schedule through its own link.

Every attempt is an invoke followed by `ok` (with the entry id), `fail` (the command
surely did not run: the connection could not be made) or `info` (unknown: a timeout or
a connection lost after sending). The retrying producer schedules retry k at
backoff*2^(k-1) after the event's first attempt (when its invoke was written, not when it was
planned: a producer that runs late, or was held at its before_publish failpoint, still spaces
its retries out) while later events keep going out (async retry).
An event with a `barrier` waits until those streams are fully acked (drain-then-switch).
With `wait_replicas`, a publish whose WAIT answers fewer replicas is `info` (on the primary,
not confirmed). The producer connects before its schedule starts and is released at t0
(WorkerEnv.await_start), so its own start-up is not part of the schedule.

Events that are due together go out as one pipeline of up to BATCH XADDs on the one
connection (one round trip instead of one per event; packed and read without redis-py's
Pipeline machinery, which cost more than the rest of the producer: chaos/workload/link.py):
Redis runs them in order, so per-key version order holds. Their invokes are written (in one
history write) before the pipeline is sent and their outcomes after its replies; a link
error fails the whole batch (`fail` when nothing was sent, else `info` for each: some may
have been applied). An event with a barrier, WAIT for replicas or an armed `before_publish`
failpoint goes out on its own.
"""
from __future__ import annotations

import heapq
import time
from collections.abc import Iterator
from typing import Any

import redis

from chaos.history import json_fields
from chaos.strategies.delivery.base import GROUP
from chaos.strategies.part import build
from chaos.strategies.producers import PRODUCERS
from chaos.workload.env import WorkerEnv
from chaos.workload import planfile
from chaos.workload.link import exchange
from chaos.events import Event

BATCH = 256     # XADDs per pipeline: past about a hundred, a bigger batch saves nothing measurable
LINK_ERRORS = (redis.ConnectionError, redis.TimeoutError, OSError)


_ATTEMPTS: dict[int, bytes] = {}


def _attempt(attempt: int) -> bytes:
    """A publish op's `value` ({"attempt": n}), serialised once per n."""
    field = _ATTEMPTS.get(attempt)
    if field is None:
        field = _ATTEMPTS[attempt] = json_fields({"value": {"attempt": attempt}})
    return field


def _now_ms(env: WorkerEnv) -> float:
    """Now, as an offset from t0 in the schedule's (unscaled) milliseconds."""
    return (time.monotonic() - env.t0) * 1000.0 / env.scale


def _sent_nothing(exc: Exception) -> bool:
    """redis-py says 'connecting' when the connection never came up (nothing was sent)."""
    return isinstance(exc, redis.ConnectionError) and "connecting" in str(exc).lower()


REFUSED = ("OOM", "NOREPLICAS", "READONLY")


def _refused(exc: Exception) -> bool:
    """The server refused the XADD before running it (maxmemory reached, too few replicas, a
    replica): surely not applied, so a `fail` the producer may retry, not a crash."""
    return (isinstance(exc, (redis.exceptions.OutOfMemoryError, redis.exceptions.ReadOnlyError))
            or (isinstance(exc, redis.ResponseError) and str(exc).split(" ", 1)[0] in REFUSED))


class Publisher:
    def __init__(self, env: WorkerEnv, part: Any) -> None:
        self.env, self.part = env, part
        self.r = env.redis(timeout_ms=part.timeout_ms)
        self.barriers_passed: set[str] = set()
        self.sent_ms = 0.0    # when the last publish's invokes were written (unscaled offset from t0)
        self.fields = Event.fields
        encoder = env.spec.get("encoder")
        if encoder:  # a black-box run publishes in the user's library format (chaos/encoders.py)
            from chaos.encoders import EncoderSpec, encoder_for
            self.fields = encoder_for(EncoderSpec(**encoder))

    def publish(self, ev: Event, attempt: int) -> bool:
        env = self.env
        env.failpoints.hit("before_publish", **ev.op_fields())
        self.sent_ms = _now_ms(env)
        env.op("invoke", "publish", **ev.op_fields(), stream=ev.stream, value={"attempt": attempt})
        try:
            entry_id = self.r.xadd(ev.stream, self.fields(ev))
            value: dict[str, Any] = {"attempt": attempt}
            if self.part.wait_replicas:
                value["replicas"] = int(self.r.execute_command(
                    "WAIT", self.part.wait_replicas, max(1, round(env.scaled_ms(self.part.wait_ms)))))
                value["wait_for"] = self.part.wait_replicas
        except (redis.ConnectionError, redis.TimeoutError, OSError, redis.ResponseError) as exc:
            if isinstance(exc, redis.ResponseError) and not _refused(exc):
                raise
            kind = "fail" if _sent_nothing(exc) or _refused(exc) else "info"
            env.op(kind, "publish", **ev.op_fields(), stream=ev.stream,
                   value={"attempt": attempt, "error": f"{type(exc).__name__}: {exc}"})
            if not _refused(exc):       # a refusal leaves the connection fine
                self._reset()
            return False
        if self.part.wait_replicas and value["replicas"] < self.part.wait_replicas:
            # applied on the primary, not confirmed by the replicas: a failover may lose it
            env.op("info", "publish", **ev.op_fields(), stream=ev.stream, entry_id=entry_id,
                   value={**value, "error": "WAIT: not confirmed by the replicas"})
            return True
        env.op("ok", "publish", **ev.op_fields(), stream=ev.stream, entry_id=entry_id, value=value)
        return True

    def publish_batch(self, batch: list[tuple[Event, int]]) -> list[bool]:
        """Publish (event, attempt) pairs in one pipeline; True per event that went through."""
        if len(batch) == 1:
            return [self.publish(*batch[0])]
        history, line = self.env.history, self.env.history.line
        self.sent_ms = _now_ms(self.env)
        # each event's fields serialised once for its invoke and its outcome (HistoryWriter.line)
        bodies = [json_fields({**ev.op_fields(), "stream": ev.stream}) for ev, _ in batch]
        history.lines([line("invoke", "publish", body + _attempt(attempt))
                       for body, (_, attempt) in zip(bodies, batch)])
        fields = self.fields
        commands = [("XADD", ev.stream, "*", *[item for pair in fields(ev).items() for item in pair])
                    for ev, _ in batch]
        try:
            replies = exchange(self.r, commands, raise_on_error=False)
        except LINK_ERRORS as exc:
            kind = "fail" if _sent_nothing(exc) else "info"
            error = f"{type(exc).__name__}: {exc}"
            history.ops([history.make(kind, "publish", **ev.op_fields(), stream=ev.stream,
                                      value={"attempt": attempt, "error": error}) for ev, attempt in batch])
            self._reset()
            return [False] * len(batch)
        lines, outcome = [], []
        for body, (ev, attempt), reply in zip(bodies, batch, replies, strict=True):
            if isinstance(reply, Exception):  # Redis refused this XADD (e.g. OOM): it did not run
                lines.append(line("fail", "publish", body + json_fields(
                    {"value": {"attempt": attempt, "error": f"{type(reply).__name__}: {reply}"}})))
                outcome.append(False)
            else:
                lines.append(line("ok", "publish", body + json_fields({"entry_id": reply}) + _attempt(attempt)))
                outcome.append(True)
        history.lines(lines)
        return outcome

    def batchable(self, ev: Event) -> bool:
        """Whether `ev` may share a pipeline (see the module doc)."""
        return not (ev.barrier or self.part.wait_replicas or "before_publish" in self.env.failpoints.armed)

    def connect(self) -> None:
        """Open the connection before the schedule starts, so a reply-only blip armed for the first
        XADD does not eat the handshake; a link already broken here is the first XADD's problem."""
        try:
            self.r.ping()
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            self.env.op("info", "log", value={"connect": "failed", "error": f"{type(exc).__name__}: {exc}"})
            self._reset()

    def _reset(self) -> None:
        try:
            self.r.connection_pool.disconnect()
        except Exception:  # noqa: BLE001 - the link is broken already
            pass

    def wait_barrier(self, barrier: str) -> None:
        """Block until every stream in `barrier` has nothing undelivered and nothing pending."""
        if not barrier or barrier in self.barriers_passed:
            return
        env = self.env
        env.op("info", "log", value={"barrier": barrier, "phase": "wait"})
        streams = barrier.split(",")
        while not env.stopping:
            try:
                if all(_drained(self.r, s) for s in streams):
                    break
            except (redis.ConnectionError, redis.TimeoutError):
                self._reset()
            env.sleep_ms(10)
        env.op("info", "log", value={"barrier": barrier, "phase": "passed"})
        self.barriers_passed.add(barrier)


def _drained(r: redis.Redis, stream: str) -> bool:
    groups = {g["name"]: g for g in r.xinfo_groups(stream)}
    group = groups.get(GROUP)
    if group is None:
        return r.xlen(stream) == 0
    if group["pending"]:
        return False
    last = r.xrevrange(stream, count=1)
    return not last or last[0][0] == group["last-delivered-id"]


class Due:
    """What the producer sends next, in due order: its plan's events, read from the plan as they
    come due (planfile.schedule: in schedule order, so the next one read is the first of those
    left), and the retries of failed publishes. The heap holds the next planned event and the
    retries waiting, not the plan (10^6 events: ~560 MB of rows, events and heap entries held
    whole). The order is that of a heap of the whole plan: (due, seq), planned events numbered
    in schedule order before every retry, retries in the order they were made."""

    def __init__(self, plan: Iterator[Event]) -> None:
        self.plan = plan
        # (due offset ms, seq, attempt, first ms, event); first: a planned event's planned time until its
        # first attempt is made, then when that attempt was made (main: retries count from it)
        self.queue: list[tuple[float, int, int, float, Event]] = []
        self.planned = 0              # planned events read (the seq of the next one)
        self.retries = RETRY_SEQ      # the seq of the last retry
        self._read_next()

    def _read_next(self) -> None:
        ev = next(self.plan, None)
        if ev is not None:
            heapq.heappush(self.queue, (ev.at_ms, self.planned, 1, ev.at_ms, ev))
            self.planned += 1

    def __bool__(self) -> bool:
        return bool(self.queue)

    def peek(self) -> tuple[float, Event]:
        """(due, event) of the next one, left in place."""
        head = self.queue[0]
        return head[0], head[4]

    def pop(self) -> tuple[float, int, float, Event]:
        """(due, attempt, first ms, event) of the next one."""
        due, seq, attempt, first, ev = heapq.heappop(self.queue)
        if seq < RETRY_SEQ:
            self._read_next()
        return due, attempt, first, ev

    def retry(self, due: float, attempt: int, first: float, ev: Event) -> None:
        self.retries += 1
        heapq.heappush(self.queue, (due, self.retries, attempt, first, ev))


RETRY_SEQ = 1 << 62   # retries' seqs start past any plan's


def main(env: WorkerEnv) -> int:
    part = build(PRODUCERS, env.spec["producer"])
    publisher = Publisher(env, part)
    queue = Due(planfile.schedule(env.spec))   # (its file opened and first chunk read before t0)
    publisher.connect()
    env.await_start()
    delays = part.retry_delays_ms()
    while queue and not env.stopping:
        batch = [queue.pop()]
        due, attempt, first, ev = batch[0]
        env.sleep_until(due)
        if publisher.batchable(ev):
            now_ms = _now_ms(env)
            while queue and len(batch) < BATCH and queue.peek()[0] <= now_ms and publisher.batchable(queue.peek()[1]):
                batch.append(queue.pop())
        else:
            publisher.wait_barrier(ev.barrier)
        outcome = publisher.publish_batch([(ev, attempt) for _, attempt, _, ev in batch])
        for (_, attempt, first, ev), ok in zip(batch, outcome, strict=True):
            if not ok and attempt <= len(delays):
                if attempt == 1:   # retries count from the first attempt as made, not as planned
                    first = publisher.sent_ms
                queue.retry(first + delays[attempt - 1], attempt + 1, first, ev)
    env.op("info", "log", value={"producer": "done", "at": time.monotonic()})
    return 0
