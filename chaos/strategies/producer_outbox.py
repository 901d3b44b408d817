"""Producer parts `outbox-naive` and `outbox-per-key`: the service writes an outbox, dispatchers relay it.

Instead of XADDing, the service process (role `outbox-producer`) writes its business
row and the event's outbox row in one transaction (chaos.workload.outbox), and
`dispatchers` relay processes (role `dispatcher`, chaos.workload.dispatcher) move
committed rows to the stream. The two parts differ only in the relay discipline:

* `outbox-naive`: ORDER BY id, a failed row is skipped (its key's later rows overtake it);
  N of them claim rows with FOR UPDATE SKIP LOCKED and race within a key.
* `outbox-per-key`: a failed row blocks only its key; N of them share keys through
  per-key advisory locks, so per-key order holds.

`fail_event` makes that event's first `fail_attempts` publishes fail (the reference:
#42's `created` fails while the rest goes through); `stall_event` makes the dispatcher
holding that event's row wait `stall_ms` before its XADD (a GC pause: with parallel
naive dispatchers, the key's later rows go out meanwhile); `rollback` names events whose
service transaction rolls back after writing both rows (neither row may exist).
A dispatcher killed by a fault is restarted (`respawn`), as a supervisor would.
"""
from __future__ import annotations

from collections import defaultdict
from typing import ClassVar

from chaos.errors import BadArguments
from chaos.params import Param
from chaos.strategies.plan import PRODUCER, PlanRows, ProcessPlan
from chaos.strategies.producers import Producer
from chaos.events import Event
from chaos.strategies.outbox_relay import DISPATCHER_ROLE, WRITER_ROLE, DispatcherConfig, has_schema, unpublished_count

DISPATCHER_KIND = "dispatcher"   # neither PRODUCER (exits when done) nor CONSUMER (reads a group)
MAX_DISPATCHERS = 16


def dispatcher_name(n: int) -> str:
    return f"dispatcher-{n}"


class OutboxProducer(Producer):
    """Common to both outbox parts; `mode` is the dispatcher's relay discipline."""

    mode: ClassVar[str] = ""
    writes_stream = False
    params = (
        Param("dispatchers", 1, "dispatcher processes relaying in parallel", minimum=1, maximum=MAX_DISPATCHERS),
        Param("poll_ms", 100.0, "pause between two dispatcher rounds", minimum=1),
        Param("timeout_ms", 2000.0, "socket timeout of one XADD (a timeout is an unknown outcome: "
              "the row is relayed again, a duplicate if Redis had it)", minimum=1),
        Param("fail_event", "", "event_id whose publish fails its first fail_attempts tries ('' = none)"),
        Param("fail_attempts", 2, "how many publishes of fail_event fail", minimum=0),
        Param("stall_event", "", "event_id whose dispatcher waits stall_ms before its XADD, holding "
              "its locks ('' = none)"),
        Param("stall_ms", 3000.0, "how long that dispatcher stalls (long enough for the service to "
              "write the key's later events even on a loaded machine: 1 s was not, at load 16)", minimum=0),
        Param("stall_until_later", 0, "the stall also ends as soon as this many later rows of the stalled row's "
              "key are published (by the other dispatchers): stall_ms is then a cap, the order forced, "
              "not timed (0: it lasts stall_ms)", minimum=0),
        Param("stall_until_written", 0, "the stall also ends as soon as this many later rows of the stalled row's "
              "key are written to the outbox and the other dispatchers (if any) have published every other key's "
              "row written so far: where nobody may overtake, the chance to was there (0: it lasts stall_ms)",
              minimum=0),
        Param("rollback", (), "event_ids (joined by '/') whose service transaction rolls back"),
        Param("respawn", True, "restart a dispatcher a fault killed (its failpoints off)"),
        Param("respawn_ms", 0.0, "delay before that restart", minimum=0),
    )

    def validate(self) -> None:
        if self.fail_event and self.fail_event in self.rolled_back():
            raise BadArguments(f"producer {self.name}: fail_event={self.fail_event} is also rolled back, "
                               "so it never reaches a dispatcher; pick another event")

    def rolled_back(self) -> list[str]:
        return list(self.rollback)

    def config(self) -> DispatcherConfig:
        fail = {"event_id": self.fail_event, "attempts": self.fail_attempts} if self.fail_event else None
        stall = {"event_id": self.stall_event, "ms": self.stall_ms} if self.stall_event else None
        if stall and self.stall_until_later:
            stall["until_later"] = self.stall_until_later
        if stall and self.stall_until_written:
            stall.update(until_written=self.stall_until_written, others=self.dispatchers - 1)
        return DispatcherConfig(mode=self.mode, poll_ms=self.poll_ms, timeout_ms=self.timeout_ms,
                                fail=fail, stall=stall)

    def check_events(self, events: list[Event]) -> None:
        """Every event the parameters name must be in the workload (else they would do nothing)."""
        known = {e.event_id for e in events}
        named = {"rollback": self.rolled_back(), "fail_event": [self.fail_event] if self.fail_event else [],
                 "stall_event": [self.stall_event] if self.stall_event else []}
        for param, ids in named.items():
            missing = sorted(set(ids) - known)
            if missing:
                raise BadArguments(f"producer {self.name}: {param} names {', '.join(missing)}, which the workload "
                                   f"does not have (its events: {', '.join(sorted(known)[:6])}, ...)")

    def drained(self, conn: object) -> bool:
        """No committed row is waiting for a dispatcher."""
        return not has_schema(conn) or unpublished_count(conn) == 0

    def plans(self, events: list[Event]) -> list[ProcessPlan]:
        """One service process per `Event.producer` writing its outbox, plus the dispatchers."""
        by_service: dict[str, list[Event]] = defaultdict(list)
        for ev in events:
            by_service[ev.producer].append(ev)
        self.check_events(events)
        services = [ProcessPlan(name, WRITER_ROLE, PRODUCER,
                                {"events": PlanRows(evs), "rollback": self.rolled_back()})
                    for name, evs in sorted(by_service.items())]
        config = self.config().__dict__
        relays = [ProcessPlan(dispatcher_name(n), DISPATCHER_ROLE, DISPATCHER_KIND, {"dispatcher": dict(config)},
                              respawn=self.respawn, respawn_ms=self.respawn_ms)
                  for n in range(1, self.dispatchers + 1)]
        return services + relays


class OutboxNaive(OutboxProducer):
    name = "outbox-naive"
    summary = "transactional outbox, naive dispatcher: ORDER BY id, a failed row is skipped"
    mode = "naive"


class OutboxPerKey(OutboxProducer):
    name = "outbox-per-key"
    summary = "transactional outbox, per-key dispatcher: a failed row blocks only its key (advisory lock per key)"
    mode = "per-key"


# Registered by chaos.strategies.presets next to PRODUCERS (importing them from producers.py
# would be circular: these parts subclass its Producer).
OUTBOX_PRODUCERS: dict[str, type[Producer]] = {p.name: p for p in (OutboxNaive, OutboxPerKey)}
