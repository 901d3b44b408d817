"""The example team's domain code: apply an order event to PostgreSQL.

Shared by the three example consumers, as a team shares its domain module between
workers. It is the common "last write wins" upsert plus an e-mail per event, in one
transaction: correct only if the queue delivers each event once and in order.
"""
from __future__ import annotations

import psycopg

UPSERT_ORDER = (
    "INSERT INTO orders (id, status, version) VALUES (%s, %s, %s) "
    "ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, version = EXCLUDED.version"
)
RECORD_EMAIL = "INSERT INTO order_emails (event_id, order_id, status) VALUES (%s, %s, %s)"
UPSERT_IF_NEWER = UPSERT_ORDER + " WHERE orders.version < EXCLUDED.version"


def apply_event(conn: psycopg.Connection, order_id: str, status: str, version: int, event_id: str) -> None:
    """Write the order's new status and send (record) its e-mail, in one transaction."""
    with conn.transaction():
        conn.execute(UPSERT_ORDER, (order_id, status, int(version)))
        conn.execute(RECORD_EMAIL, (event_id, order_id, status))


def apply_event_if_newer(conn: psycopg.Connection, order_id: str, status: str, version: int,
                         event_id: str) -> bool:
    """The guarded variant: write only a newer business version, and send the e-mail only
    when the write happened (a redelivered or stale event changes nothing)."""
    with conn.transaction():
        changed = conn.execute(UPSERT_IF_NEWER, (order_id, status, int(version))).rowcount == 1
        if changed:
            conn.execute(RECORD_EMAIL, (event_id, order_id, status))
    return changed


async def apply_event_async(conn: psycopg.AsyncConnection, order_id: str, status: str, version: int,
                            event_id: str) -> None:
    """The same for asyncio workers."""
    async with conn.transaction():
        await conn.execute(UPSERT_ORDER, (order_id, status, int(version)))
        await conn.execute(RECORD_EMAIL, (event_id, order_id, status))
