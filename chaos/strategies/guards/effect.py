"""The effect write every guard ends in: the order's state row plus its projection counter.

Both change in one transaction, so the projection counts effects exactly and the
checker can see double-applied events as projection drift. `if_older` is the
compare-and-set condition `version < $v` (S5); without it the write is a plain UPDATE.

The write also bumps the row's `write_seq` and returns it: the row lock is held from the
UPDATE to COMMIT and the next writer of the key reads the committed row, so the sequence
is the order in which the key's writes committed (the checker orders `reordered` by it,
not by when a worker got round to logging the write).
"""
from __future__ import annotations

from typing import Any, Protocol

import psycopg

from chaos.events import Event
from chaos.strategies.guards.prepared import INT8, TEXT, PreparedStatement, int_or_none


class Failpoints(Protocol):
    """The failpoints a guard passes through (chaos.workload.failpoints.Failpoints plays it)."""

    armed: dict[str, Any]

    def hit(self, name: str, etype: str | None = None, *, key: str | None = None,
            event_id: str | None = None, **context: Any) -> None: ...


class Written(int):
    """Rows the effect write changed (an int: 0 for a missing row or a rejected older version),
    carrying `seq`, the key's write sequence number the write took (None when it changed nothing).
    An Outcome built from it puts `seq` into the apply op's value (base.Outcome)."""

    seq: int | None

    def __new__(cls, rows: int, seq: int | None = None) -> Written:
        written = super().__new__(cls, rows)
        written.seq = seq
        return written


# One statement, so an autocommit write is one round trip; the projection row exists for
# every key (seeded), so the rows it bumps equal the state rows the UPDATE changed. The
# projection row is found by the key itself and bumped only when the state row changed (a
# one-time EXISTS check), not joined with the UPDATE's output: half the server's work of a join.
_WRITE = ("WITH changed AS (UPDATE orders SET status = %(status)s, version = %(version)s, "
          "write_seq = write_seq + 1 WHERE id = %(key)s {guard} RETURNING write_seq) "
          "UPDATE projection SET count = count + 1 WHERE key = %(key)s AND EXISTS (SELECT FROM changed) "
          "RETURNING (SELECT write_seq FROM changed)")
_PARAMS = {"status": TEXT, "version": INT8, "key": TEXT}
_PLAIN = PreparedStatement("write", _WRITE.format(guard=""), _PARAMS)
_IF_OLDER = PreparedStatement("write_if_older", _WRITE.format(guard="AND version < %(version)s"), _PARAMS)


def write_state(cur: psycopg.Cursor, ev: Event, *, version: int | None = None, if_older: bool = False,
                failpoints: Failpoints | None = None) -> Written:
    """The state write's rows, with the write sequence number it took (Written).

    `failpoints` gets the `before_commit` hit (inside the transaction, after the writes).
    """
    version = ev.version if version is None else version
    cur.execute((_IF_OLDER if if_older else _PLAIN).sql, {"status": ev.etype, "version": version, "key": ev.key})
    rows = cur.rowcount
    seq = cur.fetchone()[0] if rows > 0 else None
    if failpoints is not None:
        failpoints.hit("before_commit", **ev.op_fields())
    return Written(rows, seq)


def write_now(conn: psycopg.Connection, ev: Event, *, version: int | None = None,
              if_older: bool = False) -> Written:
    """The state write on its own, in autocommit (no failpoint can fire before its COMMIT): one
    round trip of a statement prepared per connection (chaos/strategies/guards/prepared.py)."""
    version = ev.version if version is None else version
    result = (_IF_OLDER if if_older else _PLAIN).execute(conn, {"status": ev.etype, "version": version,
                                                                "key": ev.key})
    rows = int(result.command_tuples or 0)
    return Written(rows, int_or_none(result.get_value(0, 0)) if rows > 0 else None)


def with_seq(value: dict, written: Written) -> dict:
    """The apply op's value with `seq` (the key's commit-ordered position) when the write changed the row."""
    if getattr(written, "seq", None) is not None:
        value["seq"] = written.seq
    return value
