"""The compare-and-set consumer (examples/redis_py_cas.py) as many teams first deploy it
behind Redis Sentinel: it connects to one address (``CHAOS_REDIS_URL``) and never asks
Sentinel where the primary is. Run as ``python -m examples.redis_py_pinned``.

After a Sentinel failover that address is the old primary, demoted to a replica: every
XREADGROUP answers ``READONLY``. The consumer stays up and retries the same address
forever, so it never consumes again; the framework must call that a finding
(``stopped-consuming``, verdict invalid), not unsettled state. Its twin that asks Sentinel
is examples/redis_py_sentinel.py.
"""
from __future__ import annotations

import os

import psycopg
import redis

from examples.redis_py_cas import consume


def main() -> None:
    r = redis.Redis.from_url(os.environ["CHAOS_REDIS_URL"], decode_responses=True, protocol=2)
    # Any Redis error (a cut link, READONLY from a demoted primary): wait and retry the same address.
    consume(r, psycopg.connect(os.environ["CHAOS_PG_DSN"], autocommit=True), retry_on=redis.RedisError)


if __name__ == "__main__":
    main()
