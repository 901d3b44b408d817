"""The drain never claims work in hand: two live consumers in drain mode (XAUTOCLAIM every
quarter of the 2 s min-idle time) each read a batch of 60 entries of 40 ms (2.4 s), so each batch
outlasts the min-idle time; neither takes the other's tail. Real redis-server (through
the workers' proxies), real worker processes from the fork server.

Before consumers kept what they hold from going idle (GroupReader.keep_held), the second
consumer's XAUTOCLAIM took the first one's unfinished tail and both applied it; the same
for a page one consumer claimed from a dead one."""
from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from chaos.events import Event
from chaos.history import read_history
from chaos.strategies.delivery.base import GROUP, STREAM
from chaos.strategies.presets import resolve
from chaos.workload.forkserver import fork_server

ENTRIES, COST_MS, BATCH = 120, 40, 60


def _spec(cluster, strategy, name: str, run_dir: Path, failpoints: dict | None = None) -> dict:
    job = {"guard": strategy.guard.to_spec(), "ack": strategy.ack.to_spec()}
    links = cluster.worker_links(name)
    return {**strategy.delivery.consumer_spec(name, [STREAM], job), "role": "consumer", "name": name,
            "run_dir": str(run_dir), "redis_url": links.redis_url, "pg_dsn": links.pg_dsn,
            "sentinels": list(links.sentinels), "master_name": links.master_name, "time_scale": 1.0,
            "seed": 1, "draining": True, "failpoints": failpoints or {}}


def _fill(cluster, entries: int):
    r = cluster.direct_redis()
    r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    for i in range(entries):
        r.xadd(STREAM, Event(f"e{i}", f"k{i}", "created", 1, cost_ms=COST_MS).routed(STREAM).fields())
    return r


def _counts(run_dir: Path) -> tuple[Counter, Counter]:
    history = read_history(run_dir)
    return (Counter(op["event_id"] for op in history if op["f"] == "deliver" and op["type"] == "ok"),
            Counter(op["event_id"] for op in history if op["f"] == "apply" and op["type"] == "ok"))


def _wait_acked(r, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while r.xpending(STREAM, GROUP)["pending"]:
        assert time.monotonic() < deadline, "the entries were never all acked"
        time.sleep(0.05)
    time.sleep(0.6)   # one more claim round each: nothing left to claim


def test_a_live_consumers_batch_is_not_claimed_in_the_drain(cluster, tmp_path):
    strategy = resolve("baseline", parts={"delivery": f"group:consumers=2,count={BATCH}", "guard": "noop"})
    r = _fill(cluster, ENTRIES)
    children = []
    try:
        for name in ("C1", "C2"):   # C1 reads the first 60, then C2 the other 60
            children.append(fork_server().spawn(_spec(cluster, strategy, name, tmp_path), tmp_path / f"{name}.log"))
            deadline = time.monotonic() + 10
            while sum(c["pending"] for c in r.xinfo_consumers(STREAM, GROUP) if c["name"] == name) < BATCH:
                assert time.monotonic() < deadline, f"{name} never read its batch"
                time.sleep(0.01)
        _wait_acked(r)
    finally:
        for child in children:
            child.kill()
            child.wait(5)
    deliveries, applies = _counts(tmp_path)
    assert len(deliveries) == ENTRIES and len(applies) == ENTRIES
    redelivered = sum(n - 1 for n in deliveries.values())
    duplicated = sum(1 for n in applies.values() if n > 1)
    assert (redelivered, duplicated) == (0, 0), (
        f"claimed from a live consumer's batch: {sorted(e for e, n in deliveries.items() if n > 1)}")


def test_a_claimed_page_is_not_claimed_again_from_its_live_claimer(cluster, tmp_path):
    """C0 reads 60 entries and dies before applying any (failpoint after_read, kill); C1 and C2
    drain: one of them claims the whole page (60 x 40 ms = 2.4 s of work) and the other must
    not take its tail: every entry is claimed once and applied once."""
    strategy = resolve("baseline", parts={"delivery": f"group:consumers=2,count={BATCH}", "guard": "noop"})
    r = _fill(cluster, BATCH)
    children = []
    try:
        dead = fork_server().spawn(_spec(cluster, strategy, "C0", tmp_path, {"after_read": {"action": "kill"}}),
                                   tmp_path / "C0.log")
        assert dead.wait(10) is not None, "C0 did not die at its failpoint"
        assert r.xpending(STREAM, GROUP)["pending"] == BATCH
        for name in ("C1", "C2"):
            children.append(fork_server().spawn(_spec(cluster, strategy, name, tmp_path), tmp_path / f"{name}.log"))
        _wait_acked(r)
    finally:
        for child in children:
            child.kill()
            child.wait(5)
    _, applies = _counts(tmp_path)
    claims = Counter(op["event_id"] for op in read_history(tmp_path) if op["f"] == "deliver" and op.get("via") == "claim")
    assert len(applies) == BATCH and set(applies.values()) == {1}, f"applied twice: {applies.most_common(3)}"
    assert len(claims) == BATCH and set(claims.values()) == {1}, f"claimed twice: {claims.most_common(3)}"
