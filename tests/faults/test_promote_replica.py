"""promote-replica against the real topology, with bare redis-py clients (no workers).

Shows the three facts the failover suite builds on: a held replication link loses every
write the primary acknowledged while it was held (and a bare kill loses none); WAIT
tells the writer which of its writes are safe; and the promoted group state rolls back:
entries read and acked while held come back as NEW entries to ``XREADGROUP >``, entries
read before the hold and acked during it come back as pending.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest
import redis

from chaos.errors import BadArguments
from faults import get_fault
from faults.effects import TOOK_BACK, missing
from faults.local import FaultThread, LocalContext

STREAM, GROUP = "orders", "g"
HOLD_WRITES = 40    # writes the hold waits for: the loss it shows
HOLD_CAP_S = 20.0   # ... for at most this long (a writer starved this long is a broken rig)


def client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True, protocol=2, socket_timeout=1.0,
                                socket_connect_timeout=1.0, retry_on_timeout=False)


@dataclass
class Writer:
    """XADDs in a loop through the clients' proxy; keeps each acked id with its send and ack times."""

    url: str
    wait_replicas: bool = False
    acked: list[tuple[str, float, float, int | None]] = field(default_factory=list)   # (id, sent, acked, WAIT answer)
    errors: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        r = client(self.url)
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                sent = time.monotonic()
                entry = r.xadd(STREAM, {"n": str(n)})
                acked = time.monotonic()
                confirmed = int(r.execute_command("WAIT", 1, 50)) if self.wait_replicas else None
                self.acked.append((entry, sent, acked, confirmed))
            except redis.RedisError:
                self.errors += 1
                time.sleep(0.005)
                r = client(self.url)

    def __enter__(self) -> "Writer":
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(10)


@dataclass
class HoldUntilWrites(LocalContext):
    """A LocalContext whose hold ends on the writer's progress, not on the clock.

    The fault's sleep right after its ``hold`` op lasts ``hold_ms`` and then until the
    writer has ``writes`` writes acked that it sent after the hold began (at most
    ``HOLD_CAP_S``). A wall-clock hold of 400 ms saw 4 writes once, with the writer
    thread starved on a loaded machine, and showed nothing. Its first sleep (``at_ms``,
    before the hold) ends once the replica has applied everything the primary had at
    ``synced_at``: every write acked before that is replicated (a time margin instead
    assumed how far a loaded replication proxy may lag)."""

    writer: Writer | None = None
    writes: int = HOLD_WRITES
    synced_at: float = 0.0

    def sleep(self, ms: float) -> bool:
        if not self.ops:
            awake = super().sleep(ms)
            self.synced_at = time.monotonic()
            self.cluster.wait_replication(timeout=HOLD_CAP_S)
            return awake
        last = self.ops[-1]
        if last["value"].get("step") != "hold" or self.writer is None:
            return super().sleep(ms)
        time.sleep(self.scale(ms))
        held, acked = last["time"], self.writer.acked
        while time.monotonic() < held + HOLD_CAP_S and not self.stop_event.is_set():
            if sum(1 for _, sent, _, _ in acked[-4 * self.writes:] if sent > held) >= self.writes:
                break
            time.sleep(0.005)
        return not self.stop_event.is_set()


def op_time(ctx: LocalContext, step: str) -> float:
    return next(op["time"] for op in ctx.ops if op["value"].get("step") == step)


def promoted_ids(cluster) -> set[str]:
    return {entry for entry, _ in cluster.direct_redis("primary").xrange(STREAM)}


