"""The topology every suite stands on: Redis primary + replica and PostgreSQL behind proxies.

```
 tools / workers ──> proxy "redis" | "<worker>.redis"       ──> Redis primary (node a)
 tools / workers ──> proxy "replica" | "<worker>.replica"   ──> Redis replica (node b)
 tools / workers ──> proxy "postgres" | "<worker>.postgres" ──> PostgreSQL
 node b ──(REPLICAOF)──> proxy "replication" ──> node a
```

This module holds what does not depend on how servers run (failover, reset, links);
backends (native.py, compose.py, external.py) subclass ``Cluster`` and say how a Redis
node is killed and started again.
"""
from __future__ import annotations

import atexit
import shutil
import threading
import warnings
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import psycopg
import redis

from chaos.cluster.endpoint import Endpoint, WorkerLinks, pg_dsn, redis_url
from chaos.cluster.errors import Unsupported
from chaos.cluster.database import DBNAME, FreshDatabase
from chaos.cluster.proxymap import ProxyMap
from chaos.cluster.redis_server import admin_client
from chaos.cluster.redispair import RedisNode, RedisPair
from chaos.cluster.rundirs import KeptRuns
from chaos.proxy.client import ToxiproxyClient

if TYPE_CHECKING:
    from chaos.cluster.health import Component

__all__ = ["Cluster", "RedisNode", "LINKS"]

LINKS = ("redis", "replica", "postgres", "replication")
START_SYNC_TIMEOUT_S = 30.0     # generous: a loaded 2-core machine, and a replica's first full sync
RESET_SYNC_TIMEOUT_S = 15.0


