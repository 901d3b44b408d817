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
import re
import shutil
import threading
import time
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import psycopg
import redis

from chaos.cluster.endpoint import Endpoint, WorkerLinks, pg_dsn, redis_url
from chaos.cluster.errors import ClusterError, Unsupported
from chaos.cluster.database import DBNAME, FreshDatabase
from chaos.cluster.redis_server import admin_client
from chaos.cluster.rundirs import close_runs_dir, open_runs_dir
from chaos.proxy.client import ToxiproxyClient

if TYPE_CHECKING:
    from chaos.cluster.health import Component

LINKS = ("redis", "replica", "postgres", "replication")
START_SYNC_TIMEOUT_S = 30.0     # generous: a loaded 2-core machine, and a replica's first full sync
RESET_SYNC_TIMEOUT_S = 15.0
AOF_READY_TIMEOUT_S = 10.0
_NAME_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,62}$")


@dataclass
class RedisNode:
    """One redis-server, named by its place in the *original* topology (a = primary, b = replica)."""

    id: str
    endpoint: Endpoint        # direct address from this process
    upstream: str             # the address proxies dial to reach it
    appendonly: bool = False
    appendfsync: str = "everysec"


class Cluster:
    """One isolated topology (one per xdist worker); see docs/INTERFACES.md section 3."""

    backend: ClassVar[str] = "abstract"

    def __init__(self, name: str, base_dir: Path, api: ToxiproxyClient, nodes: tuple[RedisNode, RedisNode],
                 postgres: Endpoint, postgres_upstream: str, proxy_prefix: str = "", listen_host: str = "127.0.0.1"):
        self.name = name
        self.base_dir = base_dir
        self.api = api
        self._a, self._b = nodes
        self._primary, self._replica = self._a, self._b
        self.postgres = postgres
        self._postgres_upstream = postgres_upstream
        self._prefix = proxy_prefix
        self._listen_host = listen_host            # where proxies listen (an address of the proxy server)
        self.links = {link: f"{proxy_prefix}{link}" for link in LINKS}
        self._listen: dict[str, Endpoint] = {}    # proxy name -> where it listens (fixed at creation)
        self._workers: dict[str, WorkerLinks] = {}
        self._admins: dict[str, redis.Redis] = {}
        self._lock = threading.RLock()
        self._database = FreshDatabase(postgres)
        self.failed_over = False
        self.closed = False
        _OPEN.add(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} primary={self.primary} replica={self.replica} pg={self.postgres}>"

    # -- addresses ---------------------------------------------------------------------
    @property
    def primary(self) -> Endpoint:
        return self._primary.endpoint

    @property
    def replica(self) -> Endpoint:
        return self._replica.endpoint

    def proxy_endpoint(self, proxy: str) -> Endpoint:
        if proxy not in self._listen:
            self._listen[proxy] = Endpoint.parse(self.api.get_proxy(proxy)["listen"])
        return self._listen[proxy]

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
        if node == "primary":
            return self._primary
        if node == "replica":
            return self._replica
        raise ValueError(f"unknown node {node!r}: use 'primary' or 'replica'")

    def _admin(self, node: RedisNode) -> redis.Redis:
        """A kept admin client per node address (a reset makes ~10 calls: no reconnect each time)."""
        key = str(node.endpoint)
        client = self._admins.get(key)
        if client is None:
            client = self._admins[key] = admin_client(node.endpoint.host, node.endpoint.port)
        return client

    # -- worker links --------------------------------------------------------------------
    def worker_links(self, name: str) -> WorkerLinks:
        """The proxies of one worker process (made once per name; removed by reset())."""
        if not _NAME_RE.match(name):
            raise ValueError(f"bad worker name {name!r}: use 1-63 letters, digits, '_', '-' or '.', "
                             f"e.g. 'C1' or 'order-service'")
        with self._lock:
            if name in self._workers:
                return self._workers[name]
            names = {link: f"{self._prefix}{name}.{link}" for link in ("redis", "replica", "postgres")}
            upstreams = {"redis": self._primary.upstream, "replica": self._replica.upstream,
                         "postgres": self._postgres_upstream}
            made = self.api.populate([{"name": names[link], "upstream": upstreams[link],
                                       "listen": f"{self._listen_host}:0", "enabled": True} for link in names])
            for proxy in made:
                self._listen[proxy["name"]] = Endpoint.parse(proxy["listen"])
            links = WorkerLinks(
                name=name,
                redis_url=redis_url(self._listen[names["redis"]]),
                replica_url=redis_url(self._listen[names["replica"]]),
                pg_dsn=pg_dsn(self._listen[names["postgres"]], DBNAME),
                proxies=names)
            self._workers[name] = links
            return links

    # -- start-up (called by a backend once its servers answer) ----------------------------
    def _create_links(self) -> None:
        made = self.api.populate([{"name": name, "upstream": upstream, "listen": f"{self._listen_host}:0",
                                   "enabled": True}
                                  for name, upstream in self._desired_upstreams().items()])
        for proxy in made:
            self._listen[proxy["name"]] = Endpoint.parse(proxy["listen"])
        self._attach_replica(self._b)
        self.wait_replication(START_SYNC_TIMEOUT_S)
        self._database.prepare()

    def _desired_upstreams(self) -> dict[str, str]:
        """Shared proxy -> upstream in the original topology."""
        return {self.links["redis"]: self._a.upstream, self.links["replica"]: self._b.upstream,
                self.links["postgres"]: self._postgres_upstream, self.links["replication"]: self._a.upstream}

    def replication_source(self) -> Endpoint:
        """Where the replica dials to replicate: the replication proxy, as the replica sees it."""
        return self.proxy_endpoint(self.links["replication"])

    def _attach_replica(self, node: RedisNode) -> None:
        source = self.replication_source()
        client = self._admin(node)
        client.execute_command("REPLICAOF", source.host, source.port)

    # -- replication -----------------------------------------------------------------------
    def replication_info(self) -> dict[str, dict]:
        """INFO replication of both nodes, keyed 'primary' / 'replica' ({} for a dead node)."""
        out = {}
        for role, node in (("primary", self._primary), ("replica", self._replica)):
            try:
                client = self._admin(node)
                out[role] = client.info("replication")
            except redis.RedisError:
                out[role] = {}
        return out

    def wait_replication(self, timeout: float = 5.0) -> None:
        """Wait until the replica's link is up and it has applied all the primary has sent."""
        deadline = time.monotonic() + timeout
        primary, replica = self._admin(self._primary), self._admin(self._replica)
        target = primary.info("replication")["master_repl_offset"]
        info: dict = {}
        while time.monotonic() < deadline:
            info = replica.info("replication")
            if info.get("master_link_status") == "up" and info.get("slave_repl_offset", -1) >= target:
                return
            time.sleep(0.002)
        raise ClusterError(f"replica {self.replica} not in sync with primary {self.primary} after {timeout} s "
                           f"(link {info.get('master_link_status')}, replica offset {info.get('slave_repl_offset')}, "
                           f"primary offset {target}); is the replication proxy "
                           f"{self.links['replication']!r} cut or toxic?")

    # -- faults ------------------------------------------------------------------------------
    def redis_pid(self, node: str = "primary") -> int | None:
        return self._node_pid(self._node(node))

    def kill_primary(self) -> None:
        """SIGKILL the current primary (a real crash; nothing is saved)."""
        self._kill_node(self._primary)

    def promote_replica(self) -> None:
        """Fail over: REPLICAOF NO ONE on the replica, repoint every proxy that led to the primary."""
        with self._lock:
            old, new = self._primary, self._replica
            client = self._admin(new)
            client.execute_command("REPLICAOF", "NO", "ONE")
            self._repoint(old.upstream, new.upstream, skip={self.links["replication"]})
            self._primary, self._replica = new, old
            self.failed_over = True

    def restart_primary(self, *, appendonly: bool = False, appendfsync: str = "everysec", kill: bool = True) -> None:
        """Stop the primary (SIGKILL if ``kill``, else a clean shutdown) and start it on the same port
        and dir with the given persistence. Data survives only through an AOF the server was already
        writing: restart once with ``appendonly=True`` to arm it, then crash it."""
        if appendfsync not in ("always", "everysec", "no"):
            raise ValueError(f"bad appendfsync {appendfsync!r}: use always, everysec or no")
        with self._lock:
            node = self._primary
            old_upstream = node.upstream
            if appendonly and not node.appendonly and self._node_alive(node):
                node.appendfsync = appendfsync
                self._arm_aof(node)
                node.appendonly = True
            if kill:
                self._kill_node(node)
            else:
                self._shutdown_node(node)
            node.appendonly, node.appendfsync = appendonly, appendfsync
            self._start_node(node)
            if node.upstream != old_upstream:     # a new port: the old one was taken meanwhile
                self._repoint(old_upstream, node.upstream)

    def _arm_aof(self, node: RedisNode) -> None:
        """Turn the AOF on in the running server (it rewrites the current data into it) and wait."""
        client = self._admin(node)
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

    def _repoint(self, old_upstream: str, new_upstream: str, skip: set[str] = frozenset()) -> None:
        for name, proxy in self._own_proxies().items():
            if name not in skip and proxy["upstream"] == old_upstream:
                self.api.update_proxy(name, upstream=new_upstream)

    def _own_proxies(self) -> dict[str, dict]:
        return {n: p for n, p in self.api.proxies().items() if n.startswith(self._prefix)}

    # -- reset ---------------------------------------------------------------------------------
    def reset(self) -> None:
        """Back to the original, empty topology: see INTERFACES.md section 3 for the list."""
        with self._lock:
            self._resume_servers()
            self._reset_proxies()
            self._reset_redis()
            self._reset_postgres()
            self._workers.clear()
            self.failed_over = False

    def _reset_proxies(self) -> None:
        desired = self._desired_upstreams()
        listing = self._own_proxies()
        missing = [n for n in desired if n not in listing or n not in self._listen]
        if missing:
            raise ClusterError(f"shared proxies {missing} were deleted by a test; the cluster must be rebuilt")
        for name, proxy in listing.items():
            if name not in desired:
                self.api.delete_proxy(name)
                self._listen.pop(name, None)
                continue
            toxics = proxy["toxics"] if "toxics" in proxy else self.api.toxics(name)
            for toxic in toxics or []:
                self.api.remove_toxic(name, toxic["name"])
            change = {}
            if proxy["upstream"] != desired[name]:
                change["upstream"] = desired[name]
            if name in self._listen and proxy["listen"] != str(self._listen[name]):
                change["listen"] = str(self._listen[name])
            if not proxy["enabled"]:
                change["enabled"] = True
            if change:
                self.api.update_proxy(name, **change)

    def _reset_redis(self) -> None:
        a, b = self._a, self._b
        self._primary, self._replica = a, b
        for node in (a, b):
            if not self._node_alive(node) or node.appendonly:
                node.appendonly, node.appendfsync = False, "everysec"
                self._restart_clean(node)
        client = self._admin(a)
        client.execute_command("CLIENT", "UNPAUSE")
        if client.info("replication")["role"] != "master":
            client.execute_command("REPLICAOF", "NO", "ONE")
        client.config_set("appendonly", "no")     # a fault may have switched the AOF on by CONFIG SET
        client.flushall()
        client.script_flush()
        client.function_flush()
        client = self._admin(b)
        client.execute_command("CLIENT", "UNPAUSE")
        info = client.info("replication")
        source = self.replication_source()
        if (info["role"] != "slave" or info.get("master_port") != source.port
                or info.get("master_host") != source.host):
            if info["role"] == "master":
                client.flushall()      # what it took as primary must not survive (a full sync follows anyway)
            self._attach_replica(b)
        elif info.get("master_link_status") != "up":
            # REPLICAOF to the same master is a no-op: detach first so it reconnects now, not at
            # the next once-a-second retry (a partial resync: the replication id is kept)
            client.execute_command("REPLICAOF", "NO", "ONE")
            self._attach_replica(b)
        self.wait_replication(RESET_SYNC_TIMEOUT_S)

    def _reset_postgres(self) -> None:
        self._database.renew()

    def _restart_clean(self, node: RedisNode) -> None:
        old = node.upstream
        if self._node_alive(node):
            self._kill_node(node)
        self._start_node(node)
        if node.upstream != old:
            self._repoint(old, node.upstream)

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
            fresh = type(self).start(self.name)
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
                for client in self._admins.values():
                    client.close()
                self._database.close()       # after the server stopped: an in-flight CREATE fails fast
                self.api.close()
                self._keep_runs()
                shutil.rmtree(self.base_dir, ignore_errors=True)

    @property
    def runs_dir(self) -> Path:
        """Where run dirs go: ``<base>/.kept/<cluster>/`` (rundirs.open_runs_dir), so the path a
        failure names outlives the cluster; bounded by rundirs.retain."""
        runs = self.__dict__.get("_runs")
        if runs is None:
            runs = self.__dict__["_runs"] = open_runs_dir(self.name).path
        return runs

    def _keep_runs(self) -> None:
        """Close the runs dir (retention applies from now on); run dirs written to the
        cluster dir itself are moved there first."""
        legacy = self.base_dir / "runs"
        if legacy.is_dir() and any(legacy.iterdir()):
            for child in legacy.iterdir():
                shutil.move(str(child), str(self.runs_dir / child.name))
        runs = self.__dict__.pop("_runs", None)
        if runs is not None:
            close_runs_dir(runs)

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
