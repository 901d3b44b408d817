"""The proxy in front of a real PostgreSQL (the cluster's), spoken to by psycopg."""
from __future__ import annotations

import time

import psycopg
import pytest


@pytest.fixture
def pg_through(new_proxy, chaos_cluster) -> tuple[str, str]:
    """A proxy of our own server to the cluster's PostgreSQL; (proxy name, DSN through it)."""
    endpoint = chaos_cluster.postgres
    name, port = new_proxy((endpoint.host, endpoint.port), name="pg")
    return name, f"postgresql://postgres@127.0.0.1:{port}/postgres?connect_timeout=5"


def test_latency_slows_queries_and_reset_peer_breaks_new_sessions(api, pg_through):
    name, dsn = pg_through
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        api.add_toxic(name, type="latency", attributes={"latency": 100})
        start = time.monotonic()
        assert conn.execute("SELECT 2").fetchone() == (2,)
        assert 0.100 <= time.monotonic() - start < 2.0
    api.call("DELETE", f"/proxies/{name}/toxics/latency_downstream")
    api.add_toxic(name, type="reset_peer", attributes={"timeout": 0})
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, autocommit=True)


def test_disabling_the_proxy_cuts_a_live_session(api, pg_through):
    name, dsn = pg_through
    conn = psycopg.connect(dsn, autocommit=True)
    try:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        api.json("POST", f"/proxies/{name}", {"enabled": False})
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    finally:
        conn.close()
    api.json("POST", f"/proxies/{name}", {"enabled": True})
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT 3").fetchone() == (3,)
