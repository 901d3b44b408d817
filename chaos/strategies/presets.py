"""Named presets: one line each, a combination of producer x delivery x guard x ack x workload.

Each part is written as a spec (`name:k=v,...`), so a preset reads like its description
in DESIGN.md. `resolve("s2:shards=8")` builds the configured parts; a parameter is
addressed by its bare name when exactly one part declares it (`shards`), else with
the slot as prefix (`delivery.count=500`, `workload.cost_ms=0`).
"""
from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from chaos import extensions

from chaos.cellspec import Spec
from chaos.errors import BadArguments
from chaos.params import parse_spec
from chaos.strategies.ack import AckPolicy
from chaos.strategies.delivery import DELIVERIES, Delivery
from chaos.strategies.guards import GUARDS, Guard
from chaos.strategies.part import Part
from chaos.strategies.producer_outbox import OUTBOX_PRODUCERS
from chaos.strategies.producers import PRODUCERS, Producer
from chaos.strategies.event_plans import WORKLOADS, Workload

SLOTS = ("producer", "delivery", "guard", "ack", "workload")


@dataclass(frozen=True)
class Preset:
    """A named composition; parts are specs such as `sharded:shards=4`."""

    name: str
    summary: str
    producer: str = "retrying"
    delivery: str = "group:consumers=2"
    guard: str = "plain"
    ack: str = "after"
    workload: str = "pair"
    notes: str = ""


# The bulk presets' producer: their cells fault the consumer side only, and their figures
# (pending_left, undelivered) count stream entries. With the default 250 ms socket timeout
# (125 ms at time scale 0.5) a loaded machine's late reply to a 256-XADD pipeline was an
# `info` and a retry: 256 entries twice, undelivered 2255 of 2000 published (CI, load 20-28).
BULK_PRODUCER = "retrying:timeout_ms=5000"

PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset("baseline", "1 stream, 1 group, 2 consumers, plain UPDATE"),
    Preset("s1", "single consumer, plain UPDATE", delivery="single"),
    Preset("s2", "N streams by crc32(key) % N, a consumer per stream", delivery="sharded:shards=4",
           workload="many-orders"),
    Preset("s3", "one reader, a worker process per key bucket, ack after the worker finished",
           delivery="fanout:workers=4", workload="many-orders"),
    Preset("s4a", "per-key lock SET NX PX 5000, retry 20 ms, compare-and-delete release", guard="lock"),
    Preset("s4b", "S4a + 0-30 ms random delay before locking", guard="lock:jitter_ms=30"),
    Preset("s4c", "S4a with lock TTL 500 ms < job 800 ms", guard="lock:ttl_ms=500"),
    Preset("s5", "compare-and-set WHERE id AND version < $v, READ COMMITTED", guard="cas"),
    Preset("s5-rr", "S5 under REPEATABLE READ, serialization errors retried", guard="cas:isolation=rr"),
    Preset("inbox", "S1, every event sent twice, inbox by event_id + effect in one tx", delivery="single",
           guard="inbox", workload="pair:resend=1"),
    Preset("setnx-dedupe", "S1, every event sent twice, SET NX EX dedupe marker in Redis",
           delivery="single", guard="setnx-dedupe", workload="pair:resend=1"),
    Preset("p2-business", "publish-blip model (paid by P-payment at 300 ms), CAS by business version",
           delivery="single", guard="cas", workload="pair:paid_at_ms=300,payment_service=1"),
    Preset("p2-entry-id", "publish-blip model, CAS by stream entry id", delivery="single",
           guard="cas:version=entry_id", workload="pair:paid_at_ms=300,payment_service=1"),
    Preset("ack-on-receive", "2000 jobs, prefetch 500, 5 ms each, XREADGROUP NOACK",
           producer=BULK_PRODUCER, delivery="single:count=500", ack="on-receive", workload="bulk:jobs=2000,cost_ms=5"),
    Preset("ack-after", "2000 jobs, prefetch 500, 5 ms each, XACK after processing",
           producer=BULK_PRODUCER, delivery="single:count=500", workload="bulk:jobs=2000,cost_ms=5"),
    Preset("poison-no-dlq", "5000 jobs, 1 poison per 500, retried forever", producer=BULK_PRODUCER,
           delivery="single:count=100,claim=always,claim_idle_ms=200",
           workload="bulk:jobs=5000,cost_ms=0,poison_every=500"),
    Preset("poison-dlq", "5000 jobs, 1 poison per 500, max 3 attempts then DLQ", producer=BULK_PRODUCER,
           delivery="single:count=100,claim=always,claim_idle_ms=200", ack="after:max_attempts=3",
           workload="bulk:jobs=5000,cost_ms=0,poison_every=500"),
    Preset("p1-naive", "outbox, naive dispatcher (ORDER BY id, skip a failed row); e1-1's publish fails twice",
           producer="outbox-naive:fail_event=e1-1", delivery="single", workload="many-orders:keys=2,events=2,cost_ms=5"),
    Preset("p1-per-key", "outbox, per-key dispatcher (a failed row blocks only its key); e1-1's publish fails twice",
           producer="outbox-per-key:fail_event=e1-1", delivery="single", workload="many-orders:keys=2,events=2,cost_ms=5"),
    Preset("p1-naive-n", "3 naive outbox dispatchers in parallel (row claims, SKIP LOCKED); e1-1's holder stalls 3 s",
           producer="outbox-naive:dispatchers=3,poll_ms=5,stall_event=e1-1", delivery="single",
           workload="many-orders:keys=4,events=5,cost_ms=0"),
    Preset("p1-per-key-n", "3 per-key outbox dispatchers in parallel (advisory lock per key); e1-1's holder stalls 3 s",
           producer="outbox-per-key:dispatchers=3,poll_ms=5,stall_event=e1-1", delivery="single",
           workload="many-orders:keys=4,events=5,cost_ms=0"),
    Preset("p1-inbox", "outbox per-key relay (at-least-once) + consumer inbox by event_id, effect in one tx",
           producer="outbox-per-key", delivery="single", guard="inbox", workload="many-orders:keys=2,events=2,cost_ms=5"),
    Preset("p3", "2 consumers in one group + reorder buffer: early versions parked until the gap fills",
           guard="reorder-buffer"),
    Preset("p4", "2 consumers in one group + event-carried state, conditional upsert (no row beforehand)",
           guard="state-carried"),
    Preset("recommended", "S2 sharding by key + CAS on business version + inbox by event_id",
           delivery="sharded:shards=4,respawn=1,on_nogroup=recreate-from-0", guard="inbox:cas=1", workload="many-orders:resend=1",
           notes="S2 over S3: no single reader to lose, and a shard's consumer is an ordinary "
                 "group consumer, restarted under its name when it dies (as a deployment's "
                 "supervisor does), so its PEL is recovered and its stream read on; CAS makes any "
                 "residual reorder (redelivery, failover, resharding) harmless; the inbox drops resends. A consumer whose group is gone (an evicted stream, a Redis "
                 "restarted empty) recreates it from 0, so it reads what was published since the loss."),
]}

extensions.attach("presets", PRESETS)

# (a ChainMap: a producer registered later, chaos/extensions.py, is seen here too)
_REGISTRIES: dict[str, Mapping[str, type[Part]]] = {
    "producer": ChainMap(PRODUCERS, OUTBOX_PRODUCERS), "delivery": DELIVERIES, "guard": GUARDS, "workload": WORKLOADS,
}


@dataclass
class Strategy:
    """A preset with its parts configured (after `k=v` overrides)."""

    preset: str
    overrides: dict[str, str]
    producer: Producer
    delivery: Delivery
    guard: Guard
    ack: AckPolicy
    workload: Workload
    replaced: dict[str, str] = field(default_factory=dict)

    def parts(self) -> dict[str, Part]:
        return {slot: getattr(self, slot) for slot in SLOTS}

    def zero_by_construction(self) -> dict[str, str]:
        """Counts that this strategy's parts make zero whatever happens (count -> why), from
        what the parts declare: an expectation bounding one asserts nothing, so the table
        refuses it (tests/checker/test_bounds_can_fail.py)."""
        zero: dict[str, str] = {}
        if self.ack.uses_noack:
            why = "XREADGROUP NOACK never puts an entry in the PEL"
            zero.update(pending_left=why, recovered=why + " (nothing to claim)")
        if not self.ack.max_attempts:
            zero["dlq"] = "max_attempts=0 sends nothing to the DLQ"
        if not self.workload.ordered_keys():
            zero["reordered"] = "one version per key cannot reorder"
        return zero

    def label(self) -> str:
        """The spec that rebuilds this strategy (`s2:shards=8`)."""
        given = ",".join(f"{k}={v}" for k, v in self.overrides.items())
        return self.preset + (":" + given if given else "")


