"""A local PostgreSQL server started from a copied template data dir (see pg_template)."""
from __future__ import annotations

import math
import shutil
import signal
from pathlib import Path
from typing import Callable

import psycopg

from chaos.cluster.health import SLOW_PATIENCE_S
from chaos.cluster.local_server import LocalServer
from chaos.cluster.pg_template import _pg_env, run_as_user
from chaos.cluster.ports import free_port
from chaos.cluster.rundirs import ClusterDir

SETTINGS = {                      # durability off: the tests never need crash-safe PostgreSQL
    # synchronous_commit on (with fsync off: a write to the page cache, no flush): a commit writes
    # its own WAL; `off` made nearly every commit wake the WAL writer with a signal (kill() plus a
    # context switch on the committing backend: more server CPU per event, measured with 4 clients)
    "fsync": "off", "synchronous_commit": "on", "full_page_writes": "off",
    "max_connections": "200", "shared_buffers": "32MB",
    # DSM segments in the data dir (pg_dynshmem/), not /dev/shm: a SIGKILLed server's go with its dir
    "dynamic_shared_memory_type": "mmap",
}


def admin_connect(host: str, port: int, dbname: str = "postgres",
                  timeout: float = SLOW_PATIENCE_S) -> psycopg.Connection:
    """An autocommit connection as ``postgres``. A server that is gone refuses at once (the error
    names its address); one that took the TCP connection but does not finish the handshake is
    waited for up to ``timeout`` (a PostgreSQL that had just answered ``ready()`` took more than
    2 s to accept the next connection at load 10-12), then named: stopped or starved for that long
    is the rig's patience with a live server (health.SLOW_PATIENCE_S)."""
    try:
        return psycopg.connect(host=host, port=port, dbname=dbname, user="postgres", autocommit=True,
                               connect_timeout=max(2, math.ceil(timeout)))     # libpq's minimum is 2 s
    except psycopg.errors.ConnectionTimeout as exc:
        raise psycopg.errors.ConnectionTimeout(
            f"PostgreSQL at {host}:{port} did not accept a connection within {max(2, math.ceil(timeout))} s "
            f"(it took the TCP connection: stopped, or starved that long)") from exc


class PostgresProcess(LocalServer):
    kind = "postgres"
    stop_signal = signal.SIGQUIT       # immediate shutdown (4 ms); the data dir is thrown away

    def __init__(self, name: str, workdir: Path, bin_dir: Path, cdir: ClusterDir | None = None,
                 port: int | None = None, port_picker: Callable[[], int] = free_port):
        super().__init__(name, workdir, cdir, port, port_picker)
        self.bin_dir = bin_dir
        self.data_dir = workdir / "data"
        self.user = run_as_user()
        if self.user:   # the server writes its socket and lock file here
            shutil.chown(workdir, self.user, self.user)

    def argv(self) -> list[str]:
        args = [str(self.bin_dir / "postgres"), "-D", str(self.data_dir), "-p", str(self.port),
                "-c", f"listen_addresses={self.host}", "-c", f"unix_socket_directories={self.workdir}"]
        for key, value in SETTINGS.items():
            args += ["-c", f"{key}={value}"]
        return args

    def env(self) -> dict[str, str]:
        return _pg_env()

    def ready(self) -> bool:
        with admin_connect(self.host, self.port, timeout=2) as conn:     # one try of wait_ready's loop
            conn.execute("SELECT 1")
            return True
