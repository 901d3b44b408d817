"""`sharded(n)` (S2): n streams, event -> stream crc32(key) % n, one consumer per stream.

A key always lands on one stream read by one consumer, so per-key order holds, while
keys spread over n consumers. Resharding while events flow breaks that: with
`reshard_to=m`, events from `reshard_after` on go to the m-stream layout, read by m new
consumers, while the old streams may still hold older events of the same keys.
`reshard_mode=drain` makes the producer wait until the old streams are fully acked before
the first event of the new layout (drain-then-switch), which keeps order.
"""
from __future__ import annotations

import zlib
from typing import Any

from chaos.errors import BadArguments
from chaos.strategies.delivery.base import COMMON, STREAM, Delivery
from chaos.params import Param
from chaos.strategies.plan import ProcessPlan
from chaos.events import Event


def shard_of(key: str, shards: int) -> int:
    """Stable across processes and runs (Python's hash() is salted per process)."""
    return zlib.crc32(key.encode()) % shards


def shard_stream(shards: int, index: int) -> str:
    return f"{STREAM}.{shards}.{index}"


class Sharded(Delivery):
    name = "sharded"
    summary = "n streams by crc32(key) % n, a consumer per stream (S2)"
    params = (*COMMON,
              Param("shards", 4, "streams (and consumers)", minimum=1),
              Param("reshard_to", 0, "switch to this many streams while events flow (0 = never)", minimum=0),
              Param("reshard_after", 0, "events published before the switch", minimum=0),
              Param("reshard_mode", "naive", "naive switch, or drain the old streams first",
                    choices=("naive", "drain")))

    def validate(self) -> None:
        if self.reshard_to and self.reshard_to == self.shards:
            raise BadArguments(f"delivery sharded: reshard_to={self.reshard_to} equals shards; "
                               "pick another shard count or drop reshard_to")

    def layouts(self) -> list[int]:
        return [self.shards] + ([self.reshard_to] if self.reshard_to else [])

    def streams(self) -> list[str]:
        return [shard_stream(n, i) for n in self.layouts() for i in range(n)]

    def route(self, events: list[Event]) -> list[Event]:
        shards, reshard_to, reshard_after = self.shards, self.reshard_to, self.reshard_after
        old = ",".join(shard_stream(shards, i) for i in range(shards))
        drain = self.reshard_mode == "drain"
        stream_of: dict[tuple[int, str], str] = {}   # (layout, key) -> stream: crc32 once per key
        out = []
        for index, ev in enumerate(events):
            switched = bool(reshard_to) and index >= reshard_after
            n = reshard_to if switched else shards
            stream = stream_of.get((n, ev.key))
            if stream is None:
                stream = stream_of[n, ev.key] = shard_stream(n, shard_of(ev.key, n))
            out.append(ev.routed(stream, old if switched and drain else ""))
        return out

    def plans(self, job: dict[str, Any]) -> list[ProcessPlan]:
        plans, number = [], 0
        for n in self.layouts():
            for i in range(n):
                number += 1
                plans.append(self.consumer_plan(f"C{number}", [shard_stream(n, i)], job))
        return plans
