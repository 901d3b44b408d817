"""Producer parts: how events reach the stream (the log side of ordering).

* `retrying` (the default): async retry with backoff. Retry k runs 500*2^(k-1) ms after
  the first attempt as made, not as planned (attempts at 0, 500, 1000 ms from it, however late
  a loaded machine made it), while later events keep going out: this is what lets `paid`
  overtake a `created` whose publish failed.
* `direct`: one attempt; a failed publish stays failed.

Both optionally `WAIT` for replicas after each XADD (the history records the answer).
An outbox producer is another Producer subclass with its own plans.
"""
from __future__ import annotations

from collections import defaultdict
from typing import ClassVar

from chaos import extensions
from chaos.params import Param
from chaos.strategies.part import Part
from chaos.strategies.plan import PRODUCER, PlanRows, ProcessPlan
from chaos.events import Event

_COMMON = (
    Param("timeout_ms", 250.0, "socket timeout of one publish (connect and reply)", minimum=1),
    Param("wait_replicas", 0, "after each XADD, WAIT for this many replicas (0 = no WAIT)", minimum=0),
    Param("wait_ms", 100.0, "WAIT timeout", minimum=0),
)


class Producer(Part):
    slot: ClassVar[str] = "producer"
    # The producer process XADDs itself (read by the expectation areas; an outbox producer's
    # dispatchers publish instead).
    writes_stream: ClassVar[bool] = True

    def retry_delays_ms(self) -> list[float]:
        """Delays after the first attempt at which retries run (unscaled)."""
        return []

    def drained(self, conn: object) -> bool:
        """Whether the producer side has nothing left to send (an outbox: no unpublished row)."""
        return True

    def plans(self, events: list[Event]) -> list[ProcessPlan]:
        """One producer process per `Event.producer`, publishing its events in schedule order."""
        by_producer: dict[str, list[Event]] = defaultdict(list)
        for ev in events:
            by_producer[ev.producer].append(ev)
        return [ProcessPlan(name, "producer", PRODUCER,
                            {"producer": self.to_spec(), "events": PlanRows(evs)}, gated=True)
                for name, evs in sorted(by_producer.items())]


class Retrying(Producer):
    name = "retrying"
    summary = "async retry with backoff: retry k at backoff_ms*2^(k-1) after the first attempt"
    params = (*_COMMON,
              Param("retries", 2, "retries after the first attempt", minimum=0),
              Param("backoff_ms", 500.0, "delay of the first retry", minimum=0))

    def retry_delays_ms(self) -> list[float]:
        return [self.backoff_ms * 2 ** (k - 1) for k in range(1, self.retries + 1)]


class Direct(Producer):
    name = "direct"
    summary = "one attempt per event, no retry"
    params = _COMMON


PRODUCERS: dict[str, type[Producer]] = {
    "retrying": Retrying,
    "direct": Direct,
}
extensions.attach("producers", PRODUCERS)
