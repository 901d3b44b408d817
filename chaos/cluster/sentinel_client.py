"""The Redis client a worker builds: straight to its proxy, or through Redis Sentinel.

In the sentinel topology a worker is given the Sentinels' addresses (their proxies) and
the master name, and asks them for the primary whenever it (re)connects, as production
clients do; after a failover it finds the new primary because Sentinel says so, not
because a proxy was repointed. Kept free of the topology's imports: worker processes
and black-box helpers import it.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import redis
from redis.sentinel import Sentinel

SENTINEL_TIMEOUT_S = 0.5    # one unreachable Sentinel must not stall a discovery for long


def _record_master(client: redis.Redis, on_master: Callable[[str], None]) -> None:
    """Call ``on_master("host:port")`` whenever Sentinel names a different primary, so a
    worker's history shows what it was told (redis-py asks on every new connection,
    through the pool's proxy object, which is where this hooks in)."""
    proxy = client.connection_pool.proxy
    ask = proxy.get_master_address
    told: list[str] = []

    def get_master_address():
        address = ask()
        text = f"{address[0]}:{address[1]}"
        if not told or told[-1] != text:
            told.append(text)
            on_master(text)
        return address

    proxy.get_master_address = get_master_address


def parse_sentinels(text: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"h:p,h:p"`` (or a list of ``"h:p"``) -> [(host, port), ...]."""
    items = text.split(",") if isinstance(text, str) else list(text)
    out = []
    for item in items:
        host, sep, port = item.strip().rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bad Sentinel address {item!r}: expected HOST:PORT, e.g. 127.0.0.1:26379")
        out.append((host, int(port)))
    return out


def redis_client(*, redis_url: str, sentinels: Sequence[str] = (), master_name: str = "",
                 on_master: Callable[[str], None] | None = None, **kwargs: Any) -> redis.Redis:
    """A client to the primary: through Sentinel when ``sentinels`` is given, else ``redis_url``.

    ``kwargs`` are redis-py connection options (timeouts, retry, protocol...), the same in
    both cases."""
    if not sentinels:
        return redis.Redis.from_url(redis_url, **kwargs)
    sentinel_kwargs = {"socket_timeout": SENTINEL_TIMEOUT_S, "socket_connect_timeout": SENTINEL_TIMEOUT_S,
                       "protocol": 2, "decode_responses": True}
    manager = Sentinel(parse_sentinels(sentinels), sentinel_kwargs=sentinel_kwargs)
    client = manager.master_for(master_name, **kwargs)
    if on_master is not None:
        _record_master(client, on_master)
    return client


def spec_client(spec: dict[str, Any], on_master: Callable[[str], None] | None = None, **kwargs: Any) -> redis.Redis:
    """``redis_client`` from a worker spec (keys ``redis_url`` and, optionally, ``sentinels``
    and ``master_name``)."""
    return redis_client(redis_url=spec["redis_url"], sentinels=spec.get("sentinels") or (),
                        master_name=spec.get("master_name") or "", on_master=on_master, **kwargs)