def preset_names() -> list[str]:
    return list(PRESETS)


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise BadArguments(f"unknown preset {name!r}; presets are: {', '.join(PRESETS)}") from None


def _part(slot: str, spec: str, extra: dict[str, Any]) -> Part:
    if slot == "ack":
        mode, given = parse_spec(spec, "ack policy")
        return AckPolicy(**{"mode": mode, **given, **extra})
    name, given = parse_spec(spec, slot)
    registry = _REGISTRIES[slot]
    if name not in registry:
        raise BadArguments(f"unknown {slot} {name!r}; {slot}s are: {', '.join(registry)}")
    return registry[name](**{**given, **extra})


def _declared(slot: str, spec: str) -> set[str]:
    if slot == "ack":
        return set(AckPolicy.declared)
    name, _ = parse_spec(spec, slot)
    cls = _REGISTRIES[slot].get(name)
    return set(cls.declared) if cls else set()


def resolve(spec: str | Spec, parts: Mapping[str, str] | None = None) -> Strategy:
    """`s2:shards=8` (or its parsed chaos.cellspec.Spec) -> a Strategy; unknown presets or
    parameters raise BadArguments listing the valid ones.

    `parts` replaces whole parts before the overrides apply: `{"workload": "many-orders:keys=40"}`.
    """
    name, given = (spec.name, spec.values) if isinstance(spec, Spec) else parse_spec(spec, "preset")
    preset = get_preset(name)
    for slot, part_spec in (parts or {}).items():
        if slot not in SLOTS:
            raise BadArguments(f"--part {slot}=...: no such part; parts are: {', '.join(SLOTS)}")
        preset = replace(preset, **{slot: part_spec})
    per_slot: dict[str, dict[str, str]] = {slot: {} for slot in SLOTS}
    declared = {slot: _declared(slot, getattr(preset, slot)) for slot in SLOTS}
    for key, value in given.items():
        slot, dot, param = key.partition(".")
        if dot:
            if slot not in SLOTS or param not in declared[slot]:
                raise BadArguments(f"preset {name}: no parameter {key!r}; its parameters are: "
                                   f"{', '.join(_all_params(declared))}")
            per_slot[slot][param] = value
            continue
        owners = [s for s in SLOTS if key in declared[s]]
        if not owners:
            raise BadArguments(f"preset {name}: no parameter {key!r}; its parameters are: "
                               f"{', '.join(_all_params(declared))}")
        if len(owners) > 1:
            raise BadArguments(f"preset {name}: {key!r} is a parameter of {' and '.join(owners)}; "
                               f"write {owners[0]}.{key}=... to say which")
        per_slot[owners[0]][key] = value
    built = {slot: _part(slot, getattr(preset, slot), per_slot[slot]) for slot in SLOTS}
    return Strategy(preset=name, overrides=dict(given), replaced=dict(parts or {}), **built)  # type: ignore[arg-type]


# A producer's socket timeout when no fault of the cell acts on its path to Redis (its link, the
# primary): with the default 250 ms (time-scaled) a loaded machine's late reply to a 256-XADD
# pipeline was a timeout and a retry, 256 duplicate entries no strategy asked for (s3 with no
# fault: duplicated 256, reordered 227, CI at load ~30). The value s2's drain row gives.
STEADY_TIMEOUT_MS = 2000.0


def steady_producer(strategy: Strategy) -> Strategy:
    """`strategy` with a producer whose socket timeout is at least STEADY_TIMEOUT_MS, unless its
    spec named `timeout_ms` (the preset's part, an override or a replaced part): for a cell where
    no fault acts on the publish path (faults.interface.Fault.touches_publish), so a timeout
    there is the harness disturbing the cell. The strategy's label and overrides stay as given."""
    producer = strategy.producer
    if ("timeout_ms" not in producer.declared or "timeout_ms" in producer.given
            or producer.timeout_ms >= STEADY_TIMEOUT_MS):
        return strategy
    steady = type(producer)(**{**producer.values, "timeout_ms": STEADY_TIMEOUT_MS})
    steady.given = producer.given
    return replace(strategy, producer=steady)


def _all_params(declared: dict[str, set[str]]) -> list[str]:
    names = [p for s in SLOTS for p in sorted(declared[s])]
    dup = {p for p in names if names.count(p) > 1}
    return [f"{s}.{p}" if p in dup else p for s in SLOTS for p in sorted(declared[s])]