class Cluster:
    """One isolated topology (one per xdist worker); see docs/INTERFACES.md section 3.

    Its parts: ``proxies`` (chaos/cluster/proxymap.py), ``nodes`` (the Redis pair, chaos/cluster/redispair.py)
    and the PostgreSQL database (chaos/cluster/database.py); this class ties them into the topology's
    operations and leaves to a backend how a Redis server is killed and started."""

    backend: ClassVar[str] = "abstract"
    topology_text: ClassVar[str] = "replica"      # as --topology writes it (what a replay names)
    server: str | None = None       # the server named at the edge (`redis`, `valkey`), else None: set by start_cluster

    def __init__(self, name: str, base_dir: Path, api: ToxiproxyClient, nodes: tuple[RedisNode, RedisNode],
                 postgres: Endpoint, postgres_upstream: str, proxy_prefix: str = "", listen_host: str = "127.0.0.1"):
        self.name = name
        self.base_dir = base_dir
        self.api = api
        self.proxies = ProxyMap(api, proxy_prefix, listen_host)
        self.nodes = RedisPair(*nodes)
        self.postgres = postgres
        self._postgres_upstream = postgres_upstream
        self.links = {link: f"{proxy_prefix}{link}" for link in LINKS}
        self._workers: dict[str, WorkerLinks] = {}
        self._lock = threading.RLock()
        self._database = FreshDatabase(postgres)
        self._kept = KeptRuns(name, base_dir)
        self.failed_over = False
        self.closed = False
        _OPEN.add(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} primary={self.primary} replica={self.replica} pg={self.postgres}>"

    # -- addresses ---------------------------------------------------------------------
    @property
    def primary(self) -> Endpoint:
        return self.nodes.primary.endpoint

    @property
    def replica(self) -> Endpoint:
        return self.nodes.replica.endpoint

    def proxy_endpoint(self, proxy: str) -> Endpoint:
        return self.proxies.endpoint(proxy)

    def redis_url(self, link: str = "redis") -> str:
        return redis_url(self.proxy_endpoint(self._link(link)))

    def pg_dsn(self, link: str = "postgres") -> str:
        return pg_dsn(self.proxy_endpoint(self._link(link)), DBNAME)

    def _link(self, link: str) -> str:
        if link not in self.links:
            raise ValueError(f"unknown link {link!r}: the shared links are {', '.join(self.links)}")
        return self.links[link]

    # -- clients -----------------------------------------------------------------------
    def direct_redis(self, node: str = "primary") -> redis.Redis:
        """A client straight to a node (no proxy): for final-state reads and admin."""
        endpoint = self._node(node).endpoint
        return redis.Redis(host=endpoint.host, port=endpoint.port, decode_responses=True, protocol=2)

    def pg_connect(self, **kw) -> psycopg.Connection:
        """A direct (no proxy) autocommit connection to database ``chaos``."""
        kw.setdefault("autocommit", True)
        return psycopg.connect(host=self.postgres.host, port=self.postgres.port, dbname=DBNAME,
                               user="postgres", **kw)

    def _node(self, node: str) -> RedisNode:
        return self.nodes.node(node)

    # -- worker links --------------------------------------------------------------------
    def worker_links(self, name: str) -> WorkerLinks:
        """The proxies of one worker process (made once per name; removed by reset())."""
        with self._lock:
            if name not in self._workers:
                names, ends = self.proxies.make_worker(name, {
                    "redis": self.nodes.primary.upstream, "replica": self.nodes.replica.upstream,
                    "postgres": self._postgres_upstream})
                self._workers[name] = WorkerLinks(
                    name=name, redis_url=redis_url(ends["redis"]), replica_url=redis_url(ends["replica"]),
                    pg_dsn=pg_dsn(ends["postgres"], DBNAME), proxies=names)
            return self._workers[name]

    # -- start-up (called by a backend once its servers answer) ----------------------------
    def _create_links(self) -> None:
        self.proxies.make(self._desired_upstreams())
        self._attach_replica(self.nodes.b)
        self.wait_replication(START_SYNC_TIMEOUT_S)
        self._database.prepare()

    def _desired_upstreams(self) -> dict[str, str]:
        """Shared proxy -> upstream in the original topology."""
        a, b = self.nodes.a.upstream, self.nodes.b.upstream
        return {self.links["redis"]: a, self.links["replica"]: b,
                self.links["postgres"]: self._postgres_upstream, self.links["replication"]: a}

    def replication_source(self) -> Endpoint:
        """Where the replica dials to replicate: the replication proxy, as the replica sees it."""
        return self.proxy_endpoint(self.links["replication"])

    def _attach_replica(self, node: RedisNode) -> None:
        self.nodes.attach(node, self.replication_source())

    # -- replication -----------------------------------------------------------------------
    def replication_info(self) -> dict[str, dict]:
        """INFO replication of both nodes, keyed 'primary' / 'replica' ({} for a dead node)."""
        return self.nodes.info()

    def wait_replication(self, timeout: float = 5.0) -> None:
        """Wait until the replica's link is up and it has applied all the primary has sent."""
        self.nodes.wait_synced(timeout, self.links["replication"])

    # -- faults ------------------------------------------------------------------------------
    def redis_pid(self, node: str = "primary") -> int | None:
        return self._node_pid(self._node(node))

    def kill_primary(self) -> None:
        """SIGKILL the current primary (a real crash; nothing is saved)."""
        self._kill_node(self.nodes.primary)

    def promote_replica(self) -> None:
        """Fail over: REPLICAOF NO ONE on the replica, repoint every proxy that led to the primary."""
        with self._lock:
            old, new = self.nodes.primary, self.nodes.replica
            self.nodes.admin(new).execute_command("REPLICAOF", "NO", "ONE")
            self.proxies.repoint(old.upstream, new.upstream, skip={self.links["replication"]})
            self.nodes.swap()
            self.failed_over = True

    def restart_primary(self, *, appendonly: bool = False, appendfsync: str = "everysec", kill: bool = True) -> None:
        """Stop the primary (SIGKILL if ``kill``, else a clean shutdown) and start it on the same port
        and dir with the given persistence. Data survives only through an AOF the server was already
        writing: restart once with ``appendonly=True`` to arm it, then crash it."""
        if appendfsync not in ("always", "everysec", "no"):
            raise ValueError(f"bad appendfsync {appendfsync!r}: use always, everysec or no")
        with self._lock:
            node = self.nodes.primary
            old_upstream = node.upstream
            if appendonly and not node.appendonly and self._node_alive(node):
                node.appendfsync = appendfsync
                self.nodes.arm_aof(node)
                node.appendonly = True
            if kill:
                self._kill_node(node)
            else:
                self._shutdown_node(node)
            node.appendonly, node.appendfsync = appendonly, appendfsync
            self._start_node(node)
            if node.upstream != old_upstream:     # a new port: the old one was taken meanwhile
                self.proxies.repoint(old_upstream, node.upstream)

    # -- reset ---------------------------------------------------------------------------------
    def reset(self) -> None:
        """Back to the original, empty topology: see INTERFACES.md section 3 for the list."""
        with self._lock:
            self._resume_servers()
            self.proxies.reset(self._desired_upstreams())
            for node in (self.nodes.a, self.nodes.b):
                if not self._node_alive(node) or node.appendonly:
                    node.appendonly, node.appendfsync = False, "everysec"
                    self._restart_clean(node)
            self.nodes.empty(self.replication_source(), self._attach_replica)
            self.wait_replication(RESET_SYNC_TIMEOUT_S)
            self._database.renew()
            self._workers.clear()
            self.failed_over = False

    def _restart_clean(self, node: RedisNode) -> None:
        old = node.upstream
        if self._node_alive(node):
            self._kill_node(node)
        self._start_node(node)
        if node.upstream != old:
            self.proxies.repoint(old, node.upstream)

    # -- health (chaos/cluster/health.py) ------------------------------------------------------------
    def components(self) -> list["Component"]:
        """The servers and proxies this topology stands on, for ``health.rig_problems``; here
        probed over the network (the servers are not our processes)."""
        from chaos.cluster.health import endpoint_components
        return endpoint_components(self)

    # -- backend hooks -----------------------------------------------------------------------------
    def _node_pid(self, node: RedisNode) -> int | None:
        return None

    def _node_alive(self, node: RedisNode) -> bool:
        try:
            with admin_client(node.endpoint.host, node.endpoint.port, timeout=0.5) as client:
                return bool(client.ping())
        except redis.RedisError:
            return False

    def _resume_servers(self) -> None:
        """Undo a SIGSTOP a test may have left on any server (only where the processes are ours)."""

    def _kill_node(self, node: RedisNode) -> None:
        raise Unsupported(f"the {self.backend} backend cannot kill a Redis server; use the native backend")

    def _shutdown_node(self, node: RedisNode) -> None:
        self._kill_node(node)

    def _start_node(self, node: RedisNode) -> None:
        raise Unsupported(f"the {self.backend} backend cannot start a Redis server; use the native backend")

    def _close_servers(self) -> None:
        """Stop what the backend started."""

    # -- end -----------------------------------------------------------------------------------------
    @classmethod
    def start(cls, name: str, **options) -> "Cluster":
        raise NotImplementedError

    def rebuild(self, reason: str = "") -> None:
        """Replace every server by fresh ones, in place, so holders of this object (the session
        fixture) see the new topology. For a fault that could not be healed."""
        warnings.warn(f"chaos cluster {self.name} rebuilt: {reason or 'asked to'}", stacklevel=2)
        with self._lock:
            self.close()
            fresh = type(self).start(self.name, server=self.server)
            _OPEN.discard(fresh)
            self.__dict__.update(fresh.__dict__)
            _OPEN.add(self)

    def close(self) -> None:
        """Stop every server and proxy of this cluster and remove its dir (kept runs are moved out)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            _OPEN.discard(self)
            try:
                self._close_servers()
            finally:
                self.nodes.close()
                self._database.close()       # after the server stopped: an in-flight CREATE fails fast
                self.api.close()
                self._kept.close()
                shutil.rmtree(self.base_dir, ignore_errors=True)

    @property
    def runs_dir(self) -> Path:
        """Where run dirs go: ``<base>/.kept/<cluster>/`` (rundirs.KeptRuns), bounded by rundirs.retain."""
        return self._kept.path

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_OPEN: "weakref.WeakSet[Cluster]" = weakref.WeakSet()


@atexit.register
def _close_open_clusters() -> None:
    """Last resort for paths where no fixture teardown ran (an exception, a Ctrl-C at the wrong time)."""
    for cluster in list(_OPEN):
        try:
            cluster.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
