"""An order consumer written with taskiq-redis's stream broker, as its docs show.

Run by the framework as ``taskiq worker examples.taskiq_orders:broker --workers 1 --max-async-tasks 10``
(from the repository root); the endpoints come from the CHAOS_* environment variables.
The broker reads the stream in the consumer group with XREADGROUP and acknowledges
after the task ran (taskiq's default ack type, ``when_saved``); ``idle_timeout`` is the
XAUTOCLAIM min-idle-time after which another worker takes a dead worker's entries
(taskiq-redis's default is 10 minutes, shortened here as a team would for tests).
"""
from __future__ import annotations

import asyncio
import os

import psycopg
from taskiq_redis import RedisStreamBroker

from examples.orders_db import apply_event_async

WORK_S = float(os.environ.get("ORDERS_WORK_MS", "0")) / 1000

broker = RedisStreamBroker(
    url=os.environ["CHAOS_REDIS_URL"],
    queue_name=os.environ.get("CHAOS_STREAM", "orders"),
    consumer_group_name=os.environ.get("CHAOS_GROUP", "workers"),
    consumer_name=os.environ.get("CHAOS_CONSUMER"),
    idle_timeout=int(os.environ.get("ORDERS_IDLE_TIMEOUT_MS", "1000")),
    xread_block=200,
)


@broker.task
async def apply_order_event(order_id: str, status: str, version: int, event_id: str) -> None:
    """Project one order event into PostgreSQL."""
    await asyncio.sleep(WORK_S)  # the job's own cost
    async with await psycopg.AsyncConnection.connect(os.environ["CHAOS_PG_DSN"]) as conn:
        await apply_event_async(conn, order_id, status, version, event_id)
