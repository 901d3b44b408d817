"""The orchestrator's own Redis client, which follows the primary through a failover."""
from __future__ import annotations

import time
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

FOLLOW_RETRY_S = 5.0        # how long a Redis call waits for a primary to answer (a failover's downtime)
FOLLOW_RETRY_EVERY_S = 0.005
CALL_TIMEOUT_S = 10.0       # the orchestrator's own Redis/PostgreSQL calls: a stopped server cannot hang a run


class PrimaryRedis:
    """The orchestrator's Redis client: every call goes to the node that is the primary at
    that moment (a failover moves it), and a refused connection is retried for a bounded
    time (between a primary's kill and the promotion no node answers). One client is kept
    per address, so polling costs no reconnect."""

    def __init__(self, cluster: Any, retry_s: float = FOLLOW_RETRY_S) -> None:
        self._cluster, self._retry_s = cluster, retry_s
        self._clients: dict[str, redis.Redis] = {}
        self._gone = False

    def client(self) -> redis.Redis:
        """The current primary's client, without retries (for a poll that may say "not yet")."""
        if self._gone:
            raise redis.ConnectionError("the Redis primary failed under the run (a rig failure): not asked again")
        address = str(self._cluster.primary)
        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = self._cluster.direct_redis("primary")
            # redis-py's own retries back off up to ~4 s against a node a failover just killed,
            # while the promoted one already answers: retry here, on the primary of the moment
            client.set_retry(Retry(NoBackoff(), 0))
            client.connection_pool.connection_kwargs.update(socket_timeout=CALL_TIMEOUT_S,
                                                            socket_connect_timeout=CALL_TIMEOUT_S)
        return client

    def give_up(self) -> None:
        """No more retrying (the rig failed: a dead server does not come back within the run)."""
        self._retry_s = 0.0

    def disconnect(self) -> None:
        """Close every connection, in use or not, and refuse new calls: a call blocked on a
        stopped primary returns, and none waits on it again."""
        self._gone = True
        for client in list(self._clients.values()):
            try:
                client.connection_pool.disconnect()
            except Exception:  # noqa: BLE001 - best effort: the call then ends at its own timeout
                pass

    def __getattr__(self, name: str) -> Any:
        if not callable(getattr(redis.Redis, name, None)):
            return getattr(self.client(), name)

        def call(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            while True:
                try:
                    return getattr(self.client(), name)(*args, **kwargs)
                except (redis.ConnectionError, redis.TimeoutError):
                    if time.monotonic() > started + self._retry_s:     # give_up() ends it at once
                        raise
                    time.sleep(FOLLOW_RETRY_EVERY_S)
        return call

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
