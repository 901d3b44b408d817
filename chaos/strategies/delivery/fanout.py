"""`fanout(n)` (S3): one reader, an in-memory queue per key bucket, a worker process per bucket.

The reader R1 is the group's only consumer; it hands each entry to worker
W(crc32(key) % n + 1) over a pipe, and XACKs an entry only after its worker finished it,
so a killed reader leaves everything unfinished in its PEL. Workers are child processes
of the reader (they die with it) and have their own links.
"""
from __future__ import annotations

from typing import Any

from chaos.strategies.delivery.base import COMMON, STREAM, Delivery
from chaos.params import Param, extend
from chaos.strategies.plan import CONSUMER, ProcessPlan


class Fanout(Delivery):
    name = "fanout"
    summary = "one reader, a worker process per key bucket, ack after the worker finished (S3)"
    params = extend(COMMON,
                    Param("workers", 4, "worker processes (key buckets)", minimum=1),
                    Param("count", 50, "COUNT per XREADGROUP of the reader", minimum=1))
    prefetches = True

    def plans(self, job: dict[str, Any]) -> list[ProcessPlan]:
        spec = self.consumer_spec("R1", [STREAM], job)
        workers = [f"W{i}" for i in range(1, self.workers + 1)]
        spec["workers"] = workers
        return [ProcessPlan("R1", "reader", CONSUMER, spec, helpers=workers, ready_blocked=1)]
