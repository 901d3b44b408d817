"""The delivery part's contract: streams, the router, and the consumer-side processes.

A delivery decides which stream each event goes to (`route`) and which processes read
them (`plans`). Every delivery shares the read knobs below: COUNT per XREADGROUP, BLOCK,
the XAUTOCLAIM min-idle time and when claiming runs (only in the drain, or all along),
and whether a killed consumer is restarted under its consumer name (it then reads its
own PEL first: `via: pending`).
"""
from __future__ import annotations

from typing import Any, ClassVar

from chaos.params import Param
from chaos.strategies.part import Part
from chaos.strategies.plan import CONSUMER, ProcessPlan
from chaos.events import Event

GROUP = "g"
NOGROUP_POLICIES = ("fail", "recreate-from-0", "recreate-from-$")
STREAM = "orders"

COMMON = (
    Param("count", 1, "COUNT per XREADGROUP (prefetch)", minimum=1),
    Param("block_ms", 100.0, "BLOCK of XREADGROUP", minimum=1),
    Param("claim_idle_ms", 2000.0, "XAUTOCLAIM min-idle time (above the longest job)", minimum=1),
    Param("claim", "drain", "when consumers run XAUTOCLAIM", choices=("drain", "always", "never")),
    Param("respawn", False, "restart a killed consumer under its consumer name"),
    Param("respawn_ms", 0.0, "delay before the restart", minimum=0),
    Param("on_nogroup", "fail", "what a consumer does when its group is gone (NOGROUP: the stream evicted, "
          "Redis restarted empty): recreate it from 0 (recommended: reads what was published since), "
          "from $ (skips it), or exit", choices=NOGROUP_POLICIES),
    Param("nogroup_backoff_ms", 200.0, "how long a consumer backs off after NOGROUP before it recreates "
          "the group (a client's retry delay)", minimum=0),
)


class Delivery(Part):
    slot: ClassVar[str] = "delivery"
    # A single reader pulls every entry into memory as soon as it is added (read by the
    # expectation areas: under a failover such a delivery has read everything it held).
    prefetches: ClassVar[bool] = False

    def streams(self) -> list[str]:
        """Every stream the run creates a group on."""
        return [STREAM]

    def route(self, events: list[Event]) -> list[Event]:
        """The events with `stream` (and a drain `barrier` where needed) filled in: here in place,
        each event replaced by its routed copy as it goes, so that planning does not hold every
        event twice (10^6 events: ~115 MB more at the orchestrator's peak)."""
        for index, ev in enumerate(events):
            events[index] = ev.routed(STREAM)
        return events

    def plans(self, job: dict[str, Any]) -> list[ProcessPlan]:
        raise NotImplementedError

    def consumer_spec(self, consumer: str, streams: list[str], job: dict[str, Any]) -> dict[str, Any]:
        """The spec of one group consumer; `job` carries the guard and ack policy specs."""
        return {"consumer": consumer, "streams": streams, "group": GROUP, "count": self.count,
                "block_ms": self.block_ms, "claim_idle_ms": self.claim_idle_ms, "claim": self.claim,
                "on_nogroup": self.on_nogroup, "nogroup_backoff_ms": self.nogroup_backoff_ms, **job}

    def consumer_plan(self, name: str, streams: list[str], job: dict[str, Any]) -> ProcessPlan:
        return ProcessPlan(name, "consumer", CONSUMER, self.consumer_spec(name, streams, job),
                           ready_blocked=1)
