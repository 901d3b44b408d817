"""kill-consumer:at=holding against a real Redis and real consumer processes: the kill lands
while the victim holds entries it read, so an ack-first victim loses some in every run (with
a backlog or without) and an ack-after one leaves them in its PEL; a consumer that is never
handed anything fails the fault."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from chaos.errors import BadArguments
from faults import get_fault
from faults.helpers import group_view
from faults.interface import FaultError
from faults.local import FaultThread, LocalContext, ProcessHandle

STREAM, GROUP = "orders", "g"
# A consumer of STREAM in GROUP: reads up to 10 entries, works 50 ms on each (longer than held_ms) (SADD to `applied`
# once done), acks them before the work (ACK_FIRST) or each one after it. SIGUSR1 ends its work time: the
# survivor, told once the victim is dead, works off the rest of the stream at once (only the victim's pace
# decides where the kill lands; the survivor's backlog at 50 ms an entry was 9 of a test's 10 s).
CONSUMER = """
import signal, sys, time, redis
port, name, ack_first = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
work = [0.05]
signal.signal(signal.SIGUSR1, lambda *_: work.__setitem__(0, 0.0))
r = redis.Redis(port=port, decode_responses=True)
print("ready", flush=True)
while True:
    reply = r.xreadgroup("{group}", name, {{"{stream}": ">"}}, count=10, block=100)
    batch = reply[0][1] if reply else []
    if batch and ack_first:
        r.xack("{stream}", "{group}", *[i for i, _ in batch])
    for entry_id, _ in batch:
        time.sleep(work[0])
        r.sadd("applied", entry_id)
        if not ack_first:
            r.xack("{stream}", "{group}", entry_id)
""".format(group=GROUP, stream=STREAM)


@pytest.fixture
def consumers(cluster, started_processes):

    def spawn(ack_first: bool, names=("C1", "C2")) -> list[ProcessHandle]:
        port = cluster.direct_redis().connection_pool.connection_kwargs["port"]
        handles = []
        for name in names:
            proc = subprocess.Popen([sys.executable, "-c", CONSUMER, str(port), name, "1" if ack_first else "0"],
                                    stdout=subprocess.PIPE, text=True)
            started_processes.append(proc)
            assert proc.stdout.readline().strip() == "ready"
            handles.append(ProcessHandle(name, proc))
        return handles

    return spawn


def publish(r, n: int) -> list[str]:
    r.delete(STREAM, "applied")
    r.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    return [r.xadd(STREAM, {"n": i}) for i in range(n)]


def settle(r, timeout_s: float = 20.0) -> None:
    """Until the group handed out everything and only the dead victim still has entries pending."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        group = r.xinfo_groups(STREAM)[0]
        live = [c for c in r.xinfo_consumers(STREAM, GROUP) if c["name"] != "C1"]
        if group["lag"] == 0 and not any(c["pending"] for c in live):
            return
        time.sleep(0.02)
    raise AssertionError("the survivor did not finish the stream")


def kill_holding(cluster, handles, seed: int) -> dict:
    ctx = LocalContext(cluster, seed=seed, roles={"consumer": handles})
    fault = get_fault("kill-consumer:at=holding,target=C1,wait_ms=10000")
    FaultThread(fault, ctx).start().join(15)
    assert handles[0].proc.wait(5) == -signal.SIGKILL and handles[1].alive()
    assert fault.killed == ["C1"] and ctx.phases("kill-consumer") == ["start"]
    handles[1].proc.send_signal(signal.SIGUSR1)   # the victim is dead: the survivor need not take its time
    return next(op["value"] for op in ctx.ops if op["value"].get("phase") == "start")


