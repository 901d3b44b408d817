"""A local redis-server: the flags that matter here, and its admin client.

``--repl-diskless-sync-delay 0`` makes a replica link up in ~15 ms instead of 5 s.
``--repl-diskless-sync no`` starts a full sync's snapshot at once (a diskless one waits
for the once-a-second replication cron: a reset after a failover left the replica in
``wait_bgsave`` for up to a second), and ``--rdb-del-sync-files yes`` deletes that
snapshot afterwards, so a restarted server still comes back empty. ``--hz 100``: the server
notices its snapshot child is done (and starts sending it) within 10 ms, not 100 ms: a
reset after a failover (a full sync) took ~200 ms, now ~20 ms; an idle server's cron then
costs about 0.3 % of a core.
Persistence is off unless asked for (``restart`` with ``appendonly``), so a crash loses
everything, as with the reference's servers.
"""
from __future__ import annotations

import socket
from pathlib import Path
from typing import Callable

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from chaos.cluster.binaries import redis_server
from chaos.cluster.local_server import LocalServer
from chaos.cluster.ports import free_port
from chaos.cluster.rundirs import ClusterDir


def admin_client(host: str, port: int, timeout: float = 2.0) -> redis.Redis:
    """A RESP2, decoded client with timeouts and one immediate retry (a kept connection to a
    restarted server); redis-py's default retries back off for seconds, which a reset must not."""
    return redis.Redis(host=host, port=port, decode_responses=True, protocol=2,
                       socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 1))


def answers_ping(host: str, port: int, timeout: float = 0.5) -> bool:
    """One raw PING: the readiness probe (no client library, no retries)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(64).startswith(b"+PONG")


class RedisProcess(LocalServer):
    kind = "redis"

    def __init__(self, name: str, workdir: Path, cdir: ClusterDir | None = None, port: int | None = None,
                 port_picker: Callable[[], int] = free_port, binary: str | None = None):
        super().__init__(name, workdir, cdir, port, port_picker)
        self.binary = binary or redis_server()
        self.appendonly = False
        self.appendfsync = "everysec"

    def argv(self) -> list[str]:
        return [self.binary, "--port", str(self.port), "--bind", self.host, "--save", "",
                "--appendonly", "yes" if self.appendonly else "no", "--appendfsync", self.appendfsync,
                "--dir", str(self.workdir), "--logfile", str(self.workdir / "redis-server.log"),
                "--daemonize", "no", "--repl-diskless-sync-delay", "0", "--repl-diskless-sync", "no",
                "--rdb-del-sync-files", "yes", "--hz", "100", "--protected-mode", "no"]

    def log_files(self) -> list[Path]:
        return [self.log_path, self.workdir / "redis-server.log"]

    def ready(self) -> bool:
        return answers_ping(self.host, self.port)
