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
    up = chaos("up", "--name", name, "--json")
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
