"""Deliberately broken producer, delivery and outbox relay parts (see chaos/mutants/guards.py).

The relay's defect lives in a worker role (`mutant-relay-mark-first`, registered like the
parts), which the broken outbox producer's dispatcher plans name instead of `dispatcher`."""
from __future__ import annotations

import random
from typing import Any

from chaos.events import Event
from chaos.strategies.delivery.group import Group, Single
from chaos.strategies.delivery.sharded import Sharded, shard_stream
from chaos.strategies.outbox_relay import DISPATCHER_ROLE, OUTBOX_TABLE, DispatcherConfig
from chaos.strategies.plan import ProcessPlan
from chaos.strategies.producer_outbox import OutboxPerKey
from chaos.strategies.producers import Retrying

RELAY_ROLE = "mutant-relay-mark-first"


class RetryingNeverRetries(Retrying):
    """The retrying producer whose retry schedule came out empty: a failed publish stays failed."""

    name = "mutant-retrying-never-retries"
    summary = "retrying producer that never retries"

    def retry_delays_ms(self) -> list[float]:
        return []   # the defect


class GroupNeverClaims(Group):
    """Group consumers that never run XAUTOCLAIM: a stalled or dead consumer's entries stay put."""

    name = "mutant-group-never-claims"
    summary = "group consumers that never claim"

    def consumer_spec(self, consumer: str, streams: list[str], job: dict[str, Any]) -> dict[str, Any]:
        return {**super().consumer_spec(consumer, streams, job), "claim": "never"}   # the defect


class SingleNeverClaims(Single):
    """The single consumer that never claims (S1's shape of the same defect)."""

    name = "mutant-single-never-claims"
    summary = "a single consumer that never claims"

    def consumer_spec(self, consumer: str, streams: list[str], job: dict[str, Any]) -> dict[str, Any]:
        return {**super().consumer_spec(consumer, streams, job), "claim": "never"}   # the defect


class ShardedByRandomShard(Sharded):
    """S2 routing each event to a random shard instead of crc32(key) % n: a key spans streams."""

    name = "mutant-sharded-random-shard"
    summary = "S2 routing by a random shard"

    def route(self, events: list[Event]) -> list[Event]:
        rng = random.Random(f"{self.shards}:{len(events)}")
        return [ev.routed(shard_stream(self.shards, rng.randrange(self.shards))) for ev in events]   # the defect


class OutboxMarksBeforeXadd(OutboxPerKey):
    """The per-key outbox whose relay marks a row sent before its XADD (role RELAY_ROLE)."""

    name = "mutant-outbox-marks-before-xadd"
    summary = "outbox relay that marks sent before the XADD"

    def plans(self, events: list[Event]) -> list[ProcessPlan]:
        plans = super().plans(events)
        for plan in plans:
            if plan.role == DISPATCHER_ROLE:
                plan.role = RELAY_ROLE
        return plans


def relay_main(env: Any) -> int:
    """Worker role RELAY_ROLE: the per-key dispatcher with the mark moved before the XADD."""
    from chaos.workload.dispatcher import Dispatcher

    class MarkFirst(Dispatcher):
        def relay(self, row: Any) -> bool:
            self.env.pg().execute(f"UPDATE {OUTBOX_TABLE} SET published_at = clock_timestamp() WHERE id = %s",
                                  (row.id,))   # the defect: a failed XADD after it is never retried
            return super().relay(row)

    MarkFirst(env, DispatcherConfig(**env.spec.get("dispatcher", {}))).run()
    return 0
