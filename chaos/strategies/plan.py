"""What the orchestrator starts: one ProcessPlan per worker process of a run.

Parts (producer, delivery) turn a strategy into plans; the orchestrator only spawns,
links and watches them, so a new process shape (an outbox dispatcher) is a new role in
chaos.workload.worker plus a part that emits its plans.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
