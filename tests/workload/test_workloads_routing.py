"""Workload generation and routing (pure): per-key order, shard stability, resharding barriers."""
from __future__ import annotations

import random

import pytest
from collections import defaultdict

from chaos.strategies.delivery.sharded import shard_of, shard_stream
from chaos.strategies.guards.cas import entry_version
from chaos.strategies.presets import resolve
from chaos.events import Event


def test_pair_is_the_reference_pair():
    events = resolve("baseline").workload.make_events(random.Random(0))
    assert [(e.event_id, e.etype, e.version, e.cost_ms, e.producer) for e in events] == [
        ("e42-1", "created", 1, 800.0, "P-order"), ("e42-2", "paid", 2, 50.0, "P-order")]


def test_pairs_repeat_the_race_on_new_orders_one_gap_apart():
    workload = resolve("s4a:pairs=3,pair_gap_ms=500,paid_at_ms=7").workload
    events = workload.make_events(random.Random(0))
    assert [(e.event_id, e.key, e.etype, e.at_ms) for e in events] == [
        ("e42-1", "42", "created", 0.0), ("e42-2", "42", "paid", 7.0),
        ("e42-2-1", "42-2", "created", 500.0), ("e42-2-2", "42-2", "paid", 507.0),
        ("e42-3-1", "42-3", "created", 1000.0), ("e42-3-2", "42-3", "paid", 1007.0)]
    assert workload.event_count() == len(events)


def test_publish_blip_model_uses_two_producers():
    strategy = resolve("p2-business")
    events = strategy.workload.make_events(random.Random(0))
    plans = strategy.producer.plans(strategy.delivery.route(events))
    assert sorted(p.name for p in plans) == ["P-order", "P-payment"]
    assert next(e for e in events if e.etype == "paid").at_ms == 300.0


def test_many_orders_keeps_per_key_order_and_is_seeded():
    workload = resolve("s2").workload
    a = workload.make_events(random.Random(7))
    assert a == workload.make_events(random.Random(7))
    assert a != workload.make_events(random.Random(8))
    assert len(a) == 600
    seen = defaultdict(list)
    for ev in a:
        seen[ev.key].append(ev.version)
    assert all(v == [1, 2, 3] for v in seen.values()) and len(seen) == 200


def test_resend_repeats_event_ids():
    events = resolve("inbox").workload.make_events(random.Random(0))
    assert sorted(e.event_id for e in events) == ["e42-1", "e42-1", "e42-2", "e42-2"]


def test_bulk_poison_every_k():
    events = resolve("poison-dlq").workload.make_events(random.Random(0))
    assert len(events) == 5000 and sum(e.poison for e in events) == 10


def test_shard_of_is_stable_and_spreads():
    assert shard_of("42", 4) == shard_of("42", 4)
    counts = defaultdict(int)
    for k in range(1, 201):
        counts[shard_of(str(k), 4)] += 1
    assert set(counts) == {0, 1, 2, 3} and min(counts.values()) > 20


def test_reshard_routes_late_events_to_the_new_layout_with_a_barrier_in_drain_mode():
    events = [Event(f"e{k}-1", str(k), "created", 1) for k in range(10)]
    naive = resolve("s2:reshard_to=8,reshard_after=5").delivery.route(events)
    assert all(e.stream.startswith("orders.4.") for e in naive[:5])
    assert all(e.stream.startswith("orders.8.") and not e.barrier for e in naive[5:])
    drained = resolve("s2:reshard_to=8,reshard_after=5,reshard_mode=drain").delivery.route(events)
    assert all(e.barrier == ",".join(shard_stream(4, i) for i in range(4)) for e in drained[5:])
    assert len(resolve("s2:reshard_to=8,reshard_after=5").delivery.plans({})) == 12


def test_entry_version_orders_like_entry_ids():
    ids = ["1700000000000-0", "1700000000000-7", "1700000000001-0"]
    assert [entry_version(i) for i in ids] == sorted(entry_version(i) for i in ids)


def test_event_fields_round_trip():
    ev = Event("e1-2", "1", "paid", 2, 12.5, poison=True)
    back = Event.from_fields(ev.fields(), "orders")
    assert (back.event_id, back.version, back.cost_ms, back.poison, back.stream) == ("e1-2", 2, 12.5, True, "orders")


def test_a_plan_row_round_trips_through_json_and_a_dict_plan_still_reads():
    import orjson
    ev = Event("e1-2", "1", "paid", 2, 12.5, 3.0, "P-b", True, "orders", "old")
    assert Event.from_plan(orjson.loads(orjson.dumps(ev.to_row()))) == ev
    assert Event.from_plan(ev.to_dict()) == ev
    with pytest.raises(ValueError, match="to_row"):
        Event.from_plan(["e1-2", "1"])
