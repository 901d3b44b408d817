"""A worker's Redis connection for its hot path: commands sent in one write, replies read in order.

redis-py's Pipeline checks a connection out of the pool and back in, wraps the call in its
retry machinery and resets itself on every use; at one pipeline per event that was the
largest part of a consumer's CPU (py-spy and cProfile of `recommended` at 10^5 events). Here
the client is pinned to one connection of its own pool (`r.connection`, what redis-py's
single-connection clients use), so the exchange below and the client's ordinary commands
go out on the same socket: still one connection per process through its proxy, and a
`connection_pool.disconnect()` after a broken link still drops it (it reconnects on the
next command, asking Sentinel for the primary in that topology).

`send_only` sends a command without waiting for its reply (a consumer's XACK right after its
apply: the XACK leaves at once, as before, but the round trip is not waited for). The replies
it is owed are read, in order, at the next `exchange` on the connection or before any other
command's reply is read there (redis-py's own commands included), and handed to the sender's
handler together; replies owed on a socket that has since been dropped are never read.
"""
from __future__ import annotations

import os
from typing import Any, Callable

import redis
from redis.connection import AbstractConnection
from redis.sentinel import SentinelConnectionPool

try:  # the C packer redis-py itself ends in, without its per-argument Python checks
    from hiredis import pack_command as _pack_command
except ModuleNotFoundError:  # pragma: no cover - exercised only where hiredis is absent
    _pack_command = None


def through_sentinel(r: redis.Redis) -> bool:
    """A client that asks Sentinel for the primary and is not pinned: it must check a connection
    out of its pool per call, so the pool's handling of a failover stays in force."""
    return r.connection is None and isinstance(r.connection_pool, SentinelConnectionPool)


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
    if through_sentinel(r):
        pool = r.connection_pool
        conn = pool.get_connection()
        try:
            replies = _exchange_on(conn, commands, raise_on_error)
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            conn.disconnect()
            raise
        except redis.ResponseError as exc:
            _leave_if_fenced(conn, [exc])
            raise
        else:
            _leave_if_fenced(conn, replies)
            return replies
        finally:
            pool.release(conn)
    return _exchange_on(pinned(r), commands, raise_on_error)


def _leave_if_fenced(conn: AbstractConnection, replies: list[Any]) -> None:
    """A NOREPLICAS reply through Sentinel: the node may be an old primary fenced with
    min-replicas-to-write until Sentinel demotes it, named to this client just before the
    switch. Drop the connection so the next exchange asks Sentinel again, as redis-py does for
    READONLY (a demoted one); a true primary short of replicas is named again."""
    if any(isinstance(x, redis.ResponseError) and str(x).startswith("NOREPLICAS") for x in replies):
        conn.disconnect()


def _exchange_on(conn: AbstractConnection, commands: list[tuple[Any, ...]], raise_on_error: bool) -> list[Any]:
    if _pack_command is not None:
        packed = [b"".join([_pack_command(command) for command in commands])]
    else:
        packed = conn.pack_commands(commands)
    cls = type(conn)
    cls.send_packed_command(conn, packed, check_health=False)
    owed = conn.__dict__.get("_owed")
    if owed is not None and owed.items:
        owed.settle(conn)   # what earlier send_only calls are owed comes first on the wire
    read = cls.read_response
    replies, error = [], None
    for _ in commands:
        try:
            replies.append(read(conn))
        except redis.ResponseError as exc:
            error = error or exc
            replies.append(exc)
    if error is not None and raise_on_error:
        raise error
    return replies


ReplyHandler = Callable[[list[tuple[Any, Any]]], None]


class _Owed:
    """The replies a pinned connection owes for `send_only` commands: (handler, token) in send
    order, on the socket they were sent on."""

    __slots__ = ("sock", "items")

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.items: list[tuple[ReplyHandler, Any]] = []

    def settle(self, conn: AbstractConnection) -> None:
        """Read every owed reply; each handler gets its (token, reply) pairs in one call, a
        refused command's reply being the ResponseError. A link error ends the reading: the
        replies read before it are still handed over, the rest are lost with the socket."""
        items, self.items = self.items, []
        if self.sock is not conn._sock:     # dropped since: those replies will never come
            return
        read = type(conn).read_response
        got: dict[ReplyHandler, list[tuple[Any, Any]]] = {}
        try:
            for handler, token in items:
                try:
                    reply = read(conn)
                except redis.ResponseError as exc:
                    reply = exc
                got.setdefault(handler, []).append((token, reply))
        finally:
            for handler, replies in got.items():
                handler(replies)


def send_only(r: redis.Redis, command: tuple[Any, ...], handler: ReplyHandler, token: Any,
              window: int = 1) -> bool:
    """Send `command` now and read its reply later (see the module doc): `handler` then gets
    [(token, reply), ...] for this and the other replies read at the same time. False, with
    nothing sent, where the client is not pinned (through Sentinel): use `exchange` then.
    A link error while sending propagates (the connection is dropped, as by `exchange`)."""
    if through_sentinel(r):
        return False
    conn = pinned(r)
    owed = conn.__dict__.get("_owed")
    if owed is not None and len(owed.items) >= window:
        owed.settle(conn)
    if _pack_command is not None and conn._sock is not None:
        _write(conn, _pack_command(command))
    else:
        type(conn).send_packed_command(conn, conn.pack_command(*command), check_health=False)
    if owed is None:
        owed = conn._owed = _Owed(conn._sock)
        conn.read_response = _settling_reader(conn)   # redis-py's commands read what is owed first
    elif owed.sock is not conn._sock:   # reconnected by this send: what the old socket owed is gone
        owed.sock, owed.items = conn._sock, []
    owed.items.append((handler, token))
    return True


def _write(conn: AbstractConnection, data: bytes) -> None:
    """Send on a connected socket with one write(2): the socket object's own send polls first
    when it has a timeout, a second system call per command. What the socket buffer does not
    take at once (never seen for an XACK) goes through redis-py's send, which waits for room.
    Errors as redis-py's send raises them (the connection dropped)."""
    try:
        sent = os.write(conn._sock.fileno(), data)
    except BlockingIOError:
        sent = 0
    except OSError as exc:
        conn.disconnect()
        raise redis.ConnectionError(f"Error {exc.errno} while writing to socket. {exc.strerror}.") from None
    if sent < len(data):
        type(conn).send_packed_command(conn, [data[sent:]], check_health=False)


def settle(r: redis.Redis) -> None:
    """Read now every reply the client's connection owes (see `send_only`)."""
    conn = r.connection
    owed = conn.__dict__.get("_owed") if conn is not None else None
    if owed is not None and owed.items:
        owed.settle(conn)


def _settling_reader(conn: AbstractConnection) -> Callable[..., Any]:
    read = type(conn).read_response

    def read_response(*args: Any, **kwargs: Any) -> Any:
        owed = conn._owed
        if owed.items:
            owed.settle(conn)
        return read(conn, *args, **kwargs)

    return read_response


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
