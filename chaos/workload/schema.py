"""The consumer side's tables, and the fast per-run reset (truncate + flush, not a new database).

* `orders`: the state a consumer maintains (status, version) per order id; the checker
  compares it with the highest published business version. `write_seq` counts the row's
  writes (the guards' effect write bumps and returns it): the commit order of a key's
  writes, restarting at 0 each run (rows are truncated and seeded).
* `projection`: an effect counter per key, bumped in the same transaction as the state
  write, so double-applied events show up as drift.
* `inbox`: processed event ids, for the inbox guard.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator

import psycopg

from chaos.results import FinalRows

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, status text NOT NULL, version bigint NOT NULL,
                                   write_seq bigint NOT NULL DEFAULT 0);
ALTER TABLE orders ADD COLUMN IF NOT EXISTS write_seq bigint NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS projection (key text PRIMARY KEY, count integer NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS inbox (event_id text PRIMARY KEY, seen_at timestamptz NOT NULL DEFAULT clock_timestamp());
"""
INITIAL_STATUS = "new"


def ensure_schema(conn: psycopg.Connection) -> None:
    """Create the tables if missing (idempotent; the cluster hands out an empty database)."""
    conn.execute(SCHEMA)


def truncate_all(conn: psycopg.Connection) -> None:
    """Empty every table in schema public, including other parts' tables (outbox)."""
    tables = [r[0] for r in conn.execute(
        "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'public'").fetchall()]
    if tables:
        conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY")


def seed_rows(conn: psycopg.Connection, keys: Iterable[str]) -> None:
    """One `orders` row (status new, version 0, write_seq 0) and one projection row per key.
    One statement: the key array is sent and unnested once for both tables (10^6 keys: 14.7 s
    instead of 28.2 s of wall time at load 10-15, client CPU 1.4 s instead of 2.2 s)."""
    keys = sorted(set(keys))
    conn.execute("WITH k AS (SELECT unnest(%s::text[]) AS k), "
                 "o AS (INSERT INTO orders (id, status, version) SELECT k, %s, 0 FROM k) "
                 "INSERT INTO projection (key, count) SELECT k, 0 FROM k", (keys, INITIAL_STATUS))


PAGE_ROWS = 10_000   # rows per round trip of a server-side cursor


def _paged(conn: psycopg.Connection, query: str) -> Iterator[tuple]:
    """`query`'s rows through a server-side cursor, PAGE_ROWS at a time: the client never holds
    the whole result as well as what is built from it (10^6 rows: ~100 MB of libpq's result)."""
    with conn.transaction(), conn.cursor(name="chaos_final_rows") as cur:
        cur.itersize = PAGE_ROWS
        cur.execute(query)
        yield from cur


SHARED_ROWS = 4096   # distinct (status, version) rows read_rows hands out as one shared dict each


def read_rows(conn: psycopg.Connection) -> FinalRows:
    """Each key's row, {"status", "version"}, as FinalRows (the keys and their rows in read
    order, no hash table over 10^6 keys). Keys are interned (the checker interns the history's
    keys to the same copies). Rows equal in both are one dict, read-only (10^6 keys hold a few
    dozen distinct rows: 184 B per key less); past SHARED_ROWS distinct ones, each gets its own."""
    rows = FinalRows()
    _read_rows(conn, rows.keys_read, rows.rows)
    return rows


def read_rows_behind(conn: psycopg.Connection) -> FinalRows:
    """`read_rows`, on a connection of its own to `conn`'s database, in a thread (FinalRows.behind):
    PostgreSQL reads and sends 10^6 rows while the caller goes on (the checker folds the history
    and Redis's lists meanwhile; at load 20 the check waited ~4 s of its 6.9 s read on them). The
    rows' first use waits for the read, and raises its error there."""
    dsn, password = conn.info.dsn, conn.info.password

    def read(keys: list[str], values: list[dict]) -> None:
        with psycopg.connect(dsn, password=password or None, autocommit=True) as own:
            _read_rows(own, keys, values)
    return FinalRows.behind(read)


def _read_rows(conn: psycopg.Connection, keys: list[str], values: list[dict]) -> None:
    intern = sys.intern
    shared: dict[tuple, dict] = {}
    for k, s, v in _paged(conn, "SELECT id, status, version FROM orders"):
        row = shared.get((s, v))
        if row is None:
            row = {"status": intern(s), "version": v}
            if len(shared) < SHARED_ROWS:
                shared[s, v] = row
        keys.append(intern(k))
        values.append(row)


def read_projection(conn: psycopg.Connection) -> dict[str, int]:
    intern = sys.intern   # (the keys the rows and the checker hold: one copy each)
    return {intern(k): n for k, n in projection_rows(conn)}


def projection_rows(conn: psycopg.Connection, nonzero: bool = False) -> Iterator[tuple[str, int]]:
    """(key, count) of every projection row (`nonzero`: those whose count is not 0), in
    read_projection's order (the table's), a page at a time."""
    return _paged(conn, "SELECT key, count FROM projection" + (" WHERE count <> 0" if nonzero else ""))


def read_outbox(conn: psycopg.Connection) -> list[dict]:
    """Outbox rows if the outbox workload made its table (its schema belongs to chaos.workload.outbox)."""
    exists = conn.execute("SELECT to_regclass('public.outbox') IS NOT NULL").fetchone()[0]
    if not exists:
        return []
    cols = {r[0] for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'outbox'")}
    published = "published_at IS NOT NULL" if "published_at" in cols else "published"
    rows = conn.execute(f"SELECT id, event_id, key, version, {published} FROM outbox ORDER BY id").fetchall()
    return [{"id": i, "event_id": e, "key": k, "version": v, "published": bool(p)} for i, e, k, v, p in rows]
