"""No worker process outlives its run (issue 23): the spawn/stop races of the fork server and
the run's workers, each forced with real processes and real signals.

* A spawn that gave up waiting (the server slow to answer: here SIGSTOPped past the timeout)
  used to leave its child running for ever once the server did fork it, unheld by anyone,
  and its exit on the books as an "early exit" that a later child given the same pid
  (pid_max 32768 wraps within a loaded suite) took for its own: born dead, never killed.
* The rig failing mid-arm: the arm's later spawns used to start a fresh fork server in place
  of the run's dead one; a run on a broken rig starts nothing more.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import psutil
import pytest

from chaos.history import read_history
from chaos.run import run_cell
from chaos.workload.forkserver import ForkServerError, fork_server
from faults.interface import Fault
from rig_helpers import wait_gone

SCALE = 0.5


def _waiting_producer(run_dir: Path, name: str) -> dict:
    """A gated producer: it says it is ready, then waits for its start signal for ever."""
    return {"role": "producer", "name": name, "run_dir": str(run_dir), "redis_url": "redis://127.0.0.1:1/0",
            "pg_dsn": "", "time_scale": 1.0, "gate": True, "events": [],
            "producer": {"name": "direct", "params": {}}}


def _live_children(server_pid: int) -> list[int]:
    return [p.pid for p in psutil.Process(server_pid).children() if p.status() != psutil.STATUS_ZOMBIE]


def test_a_child_whose_spawn_gave_up_waiting_is_killed_when_the_server_answers(tmp_path):
    server = fork_server()
    before = set(_live_children(server._proc.pid))
    os.kill(server._proc.pid, signal.SIGSTOP)       # the server answers only after the client gave up
    try:
        with pytest.raises(ForkServerError, match="did not answer"):
            server.spawn(_waiting_producer(tmp_path, "P-late"), tmp_path / "late.log", timeout=0.3)
    finally:
        os.kill(server._proc.pid, signal.SIGCONT)
    # the server handles requests in order: once the next spawn's answer is in, the late one's
    # child was forked and its answer read (the late child is the one pid new besides the barrier)
    barrier = server.spawn(_waiting_producer(tmp_path, "P-next"), tmp_path / "next.log")
    late = [pid for pid in _live_children(server._proc.pid) if pid not in before and pid != barrier.pid]
    barrier.kill(signal.SIGKILL)
    assert barrier.wait(10) == -signal.SIGKILL
    assert wait_gone(late, 10) == [], f"the child of a spawn that gave up is still running: {late}"
    assert _live_children(server._proc.pid) == []


def test_a_spawn_waits_out_a_starved_server_and_gets_its_child(tmp_path):
    """A server that is alive but answers late (starved: here SIGSTOPped 1 s) is waited for within
    the spawn's patience, and the child it forks is the caller's, running, not one killed as given up
    (forkserver.PATIENCE_S: under load 20-27 an answer took longer than the old 10 s)."""
    server = fork_server()
    os.kill(server._proc.pid, signal.SIGSTOP)
    resume = threading.Timer(1.0, os.kill, (server._proc.pid, signal.SIGCONT))
    resume.start()
    try:
        started = time.monotonic()
        child = server.spawn(_waiting_producer(tmp_path, "P-starved"), tmp_path / "starved.log", timeout=5.0)
        waited = time.monotonic() - started
    finally:
        resume.cancel()
        os.kill(server._proc.pid, signal.SIGCONT)
    assert waited >= 0.9, f"the answer came in {waited:.2f} s: the server was not stopped while asked"
    assert _live_children(server._proc.pid) == [child.pid], "the late answer's child is not the caller's"
    child.kill(signal.SIGKILL)
    assert child.wait(10) == -signal.SIGKILL


class KillForkServerAtArm(Fault):
    """Test-only: SIGKILL the run's fork server (and reap it) where the faults are armed: inside
    the arm, after the consumers started and before the outbox's services and dispatchers
    (started once the faults are armed, not gated) are."""

    name = "kill-forkserver-at-arm"
    description = "kill the worker fork server at the arm (tests/rig only)"
    killed: ClassVar[dict[str, float]] = {}

    def arm(self, ctx: Any) -> None:
        proc = fork_server()._proc
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        KillForkServerAtArm.killed.update(pid=proc.pid, at=time.monotonic())


def test_a_rig_that_fails_mid_arm_starts_no_worker_after_and_leaves_none(cluster, tmp_path):
    """The arm's later spawns used to start a fresh fork server in place of the run's dead one
    and its services and dispatchers on it; now they are refused (the run's rig failed)."""
    KillForkServerAtArm.killed.clear()
    result = run_cell(cluster, "p1-per-key", [KillForkServerAtArm()], runs=1, time_scale=SCALE,
                      keep_runs="always", run_root=tmp_path / "cell")
    killed = KillForkServerAtArm.killed
    assert killed, "the fault did not act"
    assert result.verdict == "unknown"
    run = result.runs[0]
    assert run.rig_failures and run.rig_failures[0].startswith("worker fork server"), run.unknown_reasons
    assert f"(pid {killed['pid']})" in run.rig_failures[0]
    spawned = [op for op in read_history(result.run_dirs[0]) if "spawned" in (op.get("value") or {})]
    assert spawned and spawned[0]["time"] < killed["at"], "no worker started before the arm's faults"
    late = [op["value"]["spawned"] for op in spawned if op["time"] > killed["at"]]
    assert late == [], f"started on a broken rig: {late}"
    server = fork_server()     # (a new one: the run's died)
    assert server._proc.pid != killed["pid"]
    assert _live_children(server._proc.pid) == []


class SpawnUnseen(Fault):
    """Test-only: start a worker of the run that no handle of the run stands for (what a spawn
    given up, or a handle taken for dead, leaves): a gated producer that waits for ever."""

    name = "spawn-unseen"
    description = "start a worker behind the run's back (tests/rig only)"
    pids: ClassVar[list[int]] = []

    def arm(self, ctx: Any) -> None:
        run_dir = Path(ctx.run_dir)
        child = fork_server().spawn(_waiting_producer(run_dir, "P-unseen"), run_dir / "logs" / "P-unseen.log")
        SpawnUnseen.pids.append(child.pid)


def test_a_worker_no_handle_stands_for_is_ended_at_the_stop_and_named(cluster):
    """The fork server files each child under its run dir and ends what is left of the run at
    its stop, whatever the handles believe; the run names what it did not see (verdict unknown)."""
    SpawnUnseen.pids.clear()
    result = run_cell(cluster, "s5", [SpawnUnseen()], runs=1, time_scale=SCALE,
                      parts={"workload": "many-orders:keys=5,events=2,cost_ms=1"}, keep_runs="never")
    assert SpawnUnseen.pids, "the fault did not act"
    pid = SpawnUnseen.pids[0]
    assert wait_gone([pid], 5) == [], "the unseen worker outlived its run"
    assert result.verdict == "unknown"
    assert any(f"P-unseen (pid {pid}) was still running at the stop" in r for r in result.unknown_reasons), \
        result.unknown_reasons
    assert _live_children(fork_server()._proc.pid) == []
