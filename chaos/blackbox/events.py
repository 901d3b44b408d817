"""The events a black-box run publishes: the framework's event model (chaos.events).

``keys`` orders, each with one event per etype (business versions 1..n in order),
keys interleaved by the run's seed so per-key order is kept but keys race each other.
"""
from __future__ import annotations

import random

from chaos.blackbox.config import WorkloadSpec
from chaos.events import Event


def intended_events(spec: WorkloadSpec, rng: random.Random) -> list[Event]:
    """The run's events in publish order."""
    next_version = {str(spec.first_key + k): 1 for k in range(spec.keys)}
    out: list[Event] = []
    while next_version:
        key = rng.choice(list(next_version))
        version = next_version[key]
        out.append(Event(f"e{key}-{version}", key, spec.etypes[version - 1], version, at_ms=len(out) * spec.gap_ms))
        if version == len(spec.etypes):
            del next_version[key]
        else:
            next_version[key] = version + 1
    return out


def poison_events(spec: WorkloadSpec, count: int, events: list[Event]) -> list[Event]:
    """``count`` poison events (the config's [poison] payload, fault ``poison:source=config``)
    on keys of their own past the workload's, published in its middle: the events after them
    show whether the consumer went on. They are no part of the checker's workload."""
    middle = events[len(events) // 2].at_ms if events else 0.0
    return [Event(f"poison-{n + 1}", str(spec.first_key + spec.keys + n), spec.etypes[0], 1, at_ms=middle,
                  poison=True) for n in range(count)]