@pytest.mark.parametrize("hold", ["timeout", "down", "latency"])
def test_held_replication_loses_every_write_acked_while_held(cluster, hold: str) -> None:
    # latency_ms outlasts the longest hold: a delayed byte that arrived would be replicated.
    fault = get_fault(f"promote-replica:at_ms=700,hold_ms=400,hold={hold},latency_ms=60000,downtime_ms=50")
    with Writer(cluster.redis_url()) as writer:
        ctx = HoldUntilWrites(cluster, seed=1, writer=writer)
        FaultThread(fault, ctx).start().join(30 + HOLD_CAP_S)
        time.sleep(0.2)  # the writer goes on against the promoted node
    assert cluster.failed_over and ctx.phases("promote-replica") == ["start", "info", "stop"]
    held, killed, promoted = op_time(ctx, "hold"), op_time(ctx, "kill"), op_time(ctx, "promote")
    present = promoted_ids(cluster)
    # One sent after the hold was in place must be lost; one acked before the replica was seen
    # to have everything the primary had (ctx.synced_at, before the hold) must survive.
    in_hold = [e for e, t, _, _ in writer.acked if held < t < killed]
    before = [e for e, _, acked, _ in writer.acked if acked < ctx.synced_at]
    after = [e for e, t, _, _ in writer.acked if t > promoted]
    lost = [e for e, _, _, _ in writer.acked if e not in present]
    figures = (f"acked={len(writer.acked)} before_hold={len(before)} in_hold={len(in_hold)} "
               f"after_promote={len(after)} lost={len(lost)} errors={writer.errors}")
    assert len(in_hold) >= HOLD_WRITES, f"too few writes in {HOLD_CAP_S} s of hold: {figures}"
    assert set(in_hold) <= set(lost), f"a write acked while held survived the failover: {figures}"
    assert all(e in present for e in before), f"a write replicated before the hold was lost: {figures}"
    assert all(e in present for e in after), f"a write acked by the promoted node is missing: {figures}"
    lost_times = [(sent, acked) for e, sent, acked, _ in writer.acked if e not in present]
    assert min(a for _, a in lost_times) > ctx.synced_at and max(s for s, _ in lost_times) < promoted, \
        f"loss outside the window: {figures}"
    assert fault.report["unreplicated_bytes"] > 0, fault.report


def test_bare_kill_after_the_last_ack_loses_nothing(cluster) -> None:
    ctx = LocalContext(cluster, seed=2)
    fault = get_fault("promote-replica:at_ms=0,hold=none,hold_ms=200,downtime_ms=20")
    r = client(cluster.redis_url())
    acked = [r.xadd(STREAM, {"n": str(n)}) for n in range(2000)]
    FaultThread(fault, ctx).start().join(30)
    present = promoted_ids(cluster)
    lost = [e for e in acked if e not in present]
    assert cluster.failed_over
    assert lost == [], f"bare kill lost {len(lost)} of {len(acked)} acked writes"


def test_wait_confirmed_writes_survive_and_unconfirmed_are_the_loss(cluster) -> None:
    # after_entries: writes confirmed before the hold; each write held waits out WAIT's 50 ms.
    fault = get_fault("promote-replica:after_entries=30,at_ms=300,hold_ms=400,downtime_ms=50")
    with Writer(cluster.redis_url(), wait_replicas=True) as writer:
        ctx = HoldUntilWrites(cluster, seed=3, writer=writer, writes=5)
        FaultThread(fault, ctx).start().join(30 + HOLD_CAP_S)
        time.sleep(0.2)
    present = promoted_ids(cluster)
    confirmed = [e for e, _, _, c in writer.acked if c]
    unconfirmed = [e for e, _, _, c in writer.acked if not c]
    lost_confirmed = [e for e in confirmed if e not in present]
    lost_unconfirmed = [e for e in unconfirmed if e not in present]
    figures = (f"acked={len(writer.acked)} confirmed={len(confirmed)} lost_confirmed={len(lost_confirmed)} "
               f"unconfirmed={len(unconfirmed)} lost_unconfirmed={len(lost_unconfirmed)}")
    assert lost_confirmed == [], f"a WAIT-confirmed write was lost: {figures}"
    assert lost_unconfirmed, f"the hold lost nothing the writer had not confirmed: {figures}"
    assert len(confirmed) > 10, figures


def test_promoted_group_state_rolls_back(cluster) -> None:
    """Read before the hold + acked during it -> pending; read and acked during it -> new to '>'."""
    r = client(cluster.redis_url())
    r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    early = [r.xadd(STREAM, {"n": f"a{i}"}) for i in range(10)]
    late = [r.xadd(STREAM, {"n": f"b{i}"}) for i in range(10)]
    got = r.xreadgroup(GROUP, "c1", {STREAM: ">"}, count=10)
    assert [e for e, _ in got[0][1]] == early
    cluster.wait_replication()

    ctx = LocalContext(cluster, seed=4)
    fault = get_fault("promote-replica:at_ms=0,hold_ms=500,downtime_ms=50")
    thread = FaultThread(fault, ctx).start()
    assert wait_phase(ctx, "start", 5.0)
    r.xack(STREAM, GROUP, *early)                                    # acked while held
    got = r.xreadgroup(GROUP, "c1", {STREAM: ">"}, count=10)          # read while held
    assert [e for e, _ in got[0][1]] == late
    r.xack(STREAM, GROUP, *late)
    added = [r.xadd(STREAM, {"n": f"c{i}"}) for i in range(5)]      # acked by the primary while held
    assert r.xpending(STREAM, GROUP)["pending"] == 0
    thread.join(30)

    p = client(cluster.redis_url())  # same proxy, now leading to the promoted replica
    pending = [row["message_id"] for row in p.xpending_range(STREAM, GROUP, "-", "+", 100)]
    again = p.xreadgroup(GROUP, "c2", {STREAM: ">"}, count=100)
    redelivered_new = [e for e, _ in again[0][1]] if again else []
    present = {e for e, _ in p.xrange(STREAM)}
    assert cluster.failed_over
    assert pending == early, f"entries acked while held should be pending again: {pending}"
    assert redelivered_new == late, f"entries read while held should be new to '>': {redelivered_new}"
    assert not present & set(added), "entries added while held should be lost"


