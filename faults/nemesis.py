"""nemesis: a seeded random schedule of window faults for a time bound (Jepsen's nemesis
generator). The schedule is a pure function of the run's rng, so a seed replays it."""
from __future__ import annotations

import time
from dataclasses import dataclass
from random import Random
from typing import Any

from chaos.errors import BadArguments
from chaos.params import Param
from faults.helpers import raise_if
from faults.effects import WINDOW_HIT
from faults.interface import Fault, FaultContext

KINDS = ("latency", "partition", "pause")


@dataclass(frozen=True)
class Step:
    """One fault of the schedule: when it starts (ms into the workload) and its spec."""

    at_ms: int
    spec: str


def draw(rng: Random, kind: str, window_ms: int, role: str = "consumer") -> str:
    """One fault spec of ``kind`` with parameters drawn from ``rng``, aimed at ``role``'s links."""
    if kind == "latency":
        link = rng.choice(("redis", "postgres"))
        return (f"latency:link={link},target={role},latency_ms={rng.randrange(20, 201)},"
                f"jitter_ms={rng.randrange(0, 21)},duration_ms={window_ms}")
    if kind == "partition":
        link = rng.choice(("redis", "postgres"))
        return f"partition:link={link},target={role},mode={rng.choice(('down', 'timeout'))},duration_ms={window_ms}"
    if kind == "pause":
        return f"pause:role={role},at_ms=0,duration_ms={window_ms}"
    raise BadArguments(f"nemesis cannot schedule {kind!r}; it schedules {', '.join(KINDS)}")


def schedule(rng: Random, kinds: list[str], duration_ms: int, interval_ms: int, window_ms: int,
             role: str = "consumer") -> list[Step]:
    """Non-overlapping faults with exponential gaps (mean ``interval_ms``) until ``duration_ms``."""
    steps: list[Step] = []
    t = 0.0
    while True:
        t += rng.expovariate(1.0 / interval_ms) if interval_ms > 0 else 0.0
        if t + window_ms > duration_ms:
            return steps
        steps.append(Step(int(t), draw(rng, rng.choice(kinds), window_ms, role)))
        t = int(t) + window_ms


class Nemesis(Fault):
    name = "nemesis"
    effect = WINDOW_HIT
    description = "a seeded random schedule of latency/partition/pause windows for a time bound"
    params = (
        Param("faults", KINDS, "the kinds to draw from, joined by /", choices=KINDS),
        Param("duration_ms", 5000, "the time bound of the schedule"),
        Param("interval_ms", 800, "mean gap between two faults (exponential)"),
        Param("window_ms", 300, "how long each fault lasts"),
        Param("role", "consumer", "whose links and processes the faults hit"),
    )

    def validate(self) -> None:
        kinds = list(self.faults)      # a list parameter: items checked against KINDS by chaos.params
        if not kinds:
            raise BadArguments(f"fault 'nemesis': faults is empty: give kinds from "
                               f"{', '.join(KINDS)} joined by /, e.g. faults=latency/pause")
        if self.window_ms <= 0:
            raise BadArguments("fault 'nemesis': window_ms must be > 0")
        self.kinds = kinds

    def plan(self, rng: Random) -> list[Step]:
        return schedule(rng, self.kinds, self.duration_ms, self.interval_ms, self.window_ms, self.role)

    def run(self, ctx: FaultContext) -> None:
        from faults.registry import get_fault

        steps = self.plan(ctx.rng)
        ctx.record("start", name=self.name, spec=self.spec, schedule=[s.__dict__ for s in steps])
        t0 = time.monotonic()
        self.current: Any = None
        for step in steps:
            if ctx.stop_event.is_set():
                break
            wait = ctx.scale(step.at_ms) - (time.monotonic() - t0)
            if wait > 0:
                time.sleep(wait)
            self.current = get_fault(step.spec)
            self.current.arm(ctx)
            try:
                self.current.run(ctx)
            finally:
                self.current.heal(ctx)
                self.current = None
        ctx.record("stop", name=self.name, steps=len(steps))

    def heal(self, ctx: FaultContext) -> None:
        current = getattr(self, "current", None)
        if current is not None:
            try:
                current.heal(ctx)
            except Exception as exc:  # noqa: BLE001
                raise_if([str(exc)], self.name)
