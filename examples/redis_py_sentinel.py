"""The compare-and-set consumer (examples/redis_py_cas.py) done right behind Redis
Sentinel: it asks the Sentinels for the primary (``Sentinel(...).master_for(name)``), so
after a failover its next connection goes to the promoted replica. Run as
``python -m examples.redis_py_sentinel`` under ``--topology sentinel`` (the run sets
``CHAOS_SENTINELS`` and ``CHAOS_MASTER_NAME``). Its twin that pins one address is
examples/redis_py_pinned.py.
"""
from __future__ import annotations

import os

import psycopg
import redis
from redis.sentinel import Sentinel

from examples.redis_py_cas import consume


def sentinels() -> list[tuple[str, int]]:
    """``CHAOS_SENTINELS`` (``host:port,host:port``) as redis-py wants it."""
    out = []
    for item in os.environ["CHAOS_SENTINELS"].split(","):
        host, _, port = item.strip().rpartition(":")
        out.append((host, int(port)))
    return out


def main() -> None:
    manager = Sentinel(sentinels(), socket_timeout=1.0,
                       sentinel_kwargs={"socket_timeout": 0.5, "socket_connect_timeout": 0.5})
    # socket_timeout above the 200 ms XREADGROUP BLOCK; a demoted primary's READONLY makes
    # redis-py drop the connection (ConnectionError) and ask the Sentinels again.
    r = manager.master_for(os.environ["CHAOS_MASTER_NAME"], decode_responses=True, protocol=2, socket_timeout=2.0)
    consume(r, psycopg.connect(os.environ["CHAOS_PG_DSN"], autocommit=True), retry_on=redis.ConnectionError)


if __name__ == "__main__":
    main()
