"""`cas` (S5, P2): compare-and-set on the version, `... WHERE id = $k AND version < $v`.

The job runs inside the transaction (it reads the row first, as a handler would), so
under REPEATABLE READ a concurrent committed update makes the write fail with 40001;
the guard then retries the transaction (each retry is a `retry` op) and the retry sees
the newer version and matches 0 rows (`stale`). Under READ COMMITTED the same write
re-checks the newest row and needs no retry. `version=entry_id` compares stream entry
ids instead of business versions (P2's wrong choice: a retried publish gets a later id).
"""
from __future__ import annotations

import time
from typing import Callable

import psycopg

from chaos.strategies.guards.base import APPLIED, STALE, Guard, Outcome
from chaos.params import Param
from chaos.events import Event

_ISOLATION = {"rc": "READ COMMITTED", "rr": "REPEATABLE READ", "serializable": "SERIALIZABLE"}


def entry_version(entry_id: str) -> int:
    """A stream entry id `ms-seq` as one orderable integer."""
    ms, _, seq = entry_id.partition("-")
    return int(ms) * 1_000_000 + int(seq or 0)


class Cas(Guard):
    name = "cas"
    summary = "compare-and-set UPDATE .. WHERE id AND version < $v, retry on serialization errors"
    params = (
        Param("version", "business", "what $v is", choices=("business", "entry_id")),
        Param("isolation", "rc", "transaction isolation", choices=tuple(_ISOLATION)),
        Param("max_retries", 20, "retries of a transaction that failed with 40001", minimum=0),
    )
    rejects_copies = True   # a copy carries a version that is no longer `<` the row's

    @property
    def rejects_older_versions(self) -> bool:  # type: ignore[override]
        """Only by business version: a retried publish gets a larger entry id than later events."""
        return self.version == "business"

    def apply(self, ev: Event, entry_id: str, work: Callable[[], None]) -> Outcome:
        version = ev.version if self.version == "business" else entry_version(entry_id)
        conn, attempt = self.env.pg(), 0
        while True:
            try:
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute(f"SET TRANSACTION ISOLATION LEVEL {_ISOLATION[self.isolation]}")
                    cur.execute("SELECT version FROM orders WHERE id = %s", (ev.key,))
                    if attempt == 0:
                        work()
                    written = self.write(cur, ev, version=version, if_older=True)
                    locked_at = time.monotonic()  # the row lock is held until COMMIT
                break
            except psycopg.errors.SerializationFailure as exc:
                attempt += 1
                self.env.op("info", "retry", **ev.op_fields(), entry_id=entry_id,
                            value={"attempt": attempt, "sqlstate": exc.sqlstate})
                if attempt > self.max_retries:
                    raise
        # `written` is the committed attempt's (a retry replaces a rolled-back attempt's)
        return Outcome(written, APPLIED if written else STALE,
                       {"status": ev.etype, "written_version": version, "retries": attempt, "locked_at": locked_at})