def wait_phase(ctx: LocalContext, phase: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if phase in ctx.phases("promote-replica"):
            return True
        time.sleep(0.002)
    return False


def test_until_keeps_the_link_held_until_a_consumer_reads_after_the_hold(cluster) -> None:
    """A consumer starved through the whole hold (as on a loaded machine) read nothing the
    failover could hand out again: `until=reread/unread` keeps the link held past hold_ms
    until it reads, and the kill op's figures are what the promoted node then shows."""
    r = client(cluster.redis_url())
    r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    old = [r.xadd(STREAM, {"n": f"a{i}"}) for i in range(10)]
    cluster.wait_replication()
    ctx = LocalContext(cluster, seed=5)
    fault = get_fault("promote-replica:at_ms=0,hold_ms=50,downtime_ms=50,until=reread/unread")
    assert fault.effect == "took-back"
    thread = FaultThread(fault, ctx).start()
    assert wait_phase(ctx, "start", 5.0)
    unread = r.xadd(STREAM, {"n": "b0"})          # acked by the held primary, read by nobody
    while time.monotonic() < op_time(ctx, "hold") + 0.3:   # the consumer starved 6x hold_ms
        assert "info" not in ctx.phases("promote-replica"), "killed before any consumer read in the hold"
        time.sleep(0.01)
    got = r.xreadgroup(GROUP, "c1", {STREAM: ">"}, count=3)  # read while held
    read_at = time.monotonic()
    thread.join(30)
    kill = next(op for op in ctx.ops if op["value"].get("step") == "kill")
    assert kill["time"] > read_at and kill["value"]["met"], kill
    assert kill["value"]["took_back"] == {"read": 3, "acked": 0, "unread": 1}, kill
    assert missing(TOOK_BACK, "promote-replica", ctx.ops) is None
    p = client(cluster.redis_url())   # the promoted replica
    again = p.xreadgroup(GROUP, "c2", {STREAM: ">"}, count=100)
    assert [e for e, _ in again[0][1]] == old, "the 3 entries read in the hold come back, with the 7 unread"
    assert [e for e, _ in got[0][1]] == old[:3]
    assert unread not in {e for e, _ in p.xrange(STREAM)}, "the unread entry acked in the hold is lost"


def test_until_that_never_comes_kills_anyway_and_the_run_is_unknown(cluster) -> None:
    """Nothing unread ever (every entry read before the hold): after until_ms the kill comes,
    the kill op says the condition was not met, and the effect check names the miss."""
    r = client(cluster.redis_url())
    r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    for i in range(5):
        r.xadd(STREAM, {"n": f"a{i}"})
    r.xreadgroup(GROUP, "c1", {STREAM: ">"}, count=10)
    cluster.wait_replication()
    ctx = LocalContext(cluster, seed=6)
    fault = get_fault("promote-replica:at_ms=0,hold_ms=50,downtime_ms=50,until=unread,until_ms=300")
    FaultThread(fault, ctx).start().join(30)
    kill = next(op for op in ctx.ops if op["value"].get("step") == "kill")
    assert not kill["value"]["met"] and kill["value"]["took_back"]["unread"] == 0, kill
    assert cluster.failed_over
    reason = missing(TOOK_BACK, "promote-replica", ctx.ops)
    assert reason and "missed the workload" in reason, reason


@pytest.mark.parametrize("spec, message", [
    ("promote-replica:hold=none,until=reread", "needs a link that holds everything"),
    ("promote-replica:hold=latency,until=unread", "needs a link that holds everything"),
    ("promote-replica:until=reread+unread", "joined by '/'"),
    ("promote-replica:until=lost", "not one of reread, unacked, unread"),
])
def test_bad_until_is_refused_with_the_fix(spec, message) -> None:
    with pytest.raises(BadArguments, match=message):
        get_fault(spec)
