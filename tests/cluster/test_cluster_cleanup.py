"""No server, port or dir survives a session: on failure, Ctrl-C, or SIGKILL of pytest or a worker."""
from __future__ import annotations

import os
import signal
from pathlib import Path

from childrun import survivors, wait_no_survivors

from chaos.cluster.native import NativeCluster

SERVERS = {"redis-a", "redis-b", "postgres", "proxy"}


def test_servers_and_dir_go_when_a_test_fails(child_pytest):
    run = child_pytest("fail")
    assert run.wait() == 1, run.output()
    [record] = run.records()
    assert {p["name"] for p in record["processes"]} >= SERVERS - {"proxy"}
    assert survivors([record]) == []
    assert not Path(record["dir"]).exists()


def test_servers_and_dir_go_on_ctrl_c(child_pytest):
    run = child_pytest("block")
    [record] = run.records()
    os.kill(run.proc.pid, signal.SIGINT)
    assert run.wait(60) != 0
    assert wait_no_survivors([record]) == []
    assert not Path(record["dir"]).exists(), run.output()


def test_sigkill_of_pytest_kills_servers_and_next_start_sweeps(child_pytest, private_base, monkeypatch):
    run = child_pytest("block", env={"CHAOS_CLUSTER_BASE": str(private_base)})
    [record] = run.records()
    os.kill(run.proc.pid, signal.SIGKILL)
    run.wait(30)
    assert wait_no_survivors([record]) == []          # parent-death signal: no teardown ran
    leftover = Path(record["dir"])
    assert leftover.exists()                          # a SIGKILLed run cannot delete its dir...
    monkeypatch.setenv("CHAOS_CLUSTER_BASE", str(private_base))
    with NativeCluster.start("next-start") as later:  # ...the next start sweeps it
        assert later.base_dir.parent == leftover.parent
        assert not leftover.exists()


def test_sigkill_of_an_xdist_worker_kills_its_servers(child_pytest):
    """Then Ctrl-C ends the run, as a terminal sends it: SIGINT to the run's process group, the
    workers included. (SIGINT to the controller alone leaves the worker blocked in its test
    until execnet gives up on it, EXIT_TIMEOUT 10 s, and kills it: 8 s from Ctrl-C to the end
    of the run at load 20, 4.4 s this way.)"""
    run = child_pytest("block", workers=2)
    records = run.records(count=2)
    victim, other = records
    os.kill(victim["pid"], signal.SIGKILL)
    assert wait_no_survivors([victim]) == []
    assert len(survivors([other])) == len(other["processes"])   # the other worker's cluster is untouched
    os.killpg(run.proc.pid, signal.SIGINT)                      # (child_pytest starts it in a session of its own)
    run.wait(60)
    assert wait_no_survivors([other]) == []
