"""An empty database ``chaos`` at every reset in a few ms instead of ~25-350 ms.

CREATE DATABASE copies template1 and DROP DATABASE checkpoints; both vary a lot on a
loaded machine, while a rename is instant. So a spare database is kept ready: a reset
renames ``chaos`` away, renames ``chaos_spare`` to ``chaos``, and drops the old one and
makes the next spare on a background thread while the test runs.
"""
from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor

import psycopg

from chaos.cluster.endpoint import Endpoint
from chaos.cluster.postgres_server import admin_connect

DBNAME = "chaos"
SPARE = "chaos_spare"
TRASH = "chaos_trash"
SPARE_TIMEOUT_S = 60.0
TERMINATE_WAIT_S = 2.0
TERMINATE_POLL_S = 0.002


class FreshDatabase:
    """Owns the life cycle of database ``chaos`` on one PostgreSQL server."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self._conn: psycopg.Connection | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="chaos-pg-spare")
        self._spare: Future | None = None

    def prepare(self) -> None:
        """Create ``chaos`` if missing (a server not made from our template); the spare in the background."""
        have = {row[0] for row in self._admin().execute("SELECT datname FROM pg_database")}
        if DBNAME not in have:
            try:
                self._admin().execute(f"CREATE DATABASE {DBNAME}")
            except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                pass          # made meanwhile by another user of this server
        if SPARE not in have:
            self._spare = self._pool.submit(self._make_spare)

    def renew(self) -> None:
        """Replace ``chaos`` by an empty database (connections to the old one are terminated).

        The old one is renamed away and dropped in the background with the next spare's
        creation: DROP DATABASE itself costs 10-40 ms here.
        """
        spare_ready = self._wait_spare()
        conn = self._admin()
        self._terminate_sessions(conn)
        try:
            conn.execute(f"ALTER DATABASE {DBNAME} RENAME TO {TRASH}")
        except (psycopg.errors.ObjectInUse, psycopg.errors.DuplicateDatabase, psycopg.errors.InvalidCatalogName):
            # a client reconnected meanwhile, or a trash is left over, or there is no chaos at all
            conn.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")
        if spare_ready:
            conn.execute(f"ALTER DATABASE {SPARE} RENAME TO {DBNAME}")
        else:
            conn.execute(f"CREATE DATABASE {DBNAME}")
        self._spare = self._pool.submit(self._make_spare)

    @staticmethod
    def _terminate_sessions(conn: psycopg.Connection) -> None:
        """End every session on ``chaos`` and wait until they are gone (a rename waits for them in
        100 ms steps, as does pg_terminate_backend's own timeout: a reset paid ~100 ms whenever
        a session was left, e.g. a dead worker's, which its proxy closes a moment later)."""
        others = "FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
        conn.execute(f"SELECT pg_terminate_backend(pid) {others}", (DBNAME,))
        deadline = time.monotonic() + TERMINATE_WAIT_S
        while conn.execute(f"SELECT count(*) {others}", (DBNAME,)).fetchone()[0] and time.monotonic() < deadline:
            time.sleep(TERMINATE_POLL_S)

    def wait_idle(self) -> None:
        """Wait until the background spare is made (before someone else touches this server)."""
        self._wait_spare()

    def _wait_spare(self) -> bool:
        if self._spare is None:
            return True          # made with the template / by prepare()
        try:
            self._spare.result(SPARE_TIMEOUT_S)
            return True
        except Exception:  # noqa: BLE001 - fall back to a synchronous CREATE
            return False

    def _make_spare(self) -> None:
        with admin_connect(self.endpoint.host, self.endpoint.port) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {TRASH} WITH (FORCE)")
            conn.execute(f"DROP DATABASE IF EXISTS {SPARE} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {SPARE}")

    def _admin(self) -> psycopg.Connection:
        if self._conn is not None and not self._conn.closed:
            try:
                self._conn.execute("SELECT 1")
                return self._conn
            except psycopg.Error:
                self._conn.close()
        self._conn = admin_connect(self.endpoint.host, self.endpoint.port)
        return self._conn

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._conn is not None:
            self._conn.close()
            self._conn = None
