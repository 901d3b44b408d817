"""Event plans, the parts of the `workload` slot: which events are published, by which
producer process, when, at what cost. (The worker processes that run them are chaos/workload/.)

* `pair`: the reference's order #42, `created` v=1 costing 800 ms then `paid` v=2
  costing 50 ms; with `payment_service` the `paid` event comes from a second producer
  process on its own link (the publish-blip model: order service and payment service).
* `many-orders`: K orders with E events each (E up to 1,000: statuses past the five named
  ones are numbered), per-key order kept, keys interleaved by seed.
* `bulk`: N independent jobs (one key each), optional poison every k-th job.

A workload too large for this machine is refused when it is configured (`fits`), before
any server or process starts, with the memory and disk it would need.

A new workload is one class here plus one line in WORKLOADS.
"""
from __future__ import annotations

import os
import random
from typing import ClassVar

from chaos.errors import BadArguments
from chaos.params import Param
from chaos.strategies.part import Part
from chaos.events import Event

ETYPES = ("created", "paid", "shipped", "delivered", "closed")
MAX_EVENTS_PER_KEY = 1000
# What one published event costs a run (bench/load_bench.py): history lines on disk (publish
# invoke/ok, deliver, apply invoke/ok, ack: about 1 KB) and peak memory of all processes
# together. At 10^6 events (growth run, docs/performance.md) the orchestrator with its checker
# peaked at about 1.4 KB per event, the fork server 0.8 KB, the servers and proxy 0.3 KB: 8 KB
# leaves room for the workers and other workloads' shapes (it was 18 KB when the orchestrator
# kept every op: 10^6 events were then refused on a 24 GB machine with 20.7 GB available).
DISK_BYTES_PER_EVENT = 1_200
MEMORY_BYTES_PER_EVENT = 8_000


def etype_of(version: int) -> str:
    """The status an order's `version`-th event sets: the named ones, then `step-6`, `step-7`..."""
    return ETYPES[version - 1] if version <= len(ETYPES) else f"step-{version}"


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _history_base() -> str:
    """Where run dirs (and so histories) go: the cluster base (chaos/cluster/rundirs.py)."""
    from chaos.cluster.rundirs import _default_base
    return os.environ.get("CHAOS_CLUSTER_BASE") or _default_base()


def _free_disk(path: str) -> int | None:
    while path and not os.path.isdir(path):
        path = os.path.dirname(path)
    try:
        stat = os.statvfs(path or "/")
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


class Workload(Part):
    """Makes the run's intended events (before routing)."""

    slot: ClassVar[str] = "workload"

    def make_events(self, rng: random.Random) -> list[Event]:
        raise NotImplementedError

    def ordered_keys(self) -> bool:
        """Whether a key has several versions whose order matters (bulk jobs: one version per key)."""
        return True

    def event_count(self) -> int:
        """How many events (resends included) make_events will return, without making them."""
        return 0

    def fits(self) -> None:
        """Refuse a workload whose history and events would not fit this machine (BadArguments
        naming the size it needs and the fix), before anything starts."""
        events = self.event_count()
        memory, disk = events * MEMORY_BYTES_PER_EVENT, events * DISK_BYTES_PER_EVENT
        base = _history_base()
        have_memory, have_disk = _available_memory(), _free_disk(base)
        short = []
        if have_memory is not None and memory > 0.8 * have_memory:
            short.append(f"about {_size(memory)} of memory ({_size(have_memory)} available)")
        if have_disk is not None and disk > 0.8 * have_disk:
            short.append(f"about {_size(disk)} of disk for its history under {base} "
                         f"({_size(have_disk)} free)")
        if short:
            raise BadArguments(f"workload {self.label()}: {events:,} events need " + " and ".join(short)
                               + "; lower keys/events/jobs (or set CHAOS_CLUSTER_BASE to a bigger disk)")


def _resent(events: list[Event], resend: int, gap_ms: float = 1.0) -> list[Event]:
    """Each event published again `resend` times with the same event_id (a relay resending)."""
    out = list(events)
    for n in range(1, resend + 1):
        out += [Event(**{**e.to_dict(), "at_ms": e.at_ms + n * gap_ms}) for e in events]
    return out


