"""An order consumer written with FastStream's Redis stream subscriber in a consumer group.

As FastStream's docs show: one subscriber reads new entries of the group
(``StreamSub(stream, group=..., consumer=...)``, XREADGROUP ``>``) and a second
subscriber on the same group with ``min_idle_time`` re-claims entries that a dead
consumer left pending (XAUTOCLAIM). Acknowledgement is FastStream's default for
streams in a group: XACK after the handler returned. Run from the repository root as
``python -m examples.faststream_orders``.
"""
from __future__ import annotations

import asyncio
import os

import psycopg
from faststream import FastStream
from faststream.redis import RedisBroker, StreamSub

from examples.orders_db import apply_event_async

STREAM = os.environ.get("CHAOS_STREAM", "orders")
GROUP = os.environ.get("CHAOS_GROUP", "workers")
CONSUMER = os.environ.get("CHAOS_CONSUMER", "orders-1")
IDLE_MS = int(os.environ.get("ORDERS_IDLE_TIMEOUT_MS", "1000"))
WORK_S = float(os.environ.get("ORDERS_WORK_MS", "0")) / 1000  # the job's own cost

broker = RedisBroker(os.environ["CHAOS_REDIS_URL"])
app = FastStream(broker)


async def project(order_id: str, status: str, version: int, event_id: str) -> None:
    await asyncio.sleep(WORK_S)
    async with await psycopg.AsyncConnection.connect(os.environ["CHAOS_PG_DSN"]) as conn:
        await apply_event_async(conn, order_id, status, version, event_id)


@broker.subscriber(stream=StreamSub(STREAM, group=GROUP, consumer=CONSUMER, polling_interval=200))
async def handle_order_event(order_id: str, status: str, version: int, event_id: str) -> None:
    await project(order_id, status, version, event_id)


@broker.subscriber(stream=StreamSub(STREAM, group=GROUP, consumer=f"{CONSUMER}-reclaim",
                                    min_idle_time=IDLE_MS, polling_interval=200))
async def reclaim_order_event(order_id: str, status: str, version: int, event_id: str) -> None:
    await project(order_id, status, version, event_id)


if __name__ == "__main__":
    asyncio.run(app.run())
