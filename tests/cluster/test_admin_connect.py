"""The rig's admin connection to PostgreSQL (``cluster up``, a reset) holds on a loaded machine:
it waits out a server that is slow to finish the handshake (at load 10-12 one that had just
answered ``ready()`` took more than the old 2 s), names one that never answers, and fails at
once where nothing listens. A SIGSTOPped server is what a starved one looks like to a client:
the kernel takes the TCP connection, nothing answers it."""
from __future__ import annotations

import os
import signal
import threading
import time

import psycopg
import pytest

from chaos.cluster.ports import free_port
from chaos.cluster.postgres_server import admin_connect

OLD_TIMEOUT_S = 2.0      # what a start gave up after before (connect_timeout=2)


def _postgres(cluster):
    return next(c for c in cluster.components() if c.kind == "postgres")


def test_admin_connect_waits_out_a_stopped_server_and_names_one_that_never_answers(chaos_cluster):
    pg = _postgres(chaos_cluster)
    host, port = chaos_cluster.postgres.host, chaos_cluster.postgres.port
    os.killpg(pg.pid, signal.SIGSTOP)
    resume = threading.Timer(1.5, os.killpg, (pg.pid, signal.SIGCONT))
    try:
        started = time.monotonic()
        with pytest.raises(psycopg.errors.ConnectionTimeout, match=f"PostgreSQL at {host}:{port} did not accept"):
            admin_connect(host, port, timeout=2)       # never answers within its bound: named
        resume.start()          # stopped >= 2 + 1.5 s in all, longer than the old timeout
        with admin_connect(host, port) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert time.monotonic() - started > OLD_TIMEOUT_S + 1.0     # the wait did happen
    finally:
        resume.cancel()
        os.killpg(pg.pid, signal.SIGCONT)


def test_admin_connect_fails_at_once_where_nothing_listens():
    port = free_port()
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError, match=f"port {port} failed: Connection refused"):
        admin_connect("127.0.0.1", port)
    assert time.monotonic() - started < 5.0        # refused: not the patience for a live server (15 s)
