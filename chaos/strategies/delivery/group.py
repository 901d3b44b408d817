"""`group(n)`: one stream, one consumer group, n consumers (the baseline); `single` is n = 1.

Parallel consumers of one group lose per-key order by construction: two events of one
key go to two consumers and the faster one writes first.
"""
from __future__ import annotations

from typing import Any

from chaos.strategies.delivery.base import COMMON, STREAM, Delivery
from chaos.params import Param
from chaos.strategies.plan import ProcessPlan


class Group(Delivery):
    name = "group"
    summary = "1 stream, 1 group, n consumers"
    params = (*COMMON, Param("consumers", 2, "consumers in the group", minimum=1))

    def plans(self, job: dict[str, Any]) -> list[ProcessPlan]:
        return [self.consumer_plan(f"C{i}", [STREAM], job) for i in range(1, self.consumers + 1)]


class Single(Group):
    name = "single"
    summary = "1 stream, 1 group, 1 consumer (S1)"
    params = (*COMMON, Param("consumers", 1, "consumers in the group (1 for S1)", minimum=1, maximum=1))
