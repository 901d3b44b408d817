"""Seeded random runs: a simulator decides each event's fate, writes the history a worker
would, and knows the counts from its own decisions; the checker must find the same."""
from __future__ import annotations

import random
from collections import Counter

import pytest
from checker_histories import Ev, History

from chaos.checker import FinalState, check_run

PUBLISH = ("ok", "fail", "info_seen", "info_unseen", "dangling_seen")
FATES = ("applied", "stale", "delivered_only", "never_delivered", "pending", "dlq")


def simulate(seed: int, n_events: int = 300):
    rng = random.Random(seed)
    h, want = History(), Counter()
    stream, pending, dlq = [], [], []
    for i in range(n_events):
        ev = Ev(f"e{i}", str(i % 37), i, "s")
        entry = f"{i}-0"
        outcome = rng.choice(PUBLISH)
        if outcome == "dangling_seen":
            h.publish(ev, "dangling")
        else:
            h.publish(ev, outcome.split("_")[0], entry_id=entry if outcome == "ok" else None)
        if outcome == "info_unseen":
            want["indeterminate"] += 1
            continue
        if outcome == "fail":
            if rng.random() < 0.2:  # the publish "failed" but the entry got through anyway
                h.handle(ev, entry)
                want.update(failed_publish_seen=1, published=1, delivered=1, handled=1)
            continue
        want["published"] += 1
        if outcome != "ok":
            stream.append({"entry_id": entry, "stream": "orders", "event_id": ev.event_id})
        fate = rng.choice(FATES)
        deliveries = 0 if fate in ("never_delivered", "pending", "dlq") else rng.randint(1, 3)
        for n in range(1, deliveries + 1):
            h.deliver(ev, entry, via="read" if n == 1 else "pending", count=n)
        if fate == "applied":
            times = rng.randint(1, deliveries)
            for _ in range(times):
                h.apply(ev)
            want["duplicated"] += times > 1
        elif fate == "stale":
            h.apply(ev, "stale")
        elif fate in ("delivered_only", "never_delivered"):
            want["lost"] += 1
        elif fate == "pending":
            pending.append({"entry_id": entry, "stream": "orders", "event_id": ev.event_id,
                            "consumer": "C1", "delivery_count": 1})
        else:
            dlq.append({"entry_id": f"d{i}", "event_id": ev.event_id})
        want["handled"] += fate in ("applied", "stale")
        want["delivered"] += deliveries > 0
        want["redelivered"] += max(deliveries - 1, 0)
    want.update(pending_left=len(pending), dlq=len(dlq))
    final = FinalState(stream_entries=stream, pending=pending, dlq=dlq)
    return h.ops, final, want


@pytest.mark.parametrize("seed", range(8))
def test_checker_agrees_with_the_simulator(seed):
    ops, final, want = simulate(seed)
    want = {**want, "unexpected": 0}  # every event here was attempted: none may be unexpected
    counts = check_run(ops, final).counts.as_dict()
    measured = {name: counts[name] for name in want}
    assert measured == want
    assert want["lost"] and want["duplicated"] and want["indeterminate"] and want["failed_publish_seen"]
