"""The drain never claims work in hand: two live consumers in drain mode (XAUTOCLAIM every
quarter of the 2 s min-idle time) each read a batch of 60 entries of 40 ms (2.4 s), so each batch
outlasts the min-idle time; neither takes the other's tail. Real redis-server (through
the workers' proxies), real worker processes from the fork server.

Before consumers kept what they hold from going idle (GroupReader.keep_held), the second
consumer's XAUTOCLAIM took the first one's unfinished tail and both applied it; the same
for a page one consumer claimed from a dead one.

The two batches are handed out on conditions, not on process start times: both consumers
block in XREADGROUP, then the first 60 entries arrive in one transaction (one consumer reads
them all), then, once it has done 15 of them and the other is blocked again, the next 60 (the
first is still busy with its batch, so they are the other's). Spawning C2 after C1 had read its batch let C1 finish
it and read the rest too when C2 started late (CI beside other sessions: "C2 never read its batch")."""
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
STAGGER = 15   # entries of the first batch done before the second batch is added


def _spec(cluster, strategy, name: str, run_dir: Path, failpoints: dict | None = None) -> dict:
    job = {"guard": strategy.guard.to_spec(), "ack": strategy.ack.to_spec()}
    links = cluster.worker_links(name)
    return {**strategy.delivery.consumer_spec(name, [STREAM], job), "role": "consumer", "name": name,
            "run_dir": str(run_dir), "redis_url": links.redis_url, "pg_dsn": links.pg_dsn,
            "sentinels": list(links.sentinels), "master_name": links.master_name, "time_scale": 1.0,
            "seed": 1, "draining": True, "failpoints": failpoints or {}}


def _fill(cluster, entries: int):
    """The group, and `entries` entries in its stream."""
    r = cluster.direct_redis()
    r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    _add(r, entries)
    return r


def _add(r, entries: int, first: int = 0) -> None:
    """`entries` entries e<first>.. in one transaction (a reader blocked meanwhile gets them all)."""
    with r.pipeline(transaction=True) as pipe:
        for i in range(first, first + entries):
            pipe.xadd(STREAM, Event(f"e{i}", f"k{i}", "created", 1, cost_ms=COST_MS).routed(STREAM).fields())
        pipe.execute()


def _until(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def _blocked_readers(r) -> int:
    return sum(1 for c in r.client_list() if c.get("cmd") == "xreadgroup" and "b" in c.get("flags", ""))


def _group_read(r) -> int:
    """Entries the group has delivered (its entries-read counter)."""
    return next(g["entries-read"] or 0 for g in r.xinfo_groups(STREAM) if g["name"] == GROUP)


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
    r = _fill(cluster, 0)
    children = []
    try:
        for name in ("C1", "C2"):
            children.append(fork_server().spawn(_spec(cluster, strategy, name, tmp_path), tmp_path / f"{name}.log"))
        _until(lambda: _blocked_readers(r) >= 2, "the consumers never both blocked in XREADGROUP")
        _add(r, BATCH)                 # one of them reads all 60 and works on them for 2.4 s
        _until(lambda: _group_read(r) >= BATCH, "nobody read the first batch")
        # a quarter into the first batch: its reader is still busy for ~1.8 s, the second batch's
        # reader will be ~0.6 s behind it, so the first one is idle, claiming every 0.5 s, while
        # the second one's tail passes the 2 s min-idle time (the case the keep-held guards)
        _until(lambda: r.xpending(STREAM, GROUP)["pending"] <= BATCH - STAGGER, "the first batch never progressed")
        _until(lambda: _blocked_readers(r) >= 1, "the other consumer never blocked in XREADGROUP again")
        _add(r, BATCH, first=BATCH)    # the other one's batch
        _wait_acked(r)
    finally:
        for child in children:
            child.kill()
            child.wait(5)
    deliveries, applies = _counts(tmp_path)
    assert len(deliveries) == ENTRIES and len(applies) == ENTRIES
    by_consumer = Counter(op["process"] for op in read_history(tmp_path) if op["f"] == "deliver" and op["type"] == "ok"
                          and op.get("via") == "read")
    assert sorted(by_consumer.values()) == [BATCH, BATCH], f"each consumer reads one batch: {by_consumer}"
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
