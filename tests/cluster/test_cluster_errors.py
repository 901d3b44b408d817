"""Bad input and failed starts give errors that name the problem and the fix."""
from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.cluster import ClusterError, MissingBinary, ServerStartError, UnknownBackend, check_backend, start_cluster
from chaos.cluster.binaries import pg_bin_dir, redis_server
from chaos.cluster.native import NativeCluster
from chaos.cluster.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_missing_redis_server_names_the_apt_command(monkeypatch, tmp_path):
    monkeypatch.delenv("CHAOS_REDIS_SERVER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MissingBinary, match=r"redis-server not found.*apt-get install -y redis-server"):
        redis_server()


def test_bad_redis_override_names_the_variable(monkeypatch):
    monkeypatch.setenv("CHAOS_REDIS_SERVER", "/nonexistent/valkey-server")
    with pytest.raises(MissingBinary, match="CHAOS_REDIS_SERVER='/nonexistent/valkey-server'"):
        start_cluster("native", "never-started")


def test_bad_pg_bin_names_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("CHAOS_PG_BIN", str(tmp_path))
    with pytest.raises(MissingBinary, match="CHAOS_PG_BIN=.*no executable initdb and postgres"):
        pg_bin_dir()


def test_unknown_backend_lists_the_valid_names(monkeypatch):
    monkeypatch.delenv("CHAOS_BACKEND", raising=False)
    with pytest.raises(UnknownBackend, match="'kubernetes'.*native, compose, external"):
        check_backend("kubernetes")
    monkeypatch.setenv("CHAOS_BACKEND", "podman")
    with pytest.raises(UnknownBackend, match="'podman'"):
        check_backend(None)


def test_pytest_option_with_unknown_backend_is_a_usage_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pytest", "--chaos-backend=bogus", "--co", "-q",
                             "-p", "no:cacheprovider", str(Path(__file__))],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 4     # pytest's usage-error exit code
    assert "unknown backend 'bogus'" in result.stderr and "native, compose, external" in result.stderr


def test_a_server_that_fails_to_start_shows_its_log_tail(monkeypatch, tmp_path):
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\necho 'FATAL: this redis-server refuses to start' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CHAOS_REDIS_SERVER", str(fake))
    with pytest.raises(ServerStartError, match=r"(?s)exited with code 3.*refuses to start"):
        start_cluster("native", f"fail-{tmp_path.name}")


def test_a_port_taken_meanwhile_is_retried_on_another(monkeypatch):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    taken = busy.getsockname()[1]
    handed_out = []

    def picker() -> int:   # the first two picks are a port another program holds
        port = taken if len(handed_out) < 2 else free_port()
        handed_out.append(port)
        return port

    try:
        with NativeCluster.start("port-retry", port_picker=picker) as cluster:
            ports = {cluster.primary.port, cluster.replica.port, cluster.postgres.port}
            assert taken not in ports
            assert handed_out.count(taken) == 2          # both servers given it did retry
            with cluster.direct_redis() as client:
                assert client.ping()
    finally:
        busy.close()


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="only root must switch to a postgres user")
def test_root_without_a_postgres_user_names_how_to_make_one(monkeypatch):
    import chaos.cluster.pg_template as pg_template
    monkeypatch.setattr(pg_template, "RUN_AS", "chaos-no-such-user")
    with pytest.raises(ClusterError, match="useradd --system chaos-no-such-user"):
        pg_template.run_as_user()