class Pair(Workload):
    name = "pair"
    summary = "order #42: created v=1 (800 ms) then paid v=2 (50 ms); `pairs` repeats it on new orders"
    params = (
        Param("key", "42", "the order id"),
        Param("created_ms", 800.0, "cost of handling `created`", minimum=0),
        Param("paid_ms", 50.0, "cost of handling `paid`", minimum=0),
        Param("paid_at_ms", 0.0, "when `paid` is published, after the run starts", minimum=0),
        Param("payment_service", False, "publish `paid` from a second producer process P-payment"),
        Param("resend", 0, "publish every event this many extra times with the same event_id", minimum=0),
        Param("pairs", 1, "orders published one after another (keys key, key-2, key-3...): "
                          "several races per run, one reset", minimum=1),
        Param("pair_gap_ms", 300.0, "time between two orders' `created` (pairs > 1): past the "
                                    "previous order's handling, so each order's race starts alike", minimum=0),
    )

    def event_count(self) -> int:
        return 2 * self.pairs * (1 + self.resend)

    def make_events(self, rng: random.Random) -> list[Event]:
        paid_by = "P-payment" if self.payment_service else "P-order"
        base: list[Event] = []
        for n in range(self.pairs):
            k, at = (self.key if n == 0 else f"{self.key}-{n + 1}"), n * self.pair_gap_ms
            base += [Event(f"e{k}-1", k, "created", 1, self.created_ms, at, "P-order"),
                     Event(f"e{k}-2", k, "paid", 2, self.paid_ms, at + self.paid_at_ms, paid_by)]
        return _resent(base, self.resend)


class ManyOrders(Workload):
    name = "many-orders"
    summary = "K orders x E events (created, paid, shipped, ...), keys interleaved by seed"
    params = (
        Param("keys", 200, "number of orders", minimum=1),
        Param("events", 3, f"events per order: {', '.join(ETYPES)}, then step-6, step-7...",
              minimum=1, maximum=MAX_EVENTS_PER_KEY),
        Param("cost_ms", 5.0, "cost of handling one event", minimum=0),
        Param("jitter_ms", 0.0, "extra random cost, uniform in [0, jitter_ms]", minimum=0),
        Param("gap_ms", 0.0, "time between two publishes (0 = as fast as possible)", minimum=0),
        Param("resend", 0, "publish every event this many extra times with the same event_id", minimum=0),
    )

    def validate(self) -> None:
        self.fits()

    def event_count(self) -> int:
        return self.keys * self.events * (1 + self.resend)

    def make_events(self, rng: random.Random) -> list[Event]:
        events, cost_ms, jitter_ms, gap_ms = self.events, self.cost_ms, self.jitter_ms, self.gap_ms
        etypes = [etype_of(v) for v in range(1, events + 1)]
        fixed_cost = round(cost_ms, 3)
        pending = {str(k): 1 for k in range(1, self.keys + 1)}
        order = list(pending)  # the keys still open, in insertion order (what list(pending) gives)
        out: list[Event] = []
        append, choice, uniform = out.append, rng.choice, rng.uniform   # (10^5 events: locals count)
        while order:
            key = choice(order)  # the same draws as rng.choice(list(pending)), without the copy
            v = pending[key]
            cost = round(cost_ms + uniform(0, jitter_ms), 3) if jitter_ms else fixed_cost
            append(Event(f"e{key}-{v}", key, etypes[v - 1], v, cost, len(out) * gap_ms))
            if v == events:
                del pending[key]
                order.remove(key)  # once per key
            else:
                pending[key] = v + 1
        return _resent(out, self.resend)


class Bulk(Workload):
    name = "bulk"
    summary = "N independent jobs, one key each; optional poison job every k-th"
    params = (
        Param("jobs", 2000, "number of jobs", minimum=1),
        Param("cost_ms", 5.0, "cost of one job", minimum=0),
        Param("poison_every", 0, "every k-th job always fails (0 = none)", minimum=0),
    )

    def validate(self) -> None:
        if self.poison_every and self.poison_every > self.jobs:
            raise BadArguments(f"workload bulk: poison_every={self.poison_every} > jobs={self.jobs}: "
                               "no job would be poison; lower poison_every or raise jobs")
        self.fits()

    def event_count(self) -> int:
        return self.jobs

    def make_events(self, rng: random.Random) -> list[Event]:
        k = self.poison_every
        return [Event(f"ej{n}-1", f"j{n}", "done", 1, self.cost_ms, 0.0, "P-order",
                      poison=bool(k) and n % k == 0) for n in range(1, self.jobs + 1)]

    def ordered_keys(self) -> bool:
        return False


WORKLOADS: dict[str, type[Workload]] = {
    "pair": Pair,
    "many-orders": ManyOrders,
    "bulk": Bulk,
}
