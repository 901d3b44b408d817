"""Faults that act on worker processes, against real OS processes and real signals."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from faults import get_fault
from faults.helpers import process_alive, wait_until
from faults.interface import FaultError
from faults.local import FaultThread, LocalContext, ProcessHandle

SLEEPER = "import time\nwhile True: time.sleep(0.01)"
TERM_IGNORER = ("import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('ready', flush=True)\nwhile True: time.sleep(0.01)")


@pytest.fixture
def procs(started_processes):

    def spawn(code: str = SLEEPER) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        started_processes.append(proc)
        if "ready" in code:
            assert proc.stdout.readline().strip() == "ready"  # its SIGTERM handler is in place
        return proc

    return spawn


def state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def consumers(spawn, n: int = 3, code: str = SLEEPER) -> dict[str, list[ProcessHandle]]:
    return {"consumer": [ProcessHandle(f"C{i}", spawn(code)) for i in range(1, n + 1)]}


def test_kill_consumer_sigkills_the_target_at_its_time(procs) -> None:
    ctx = LocalContext(None, seed=5, roles=consumers(procs))
    fault = get_fault("kill-consumer:after_entries=0,at_ms=200,target=C2")
    t0 = time.monotonic()
    FaultThread(fault, ctx).start().join(10)
    victim = ctx.workers("C2")[0]
    assert victim.proc.wait(5) == -signal.SIGKILL
    elapsed = time.monotonic() - t0
    assert 0.2 <= elapsed < 3.0, elapsed
    assert [w.alive() for w in ctx.workers("consumer")] == [True, False, True]
    assert fault.killed == ["C2"] and ctx.phases("kill-consumer") == ["start"]


def test_kill_consumer_victim_replays_with_the_seed(procs) -> None:
    victims = []
    for seed in (11, 11, 12, 13, 14):
        ctx = LocalContext(None, seed=seed, roles=consumers(procs, 4))
        fault = get_fault("kill-consumer:after_entries=0,at_ms=0")
        FaultThread(fault, ctx).start().join(10)
        victims.append(fault.killed[0])
    assert victims[0] == victims[1]
    assert len(set(victims)) > 1, f"the seed does not choose the victim: {victims}"


# a continued worker is running, sleeping or in a disk wait (D, seen under load): anything but
# stopped (T), traced (t) or gone (Z, X)
CONTINUED_NOT = "TtZX"


def test_pause_stops_then_continues_the_worker(procs) -> None:
    ctx = LocalContext(None, seed=1, roles=consumers(procs, 1))
    worker = ctx.workers("consumer")[0]
    fault = get_fault("pause:at_ms=0,duration_ms=2000,target=C1")
    thread = FaultThread(fault, ctx).start()
    # once the fault says it started (a fixed 0.15 s could miss a late start on a loaded machine)
    assert wait_until(lambda: "start" in ctx.phases("pause"), timeout=10), ctx.ops
    stopped = wait_until(lambda: state(worker.pid) == "T", timeout=1.0)   # the kernel stops it at its next wake-up
    during, window_open = state(worker.pid), "stop" not in ctx.phases("pause")
    thread.join(10)
    assert stopped and window_open, f"worker state during the pause: {during}; phases {ctx.phases('pause')}"
    assert state(worker.pid) not in CONTINUED_NOT, state(worker.pid)
    assert ctx.phases("pause") == ["start", "stop"]


def test_pause_heal_continues_a_worker_when_the_run_is_cut_short(procs) -> None:
    ctx = LocalContext(None, seed=1, roles=consumers(procs, 1))
    worker = ctx.workers("consumer")[0]
    fault = get_fault("pause:at_ms=0,duration_ms=60000,target=C1")
    fault.arm(ctx)
    assert wait_until(lambda: state(worker.pid) == "T", 2.0)
    fault.heal(ctx)
    assert wait_until(lambda: state(worker.pid) not in CONTINUED_NOT, 2.0)


def test_sigterm_is_graceful_when_the_worker_exits(procs) -> None:
    ctx = LocalContext(None, seed=1, roles=consumers(procs, 1))
    fault = get_fault("sigterm:at_ms=0,grace_ms=2000,target=C1")
    FaultThread(fault, ctx).start().join(10)
    stop = [op["value"] for op in ctx.ops if op["value"]["phase"] == "stop"][0]
    assert stop["graceful"] is True and ctx.workers("C1")[0].proc.wait(5) == -signal.SIGTERM


def test_sigterm_kills_a_worker_that_outlives_its_grace(procs) -> None:
    ctx = LocalContext(None, seed=1, roles=consumers(procs, 1, TERM_IGNORER))
    fault = get_fault("sigterm:at_ms=0,grace_ms=300,target=C1")
    FaultThread(fault, ctx).start().join(10)
    stop = [op["value"] for op in ctx.ops if op["value"]["phase"] == "stop"][0]
    assert stop["graceful"] is False and stop["exit_s"] >= 0.3
    assert ctx.workers("C1")[0].proc.wait(5) == -signal.SIGKILL


def test_a_fault_without_a_live_target_errors(procs) -> None:
    ctx = LocalContext(None, seed=1, roles=consumers(procs, 1))
    with pytest.raises(FaultError, match="no live consumer worker named 'C7'"):
        FaultThread(get_fault("kill-consumer:after_entries=0,at_ms=0,target=C7"), ctx).start().join(10)
    assert process_alive(ctx.workers("C1")[0].pid)