@pytest.mark.parametrize("run", range(3))
def test_an_ack_first_victim_dies_holding_acked_work_in_every_run(cluster, consumers, run) -> None:
    r = cluster.direct_redis()
    ids = publish(r, 200)
    start = kill_holding(cluster, consumers(ack_first=True), seed=run)
    held = start["holding"]
    assert held["pending"] <= held["pending_before_read"] and held["read_ms_ago"] < 30, held   # acked, fresh
    settle(r)
    pending = {p["message_id"] for p in r.xpending_range(STREAM, GROUP, "-", "+", 1000)}
    lost = set(ids) - r.smembers("applied") - pending
    assert lost, "the victim was killed holding nothing: an ack-first consumer lost no entry"
    assert not pending, "ack-first: nothing stays pending"


def test_an_ack_after_victim_dies_with_its_work_in_the_pel(cluster, consumers) -> None:
    r = cluster.direct_redis()
    ids = publish(r, 200)
    start = kill_holding(cluster, consumers(ack_first=False), seed=1)
    held = start["holding"]
    assert held["pending"] > held["pending_before_read"] and held["read_ms_ago"] >= 30, held   # in its PEL
    settle(r)
    pending = {p["message_id"] for p in r.xpending_range(STREAM, GROUP, "-", "+", 1000)}
    assert pending and all(p["consumer"] == "C1" for p in r.xpending_range(STREAM, GROUP, "-", "+", 1000))
    assert set(ids) - r.smembers("applied") - pending == set(), "ack-after: every entry done or pending"


def test_a_consumer_that_keeps_up_dies_holding_its_one_entry(cluster, consumers) -> None:
    """No backlog: one entry every 150 ms, done in 50 ms; the kill still lands while the victim
    holds one (acked, not written), not while it waits in XREADGROUP."""
    r = cluster.direct_redis()
    publish(r, 0)
    handles = consumers(ack_first=True)
    ctx = LocalContext(cluster, seed=0, roles={"consumer": handles})
    thread = FaultThread(get_fault("kill-consumer:at=holding,target=C1,wait_ms=5000"), ctx).start()
    ids = []
    while handles[0].alive() and len(ids) < 50:
        ids.append(r.xadd(STREAM, {"n": len(ids)}))
        time.sleep(0.15)
    thread.join(10)
    assert not handles[0].alive() and len(ids) < 50
    settle(r)
    pending = {p["message_id"] for p in r.xpending_range(STREAM, GROUP, "-", "+", 1000)}
    assert len(set(ids) - r.smembers("applied") - pending) == 1, "the victim died holding its one entry"


def test_a_consumer_that_gets_nothing_is_never_killed_and_the_fault_says_so(cluster, consumers) -> None:
    r = cluster.direct_redis()
    publish(r, 0)
    handles = consumers(ack_first=True)
    ctx = LocalContext(cluster, seed=0, roles={"consumer": handles})
    fault = get_fault("kill-consumer:at=holding,target=C1,wait_ms=1000")
    with pytest.raises(FaultError, match="never seen holding entries read"):
        FaultThread(fault, ctx).start().join(10)
    assert fault.killed == [] and all(h.alive() for h in handles)
    assert group_view(r, "C1") is None or group_view(r, "C1").read_ms is None


@pytest.mark.parametrize("spec, words", [
    ("kill-consumer:at=holding,at_ms=300", ["drop at_ms"]),
    ("kill-consumer:at=holding,after=5", ["drop after"]),
    ("kill-consumer:held_ms=20", ["held_ms applies to at=holding"]),
    ("kill-consumer:at=mid_batch,delivered=5", ["delivered applies to at=holding"]),
])
def test_parameters_of_another_mode_are_refused(spec, words) -> None:
    with pytest.raises(BadArguments) as info:
        get_fault(spec)
    assert all(w in str(info.value) for w in words)


def test_kill_dispatcher_at_a_time_kills_without_kill_consumers_after_entries() -> None:
    """kill-dispatcher inherits the kill by time but has no after_entries parameter."""
    proc = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.01)"])
    try:
        ctx = LocalContext(None, seed=0, roles={"dispatcher": [ProcessHandle("D1", proc)]})
        fault = get_fault("kill-dispatcher:at=time,at_ms=0")
        FaultThread(fault, ctx).start().join(10)
        assert proc.wait(5) == -signal.SIGKILL and fault.killed == ["D1"]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
