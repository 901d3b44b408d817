"""Fixtures for the fault proxy's tests: the server as a real process, real upstreams.

Upstreams are a real redis-server and a threaded echo server (real TCP); the proxy
server runs as its own process (`python -m chaos.proxy serve`), exactly as clusters run it.
"""
from __future__ import annotations

import shutil
import socketserver
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Iterator

import pytest

from proxy_helpers import ApiClient, ProxyProcess, free_port, wait_for_port

@pytest.fixture(scope="session")
def proxy_workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="chaos-proxy-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def proxy_server(proxy_workdir: Path) -> Iterator[ProxyProcess]:
    server = ProxyProcess(proxy_workdir)
    yield server
    server.stop()


@pytest.fixture
def api(proxy_server: ProxyProcess) -> Iterator[ApiClient]:
    """A raw HTTP client for the server; every proxy is deleted after the test."""
    client = ApiClient(proxy_server.port)
    yield client
    for name in list(client.json("GET", "/proxies")):
        client.call("DELETE", f"/proxies/{name}")
    client.close()


@pytest.fixture(scope="session")
def redis_upstream(proxy_workdir: Path) -> Iterator[tuple[str, int]]:
    """A real redis-server on a free loopback port."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    port = free_port()
    data = proxy_workdir / "redis"
    data.mkdir()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(data), "--logfile", str(data / "log"), "--daemonize", "no"],
    )
    try:
        wait_for_port(port)
        yield ("127.0.0.1", port)
    finally:
        proc.kill()
        proc.wait()


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(65536):
                self.request.sendall(data)
        except OSError:
            pass


class _EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024   # the proxy dials 200 connections at once in some tests


@pytest.fixture(scope="session")
def echo_upstream() -> Iterator[tuple[str, int]]:
    """A threaded TCP echo server (real sockets) in this process."""
    server = _EchoServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield server.server_address[:2]
    server.shutdown()
    server.server_close()


@pytest.fixture
def new_proxy(api: ApiClient):
    """Factory: create a proxy to an upstream and return (name, listen port)."""
    counter = iter(range(10**6))

    def make(upstream: tuple[str, int], name: str | None = None, **fields) -> tuple[str, int]:
        name = name or f"p{next(counter)}"
        body = {"name": name, "upstream": f"{upstream[0]}:{upstream[1]}", "listen": "127.0.0.1:0", **fields}
        status, reply = api.json_call("POST", "/proxies", body)
        assert status == 201, reply
        return name, int(reply["listen"].rsplit(":", 1)[1])

    return make


@pytest.fixture
def echo_through(new_proxy, echo_upstream) -> tuple[str, int]:
    return new_proxy(echo_upstream, name="echo")


@pytest.fixture
def redis_through(new_proxy, redis_upstream) -> tuple[str, int]:
    return new_proxy(redis_upstream, name="redis")
