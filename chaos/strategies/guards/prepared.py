"""A guard's one-statement effect write as a libpq prepared statement, sent straight through libpq.

Why: an autocommit effect write is one round trip, but psycopg's execute() spent ~40 us of the
consumer's CPU per event (its generators, wait loop and result loaders) against ~10 us for
PQexecPrepared on the same connection (psycopg's own `pq` layer), and the server plans the
statement once per connection instead of parsing it per call. Only for a connection at rest
(autocommit, no transaction, no pipeline): a guard inside a transaction uses psycopg as before.
Errors are psycopg's own exceptions (a lost link an OperationalError, a server error the class
of its SQLSTATE), so the unknown-outcome handling of chaos.workload.jobs sees what it saw before.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from weakref import WeakKeyDictionary

import psycopg
from psycopg import errors, pq

TEXT, INT8 = 25, 20     # parameter type oids
_OK, _IDLE = pq.ConnStatus.OK, pq.TransactionStatus.IDLE
_RESULTS_OK = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)


class PreparedStatement:
    """One statement written with psycopg's `%(name)s` placeholders, prepared on first use per
    connection under `name` and then executed by name with the parameters as text."""

    def __init__(self, name: str, sql: str, params: Mapping[str, int]) -> None:
        self.name = f"chaos_{name}".encode()
        self.sql = sql                      # (psycopg form, for a cursor inside a transaction)
        self.params = tuple(params)
        self.types = tuple(params.values())
        native = sql
        for i, param in enumerate(self.params, 1):
            native = native.replace(f"%({param})s", f"${i}")
        if "%(" in native:
            raise ValueError(f"statement {name}: a placeholder is not among its params {self.params}")
        self.native = native.encode()
        self._prepared: WeakKeyDictionary[psycopg.Connection, bool] = WeakKeyDictionary()

    def execute(self, conn: psycopg.Connection, values: Mapping[str, Any]) -> pq.abc.PGresult:
        """Run it on `conn` (autocommit, at rest): its result, or psycopg's exception."""
        pg = conn.pgconn
        if pg.status != _OK:
            raise psycopg.OperationalError("the connection is lost")
        if pg.transaction_status != _IDLE or pg.pipeline_status:
            raise psycopg.ProgrammingError(f"{self.name.decode()} runs on a connection at rest (autocommit, "
                                           f"no transaction or pipeline); use a cursor inside a transaction")
        if conn not in self._prepared:
            self._check(conn, pg.prepare(self.name, self.native, self.types))
            self._prepared[conn] = True
        args = [None if (v := values[p]) is None else str(v).encode() for p in self.params]
        return self._check(conn, pg.exec_prepared(self.name, args))

    def _check(self, conn: psycopg.Connection, result: pq.abc.PGresult) -> pq.abc.PGresult:
        if result.status in _RESULTS_OK:
            return result
        pg = conn.pgconn
        if pg.status != _OK and not result.error_field(pq.DiagnosticField.SQLSTATE):
            # the link broke with no word from the server: what psycopg's own execute raises then
            message = pg.get_error_message() or "server closed the connection unexpectedly"
            raise psycopg.OperationalError(f"consuming input failed: {message}")
        raise errors.error_from_result(result, encoding=conn.info.encoding)


def int_or_none(value: bytes | None) -> int | None:
    return None if value is None else int(value)
