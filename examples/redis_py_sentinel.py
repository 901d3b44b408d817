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
from redis.sentinel import Sentinel, SentinelManagedConnection

from examples.redis_py_cas import consume


class AskAgainWhenRefused(SentinelManagedConnection):
    """redis-py asks Sentinel again when the primary it knew answers READONLY (demoted); this
    does the same for NOREPLICAS. An old primary fenced with ``min-replicas-to-write`` (Redis's
    guard against a split brain) refuses every write, XREADGROUP and XAUTOCLAIM included, until
    Sentinel demotes it; a client told its address just before the switch meets it there. Asked
    again, the Sentinels name the new primary (a true primary short of replicas is named again:
    the retry waits for them)."""

    def read_response(self, *args, **kwargs):
        try:
            return super().read_response(*args, **kwargs)
        except redis.ResponseError as exc:
            if not str(exc).startswith("NOREPLICAS"):
                raise
            self.disconnect()
            raise redis.ConnectionError(f"{exc} (asking Sentinel for the primary again)") from exc


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
    # socket_timeout above the 200 ms XREADGROUP BLOCK; a demoted primary's READONLY (or a fenced
    # one's NOREPLICAS) makes the connection drop (ConnectionError) and ask the Sentinels again.
    r = manager.master_for(os.environ["CHAOS_MASTER_NAME"], decode_responses=True, protocol=2, socket_timeout=2.0,
                           connection_class=AskAgainWhenRefused)
    consume(r, psycopg.connect(os.environ["CHAOS_PG_DSN"], autocommit=True), retry_on=redis.ConnectionError)


if __name__ == "__main__":
    main()
