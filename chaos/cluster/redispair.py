"""The two Redis nodes of a topology: which is primary, their admin clients, replication.

Nodes are named by their place in the *original* topology (a = primary, b = replica); a
failover swaps the roles, a reset puts them back. How a node is killed or started is the
backend's (chaos/cluster/topology.py's hooks); this module only talks to running servers.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import redis

from chaos.cluster.endpoint import Endpoint
from chaos.cluster.errors import ClusterError
from chaos.cluster.redis_server import admin_client

AOF_READY_TIMEOUT_S = 10.0


@dataclass
class RedisNode:
    """One redis-server, named by its place in the *original* topology (a = primary, b = replica)."""

    id: str
    endpoint: Endpoint        # direct address from this process
    upstream: str             # the address proxies dial to reach it
    appendonly: bool = False
    appendfsync: str = "everysec"


class RedisPair:
    """Node a and node b, the current primary and replica, and a kept admin client per address."""

    def __init__(self, a: RedisNode, b: RedisNode):
        self.a, self.b = a, b
        self.primary, self.replica = a, b
        self._admins: dict[str, redis.Redis] = {}

    def node(self, role: str) -> RedisNode:
        if role == "primary":
            return self.primary
        if role == "replica":
            return self.replica
        raise ValueError(f"unknown node {role!r}: use 'primary' or 'replica'")

    def by_id(self, node_id: str) -> RedisNode:
        return self.a if node_id == "a" else self.b

    def swap(self) -> None:
        """The replica is the primary now (a failover)."""
        self.primary, self.replica = self.replica, self.primary

    def restore(self) -> None:
        """Back to the original roles: a primary, b replica."""
        self.primary, self.replica = self.a, self.b

    def admin(self, node: RedisNode) -> redis.Redis:
        """A kept admin client per node address (a reset makes ~10 calls: no reconnect each time)."""
        key = str(node.endpoint)
        client = self._admins.get(key)
        if client is None:
            client = self._admins[key] = admin_client(node.endpoint.host, node.endpoint.port)
        return client

    def attach(self, node: RedisNode, source: Endpoint) -> None:
        """REPLICAOF ``source`` (the replication proxy, as the replica sees it)."""
        self.admin(node).execute_command("REPLICAOF", source.host, source.port)

    def info(self) -> dict[str, dict]:
        """INFO replication of both nodes, keyed 'primary' / 'replica' ({} for a dead node)."""
        out = {}
        for role, node in (("primary", self.primary), ("replica", self.replica)):
            try:
                out[role] = self.admin(node).info("replication")
            except redis.RedisError:
                out[role] = {}
        return out

    def wait_synced(self, timeout: float, link: str) -> None:
        """Until the replica's link is up and it has applied all the primary has sent; ``link``
        names the replication proxy in the error."""
        deadline = time.monotonic() + timeout
        primary, replica = self.admin(self.primary), self.admin(self.replica)
        target = primary.info("replication")["master_repl_offset"]
        info: dict = {}
        while time.monotonic() < deadline:
            info = replica.info("replication")
            if info.get("master_link_status") == "up" and info.get("slave_repl_offset", -1) >= target:
                return
            time.sleep(0.002)
        raise ClusterError(f"replica {self.replica.endpoint} not in sync with primary {self.primary.endpoint} after "
                           f"{timeout} s (link {info.get('master_link_status')}, replica offset "
                           f"{info.get('slave_repl_offset')}, primary offset {target}); is the replication proxy "
                           f"{link!r} cut or toxic?")

    def arm_aof(self, node: RedisNode) -> None:
        """Turn the AOF on in the running server (it rewrites the current data into it) and wait."""
        client = self.admin(node)
        client.config_set("appendfsync", node.appendfsync)
        client.config_set("appendonly", "yes")
        deadline = time.monotonic() + AOF_READY_TIMEOUT_S
        while time.monotonic() < deadline:
            info = client.info("persistence")
            if (info.get("aof_enabled") == 1 and not info.get("aof_rewrite_in_progress")
                    and not info.get("aof_rewrite_scheduled")):
                return
            time.sleep(0.005)
        raise ClusterError(f"redis {node.endpoint} did not finish writing its AOF in {AOF_READY_TIMEOUT_S} s")

    def empty(self, source: Endpoint, attach: Callable[[RedisNode], None]) -> None:
        """Both nodes running, back in the original roles: a an empty primary (no pause, no AOF,
        no scripts or functions), b its replica through ``source`` (``attach`` re-attaches it)."""
        self.restore()
        client = self.admin(self.a)
        client.execute_command("CLIENT", "UNPAUSE")
        if client.info("replication")["role"] != "master":
            client.execute_command("REPLICAOF", "NO", "ONE")
        client.config_set("appendonly", "no")     # a fault may have switched the AOF on by CONFIG SET
        client.flushall()
        client.script_flush()
        client.function_flush()
        client = self.admin(self.b)
        client.execute_command("CLIENT", "UNPAUSE")
        info = client.info("replication")
        if (info["role"] != "slave" or info.get("master_port") != source.port
                or info.get("master_host") != source.host):
            if info["role"] == "master":
                client.flushall()      # what it took as primary must not survive (a full sync follows anyway)
            attach(self.b)
        elif info.get("master_link_status") != "up":
            # REPLICAOF to the same master is a no-op: detach first so it reconnects now, not at
            # the next once-a-second retry (a partial resync: the replication id is kept)
            client.execute_command("REPLICAOF", "NO", "ONE")
            attach(self.b)

    def close(self) -> None:
        for client in self._admins.values():
            client.close()
