"""A view of a Cluster whose direct Redis clients follow a failover.

An orchestrator that takes ``cluster.direct_redis()`` once and polls it keeps talking to
the primary promote-replica killed, and between the kill and the promotion no primary
answers at all. Through this view every call goes to the node that is the primary (or
replica) at that moment, and a refused connection is retried for a bounded time.
"""
from __future__ import annotations

import time
from typing import Any

import redis

RETRY_S = 5.0
RETRY_EVERY_S = 0.005


class FollowingRedis:
    """Forwards each call to ``cluster.direct_redis(node)`` of the moment (cached per address)."""

    def __init__(self, cluster: Any, node: str) -> None:
        self._cluster, self._node = cluster, node
        self._clients: dict[str, redis.Redis] = {}

    def _client(self) -> redis.Redis:
        address = str(getattr(self._cluster, self._node))
        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = self._cluster.direct_redis(self._node)
        return client

    def __getattr__(self, name: str) -> Any:
        if not callable(getattr(redis.Redis, name, None)):
            return getattr(self._client(), name)

        def call(*args: Any, **kwargs: Any) -> Any:
            deadline = time.monotonic() + RETRY_S
            while True:
                try:
                    return getattr(self._client(), name)(*args, **kwargs)
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(RETRY_EVERY_S)
        return call

    def close(self) -> None:
        for client in self._clients.values():
            client.close()


class FollowingCluster:
    """The cluster, except that ``direct_redis`` returns a FollowingRedis."""

    def __init__(self, cluster: Any) -> None:
        self._cluster = cluster
        self._views: dict[str, FollowingRedis] = {}

    def direct_redis(self, node: str = "primary") -> FollowingRedis:
        if node not in self._views:
            self._views[node] = FollowingRedis(self._cluster, node)
        return self._views[node]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)

    def unwrap(self) -> Any:
        return self._cluster
