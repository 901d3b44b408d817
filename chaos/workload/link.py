"""A worker's Redis connection for its hot path: commands sent in one write, replies read in order.

redis-py's Pipeline checks a connection out of the pool and back in, wraps the call in its
retry machinery and resets itself on every use; at one pipeline per event that was the
largest part of a consumer's CPU (py-spy and cProfile of `recommended` at 10^5 events). Here
the client is pinned to one connection of its own pool (`r.connection`, what redis-py's
single-connection clients use), so the exchange below and the client's ordinary commands
go out on the same socket: still one connection per process through its proxy, and a
`connection_pool.disconnect()` after a broken link still drops it (it reconnects on the
next command, asking Sentinel for the primary in that topology).
"""
from __future__ import annotations

from typing import Any

import redis
from redis.connection import AbstractConnection
from redis.sentinel import SentinelConnectionPool

try:  # the C packer redis-py itself ends in, without its per-argument Python checks
    from hiredis import pack_command as _pack_command
except ModuleNotFoundError:  # pragma: no cover - exercised only where hiredis is absent
    _pack_command = None


def pinned(r: redis.Redis) -> AbstractConnection:
    """The client's one connection, checked out of its pool once (connected on the way)."""
    conn = r.connection
    if conn is None:
        conn = r.connection = r.connection_pool.get_connection()
    return conn


def exchange(r: redis.Redis, commands: list[tuple[Any, ...]], *, raise_on_error: bool = True) -> list[Any]:
    """Send `commands` in one write and read their raw replies, in order. An error reply
    (e.g. NOREPLICAS) is raised once every reply is read, so the connection stays in step
    (with `raise_on_error=False` it is returned in its place, as redis-py's pipelines do);
    a link error disconnects the connection (redis-py does) and propagates.

    Through Sentinel the client is not pinned: each exchange checks a connection out of the
    pool and back, as redis-py's pipelines do, so the pool's own handling of a failover (a
    new primary named on reconnect, connections to a demoted one dropped) stays in force;
    pinned, a consumer's blocking reads stayed on the old primary and never followed."""
    if isinstance(r.connection_pool, SentinelConnectionPool) and r.connection is None:
        pool = r.connection_pool
        conn = pool.get_connection()
        try:
            return _exchange_on(conn, commands, raise_on_error)
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
    return _exchange_on(pinned(r), commands, raise_on_error)


def _exchange_on(conn: AbstractConnection, commands: list[tuple[Any, ...]], raise_on_error: bool) -> list[Any]:
    if _pack_command is not None:
        packed = [b"".join([_pack_command(command) for command in commands])]
    else:
        packed = conn.pack_commands(commands)
    conn.send_packed_command(packed, check_health=False)
    replies, error = [], None
    for _ in commands:
        try:
            replies.append(conn.read_response())
        except redis.ResponseError as exc:
            error = error or exc
            replies.append(exc)
    if error is not None and raise_on_error:
        raise error
    return replies


def stream_entries(reply: Any) -> list[tuple[str, list[tuple[str, dict | None]]]]:
    """A raw XREADGROUP/XREAD reply (RESP2) as redis-py gives it: [(stream, [(id, fields)])],
    fields None for an entry deleted since it was delivered."""
    if not reply:
        return []
    return [(stream, [(entry[0], _pairs(entry[1])) for entry in entries]) for stream, entries in reply]


def _pairs(flat: list | None) -> dict | None:
    if not flat:
        return None
    it = iter(flat)
    return dict(zip(it, it))
