"""What the orchestrator starts: one ProcessPlan per worker process of a run.

Parts (producer, delivery) turn a strategy into plans; the orchestrator only spawns,
links and watches them, so a new process shape (an outbox dispatcher) is a new role in
chaos.workload.worker plus a part that emits its plans.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from operator import attrgetter
from typing import Any

from chaos.events import Event

PRODUCER, CONSUMER = "producer", "consumer"


@dataclass
class ProcessPlan:
    """One worker process: its label, its role's entry point and its role-specific spec."""

    name: str                   # history process name and proxy prefix ("C1", "P-order", "R1")
    role: str                   # key of chaos.workload.worker.ROLES
    kind: str                   # PRODUCER (publishes, then exits) or CONSUMER (runs until stopped)
    spec: dict[str, Any] = field(default_factory=dict)
    helpers: list[str] = field(default_factory=list)   # child processes it forks that need links (W1..)
    ready_blocked: int = 0      # XREADGROUP calls it has blocked in once it is ready (0 = do not wait)
    respawn: bool = False       # restart it (same plan, failpoints off) when a fault killed it
    respawn_ms: float = 0.0     # after this delay (scaled)
    gated: bool = False         # it calls env.await_start(): started early, released at t0 (SIGUSR2)


class PlanRows:
    """A producer plan's events as rows (`Event.to_row`), made one at a time as they are read, in
    schedule order (`at_ms`, then the plan's own order). The plan holds its events (held by the
    orchestrator anyway until the arm), not a row beside each (a 10-tuple, ~140 B: 10^6 events,
    ~140 MB); the arm writes them to a file a chunk at a time (chaos/workload/planfile.py `spill`).
    Not JSON: a spec holding one is spilled (or made a list) before the worker is spawned."""

    __slots__ = ("events",)

    def __init__(self, events: list[Event]) -> None:
        in_order = all(a.at_ms <= b.at_ms for a, b in pairwise(events))   # (no sorted copy if so)
        self.events = events if in_order else sorted(events, key=_AT_MS)

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[tuple]:
        return map(Event.to_row, self.events)


_AT_MS = attrgetter("at_ms")
