"""`noop`: no effect at all (the job's cost only); for harness benchmarks, not for correctness cells."""
from __future__ import annotations

from typing import Callable

from chaos.strategies.guards.base import APPLIED, Guard, Outcome
from chaos.events import Event


class Noop(Guard):
    name = "noop"
    summary = "no effect write: measures the harness itself (bench/harness_bench.py)"
    params = ()

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        work()
        return Outcome(1, APPLIED, {"status": ev.etype, "projection": False})  # the checker skips its counter
