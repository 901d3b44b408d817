"""`python -m chaos cluster up|status|down`: servers outlive `up` and `down` stops them all."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import redis

from childrun import wait_no_survivors

ROOT = Path(__file__).resolve().parents[2]


def chaos(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chaos", "cluster", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_up_status_down(tmp_path):
    name = f"t{os.getpid()}"
    up = chaos("up", "--name", name, "--json", "--owner-pid", str(os.getpid()))
    try:
        assert up.returncode == 0, up.stderr
        state = json.loads(up.stdout)
        assert state["replication"]["replica"]["master_link_status"] == "up"
        assert set(state["proxy_state"]) >= {"redis", "replica", "postgres", "replication"}
        supervisor = psutil.Process(state["pid"])
        owner = json.loads((Path(state["base_dir"]) / "owner.json").read_text())
        with redis.Redis.from_url(state["redis_url"], decode_responses=True) as client:
            assert client.set("poked", "by hand")

        again = chaos("up", "--name", name)
        assert again.returncode == 254 and "already up" in again.stderr

        status = chaos("status", "--name", name)
        assert status.returncode == 0 and "link=up" in status.stdout and "proxy replication" in status.stdout
    finally:
        down = chaos("down", "--name", name)
    assert down.returncode == 0, down.stderr
    assert not supervisor.is_running()
    assert wait_no_survivors([owner]) == []
    assert not Path(state["base_dir"]).exists()
    gone = chaos("status", "--name", name)
    assert gone.returncode == 254 and "no cluster" in gone.stderr


def test_a_cluster_goes_down_by_itself_once_its_owner_has_exited():
    """`up --owner-pid`: a test or script killed before its `down` (an xdist worker that died,
    a CI job cancelled) leaves no servers behind: the supervisor goes down with its owner."""
    owner = subprocess.Popen(["sleep", "600"])
    name = f"owned{os.getpid()}"
    try:
        up = chaos("up", "--name", name, "--json", "--owner-pid", str(owner.pid))
        assert up.returncode == 0, up.stderr
        state = json.loads(up.stdout)
        supervisor = psutil.Process(state["pid"])
        servers = json.loads((Path(state["base_dir"]) / "owner.json").read_text())
        assert supervisor.is_running()
    finally:
        owner.kill()
        owner.wait()
    try:
        supervisor.wait(timeout=30)
    except psutil.TimeoutExpired:
        chaos("down", "--name", name)
        raise AssertionError("the supervisor outlived its owner by 30 s") from None
    assert wait_no_survivors([servers]) == []
    assert not Path(state["base_dir"]).exists()
    gone = chaos("status", "--name", name)
    assert gone.returncode == 254 and "no cluster" in gone.stderr


def test_an_owner_pid_that_is_not_running_is_refused_before_anything_starts():
    dead = subprocess.Popen(["true"])
    dead.wait()
    up = chaos("up", "--name", f"dead{os.getpid()}", "--owner-pid", str(dead.pid))
    assert up.returncode == 254, up.stderr
    assert f"--owner-pid {dead.pid}: no such process is running" in up.stderr
    assert "leave --owner-pid out" in up.stderr
