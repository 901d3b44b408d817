"""Small tools for the proxy tests: raw HTTP to the API, free ports, socket timing."""
from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class ApiClient:
    """Raw HTTP/1.1 to the Toxiproxy API (a fresh connection per call: no state leaks)."""

    def __init__(self, port: int) -> None:
        self.port = port

    def call(self, method: str, path: str, body: bytes | str | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            if isinstance(body, str):
                body = body.encode()
            conn.request(method, path, body=body, headers=headers or {})
            reply = conn.getresponse()
            return reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read()
        finally:
            conn.close()

    def json_call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        status, _, raw = self.call(method, path, None if body is None else json.dumps(body))
        return status, (json.loads(raw) if raw else None)

    def json(self, method: str, path: str, body: Any = None) -> Any:
        status, value = self.json_call(method, path, body)
        assert 200 <= status < 300, (status, value)
        return value

    def add_toxic(self, proxy: str, **toxic: Any) -> dict:
        return self.json("POST", f"/proxies/{proxy}/toxics", toxic)

    def close(self) -> None:
        pass


def connect(port: int, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def recv_until_eof(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def redis_ping(sock: socket.socket) -> float:
    """Send an inline PING and wait for +PONG; returns the round trip in seconds."""
    start = time.monotonic()
    sock.sendall(b"PING\r\n")
    assert recv_exactly(sock, 7) == b"+PONG\r\n"
    return time.monotonic() - start


REPO = Path(__file__).resolve().parents[2]


class ProxyProcess:
    """A `python -m chaos.proxy serve --port 0` process; dies with this test process."""

    def __init__(self, workdir: Path, *args: str) -> None:
        self.port_file = workdir / "api.port"
        env = dict(os.environ, CHAOS_PARENT_PID=str(os.getpid()), PYTHONPATH=str(REPO))
        self.log = open(workdir / "proxy.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "chaos.proxy", "serve", "--host", "127.0.0.1", "--port", "0",
             "--port-file", str(self.port_file), *args],
            cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 20
        while not self.port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"proxy server did not start: {(workdir / 'proxy.log').read_text()}")
            time.sleep(0.02)
        self.port = int(self.port_file.read_text())
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode
