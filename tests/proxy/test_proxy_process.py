"""The `proxy serve` process contract: port file, SIGTERM, parent death, --config, bad input."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from proxy_helpers import REPO, ApiClient, ProxyProcess, connect, recv_until_eof


def _listening(port: int) -> bool:
    try:
        connect(port, timeout=1).close()
        return True
    except OSError:
        return False


def test_sigterm_closes_listeners_and_connections(tmp_path, echo_upstream):
    tmp_path.chmod(0o755)
    server = ProxyProcess(tmp_path)
    try:
        api = ApiClient(server.port)
        proxy = api.json("POST", "/proxies", {"name": "e", "upstream": "%s:%d" % echo_upstream})
        port = int(proxy["listen"].rsplit(":", 1)[1])
        sock = connect(port)
        sock.sendall(b"x")
        assert sock.recv(1) == b"x"
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(10) == 0
        assert recv_until_eof(sock) == b""
        sock.close()
        assert not _listening(port) and not _listening(server.port)
    finally:
        server.stop()


def test_exits_when_the_parent_named_by_chaos_parent_pid_dies(tmp_path):
    tmp_path.chmod(0o755)
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    port_file = tmp_path / "port"
    env = dict(os.environ, CHAOS_PARENT_PID=str(parent.pid), PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "chaos.proxy", "serve", "--port", "0",
                             "--port-file", str(port_file)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert port_file.read_text().strip().isdigit()
        assert not (tmp_path / "port.tmp").exists()
        parent.kill()
        parent.wait()
        assert proc.wait(10) == 0
    finally:
        for p in (parent, proc):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_config_file_is_populated_at_start(tmp_path, echo_upstream):
    tmp_path.chmod(0o755)
    config = tmp_path / "proxies.json"
    config.write_text(json.dumps([{"name": "c", "upstream": "%s:%d" % echo_upstream, "listen": "127.0.0.1:0"}]))
    server = ProxyProcess(tmp_path, "--config", str(config))
    try:
        assert list(ApiClient(server.port).json("GET", "/proxies")) == ["c"]
    finally:
        server.stop()


def test_the_chaos_cli_serves_and_stops(tmp_path):
    """`python -m chaos proxy serve`, the documented entry point."""
    tmp_path.chmod(0o755)
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, "-m", "chaos", "proxy", "serve", "--port", "0",
                             "--port-file", str(port_file)], cwd=REPO,
                            env=dict(os.environ, CHAOS_PARENT_PID=str(os.getpid())),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert port_file.exists(), proc.stderr.read() if proc.poll() is not None else "no port file"
        assert ApiClient(int(port_file.read_text())).call("GET", "/version")[0] == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


@pytest.mark.parametrize("args, message", [
    (["--port", "70000"], "--port 70000 is out of range"),
    (["--config", "/nonexistent/p.json"], "cannot read it"),
    (["--port-file", "/nonexistent/dir/port"], "does not exist"),
    (["--config", "BADJSON"], "bad request body"),
])
def test_bad_arguments_exit_254_naming_the_fix(tmp_path, args, message):
    if "BADJSON" in args:
        bad = tmp_path / "bad.json"
        bad.write_text("{not json")
        args = [str(bad) if a == "BADJSON" else a for a in args]
    proc = subprocess.run([sys.executable, "-m", "chaos.proxy", "serve", "--port", "0", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 254, proc.stderr
    assert message in proc.stderr
