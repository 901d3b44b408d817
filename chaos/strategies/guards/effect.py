"""The effect write every guard ends in: the order's state row plus its projection counter.

Both change in one transaction, so the projection counts effects exactly and the
checker can see double-applied events as projection drift. `if_older` is the
compare-and-set condition `version < $v` (S5); without it the write is a plain UPDATE.
"""
from __future__ import annotations

from typing import Any, Protocol

import psycopg

from chaos.events import Event


class Failpoints(Protocol):
    """The failpoints a guard passes through (chaos.workload.failpoints.Failpoints plays it)."""

    armed: dict[str, Any]

    def hit(self, name: str, etype: str | None = None, *, key: str | None = None,
            event_id: str | None = None, **context: Any) -> None: ...

# One statement, so an autocommit write is one round trip; the projection row exists for
# every key (seeded), so the rows it bumps equal the state rows the UPDATE changed.
_WRITE = ("WITH changed AS (UPDATE orders SET status = %(status)s, version = %(version)s "
          "WHERE id = %(key)s {guard} RETURNING id) "
          "UPDATE projection SET count = count + 1 WHERE key IN (SELECT id FROM changed)")
_PLAIN = _WRITE.format(guard="")
_IF_OLDER = _WRITE.format(guard="AND version < %(version)s")


def write_state(cur: psycopg.Cursor, ev: Event, *, version: int | None = None, if_older: bool = False,
                failpoints: Failpoints | None = None) -> int:
    """Rows the state write affected (0: row missing, or a CAS rejected an older version).

    `failpoints` gets the `before_commit` hit (inside the transaction, after the writes).
    """
    version = ev.version if version is None else version
    cur.execute(_IF_OLDER if if_older else _PLAIN, {"status": ev.etype, "version": version, "key": ev.key})
    rows = cur.rowcount
    if failpoints is not None:
        failpoints.hit("before_commit", **ev.op_fields())
    return rows


