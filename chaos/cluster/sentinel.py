"""The sentinel topology: failover as production does it, through Redis Sentinel.

```
 workers ──> proxy "sentinel-1..3" ──> Sentinel 1..3   (asked: where is the primary?)
 workers, Sentinels ──> proxy "redis"   ──> node a   (its announced address)
 workers, Sentinels ──> proxy "replica" ──> node b   (its announced address)
 node b ──(REPLICAOF)──> proxy "replication" ──> node a
```

Every node announces its proxy (``replica-announce-ip/-port``) and every Sentinel
announces its own (``sentinel announce-ip/-port``), so whatever Sentinel hands out leads
through the fault proxy; a client that connected straight to a server would slip past
every fault. Proxies are per node and never repointed: after a failover a client finds
the new primary because Sentinel names it. ``primary`` follows what the Sentinels say.

A reset after a failover kills the Sentinels, puts the nodes back (a primary, b its
replica) and starts the Sentinels again from a written config that already lists the
replica and the other Sentinels (``known-replica``, ``known-sentinel``), so they agree
at once instead of after a few hello rounds. ``SENTINEL DEBUG`` shortens the periods
Sentinel polls at (hard-wired in sentinel.conf terms), so detection is down-after plus a
few tens of ms, and a returning old primary is demoted in under a second.

The topology is chosen by ``--topology`` / ``--chaos-topology`` / ``$CHAOS_TOPOLOGY`` (read
once at the edge by ``chaos.cluster.configured`` and passed to ``start_cluster(...,
topology=)``; nothing here reads or writes the environment):
``sentinel[:sentinels=3,quorum=2,min_replicas=0,min_replicas_max_lag=1]``.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, ClassVar

import redis

from chaos.cluster.endpoint import Endpoint, WorkerLinks
from chaos.cluster.errors import ClusterError, MissingBinary, Unsupported
from chaos.cluster.native import NativeCluster
from chaos.cluster.redispair import RedisNode
from chaos.cluster.sentinels import (DEFAULT_DOWN_AFTER_MS, MASTER_NAME, READY_TIMEOUT_S, SentinelGroup,
                                     SentinelProcess)
from chaos.errors import BadArguments
from chaos.params import parse_spec

__all__ = ["SentinelCluster", "SentinelProcess", "SentinelSpec", "MASTER_NAME", "check_topology", "parse_topology"]

ENV = "CHAOS_TOPOLOGY"
TOPOLOGIES = ("replica", "sentinel")
DEFAULT_TOPOLOGY = "replica"
SENTINEL_INSTALL = ("install Redis with `apt-get install -y redis-server` (Sentinel runs as "
                    "`redis-server --sentinel`) or the Sentinel alone with `apt-get install -y redis-sentinel`")
FOLLOW_EVERY_S = 0.01

class UnknownTopology(ClusterError, BadArguments):
    """A topology name or parameter that cannot work; the CLI exits 254."""


@dataclass(frozen=True)
class SentinelSpec:
    """The sentinel topology's shape (``--topology sentinel:k=v,...``)."""

    sentinels: int = 3               # Sentinel processes, each behind its own proxy
    quorum: int = 2                  # Sentinels that must agree the primary is down
    min_replicas: int = 0            # min-replicas-to-write on both nodes (0: off)
    min_replicas_max_lag: int = 1    # seconds without a replica's ack before it stops counting

    def validate(self) -> "SentinelSpec":
        if not 1 <= self.sentinels <= 7:
            raise UnknownTopology(f"--topology sentinel:sentinels={self.sentinels}: give 1 to 7 Sentinels "
                                  f"(3 is the usual production shape)")
        if not 1 <= self.quorum <= self.sentinels:
            raise UnknownTopology(f"--topology sentinel: quorum={self.quorum} with {self.sentinels} Sentinels "
                                  f"can never be reached: give a quorum of 1 to {self.sentinels} "
                                  f"(e.g. quorum={self.sentinels // 2 + 1}) or more Sentinels")
        if self.min_replicas not in (0, 1):
            raise UnknownTopology(f"--topology sentinel:min_replicas={self.min_replicas}: the topology has one "
                                  f"replica, give 0 (off) or 1")
        if self.min_replicas_max_lag < 1:
            raise UnknownTopology(f"--topology sentinel:min_replicas_max_lag={self.min_replicas_max_lag}: "
                                  f"Redis counts it in whole seconds, give 1 or more")
        return self

    def text(self) -> str:
        changed = [f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                   if getattr(self, f.name) != f.default]
        return "sentinel" + (":" + ",".join(changed) if changed else "")


def parse_topology(text: str | None) -> tuple[str, SentinelSpec | None]:
    """``"sentinel:quorum=2"`` -> ("sentinel", SentinelSpec); ``"replica"`` -> ("replica", None)."""
    try:
        name, given = parse_spec(text or DEFAULT_TOPOLOGY, "--topology")
    except BadArguments as exc:   # the one name:k=v parser; a ClusterError for the pytest option
        raise UnknownTopology(str(exc)) from None
    if name not in TOPOLOGIES:
        raise UnknownTopology(f"unknown topology {name!r}: choose one of {', '.join(TOPOLOGIES)} "
                              f"(--topology, --chaos-topology or {ENV})")
    if name != "sentinel":
        if given:
            raise UnknownTopology(f"topology {name!r} takes no parameters (got {text!r})")
        return name, None
    known = {f.name for f in fields(SentinelSpec)}
    values: dict[str, int] = {}
    for key, value in given.items():
        if key not in known:
            raise UnknownTopology(f"--topology sentinel: {key!r} is not one of "
                                  f"{', '.join(sorted(known))} as k=v, e.g. sentinel:quorum=2")
        try:
            values[key] = int(value)
        except ValueError:
            raise UnknownTopology(f"--topology sentinel: {key}={value!r} is not a whole number") from None
    return name, SentinelSpec(**values).validate()


def check_topology(text: str | None, server: str | None = None) -> str:
    """The topology asked for (``text``, else replica), validated. A sentinel topology without a
    Sentinel-capable binary for ``server`` is refused here, before anything starts."""
    chosen = text or DEFAULT_TOPOLOGY
    if parse_topology(chosen)[0] == "sentinel":
        sentinel_binary(server)
    return chosen


def sentinel_binary(server: str | None = None) -> str:
    """The binary that runs Sentinel: the chosen redis-server/valkey-server (``--sentinel``),
    else `redis-sentinel` on PATH."""
    from chaos.cluster.servers import server_binary
    try:
        binary = server_binary(server)
    except MissingBinary:
        binary = shutil.which("redis-sentinel") or ""
    if not binary or not _runs_sentinel(binary):
        raise MissingBinary(f"the sentinel topology needs a Sentinel-capable binary and found none "
                            f"({binary or 'no redis-server'} cannot run `--sentinel`): {SENTINEL_INSTALL}")
    return binary


def _runs_sentinel(binary: str) -> bool:
    name = Path(binary).name
    return "redis" in name or "valkey" in name


class SentinelCluster(NativeCluster):
    """The native topology plus Sentinels that own the failover (see the module doc); the
    Sentinels themselves are ``self.sentinels`` (chaos/cluster/sentinels.py)."""

    topology: ClassVar[str] = "sentinel"
    spec: ClassVar[SentinelSpec] = SentinelSpec()

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.sentinels = SentinelGroup(self.spec.sentinels, self.spec.quorum, self.proxies, self.links)
        self._following = False
        self._followed_at = 0.0
        self._resetting = False

    @classmethod
    def start(cls, name: str, *, spec: SentinelSpec | None = None, **options: Any) -> "SentinelCluster":
        """Start the whole topology; ``spec`` defaults to this class's (the default shape, or a
        started cluster's on rebuild())."""
        if spec is None:
            spec = cls.spec
        spec.validate()
        sentinel_binary(options.get("server"))      # refused before anything starts
        bound = cls if spec == cls.spec else type(cls.__name__, (cls,), {"spec": spec, "__module__": cls.__module__})
        return super(SentinelCluster, bound).start(name, **options)

    @property
    def topology_text(self) -> str:   # type: ignore[override]
        return self.spec.text()

    # -- start-up ------------------------------------------------------------------------------
    def _create_links(self) -> None:
        super()._create_links()
        binary = self._procs["a"].binary      # type: ignore[attr-defined]
        for proc in self.sentinels.create(self.base_dir, self._cdir, binary):
            self._procs[proc.name] = proc
        self._configure_node(self.nodes.a)
        self._launch_sentinels()
        self.wait_good_replicas()

    def _attach_replica(self, node: RedisNode) -> None:
        # The replica tells the primary its announced port when it connects (REPLCONF
        # listening-port): set before REPLICAOF, or INFO and Sentinel see the real port.
        self._configure_node(node)
        super()._attach_replica(node)

    def wait_good_replicas(self, timeout: float = READY_TIMEOUT_S) -> None:
        """With min_replicas, until the primary counts its replica as good: it recounts once a
        second, and until then refuses every write (a run's first FLUSHALL included)."""
        if not self.spec.min_replicas:
            return
        client, deadline = self.nodes.admin(self.nodes.a), time.monotonic() + timeout
        while int(client.info("replication").get("min_slaves_good_slaves", 0)) < self.spec.min_replicas:
            if time.monotonic() > deadline:
                raise ClusterError(f"the primary did not count {self.spec.min_replicas} good replica(s) in "
                                   f"{timeout:.0f} s: {client.info('replication')}")
            time.sleep(0.01)

    def _configure_node(self, node: RedisNode) -> None:
        """Announce the node's proxy, so Sentinel (and INFO) hand out the proxy's address; set
        min-replicas-to-write (not during a reset: it sets it once the replica is back)."""
        announced = self.node_address(node.id)
        client = self.nodes.admin(node)
        client.config_set("replica-announce-ip", announced.host)
        client.config_set("replica-announce-port", announced.port)
        if self.spec.min_replicas and not self._resetting:
            client.config_set("min-replicas-to-write", self.spec.min_replicas)
            client.config_set("min-replicas-max-lag", self.spec.min_replicas_max_lag)

    def _min_replicas(self, count: int) -> None:
        if not self.spec.min_replicas:
            return
        for node in (self.nodes.a, self.nodes.b):
            try:
                self.nodes.admin(node).config_set("min-replicas-to-write", count)
            except redis.RedisError:      # a dead node: it starts again configured (_start_node)
                pass

    def _launch_sentinels(self) -> None:
        self.sentinels.launch()
        self._following, self._followed_at = True, 0.0

    # -- addresses -----------------------------------------------------------------------------
    @property
    def master_name(self) -> str:
        return self.sentinels.master_name

    @property
    def sentinel_procs(self) -> list[SentinelProcess]:
        return self.sentinels.procs

    def node_address(self, node_id: str) -> Endpoint:
        """The address node ``a``/``b`` announces: its proxy (``redis`` / ``replica``)."""
        return self.sentinels.node_address(node_id)

    def node_proxy(self, node_id: str) -> str:
        """The proxy every client and Sentinel reaches node ``a``/``b`` through."""
        return self.sentinels.node_proxy(node_id)

    def node_at(self, address: Endpoint) -> str | None:
        """``a`` / ``b`` for an announced address, None for anything else."""
        return self.sentinels.node_at(address)

    def sentinel_addresses(self) -> tuple[str, ...]:
        """Where clients ask the Sentinels: their proxies."""
        return self.sentinels.addresses()

    def worker_links(self, name: str) -> WorkerLinks:
        links = super().worker_links(name)
        if links.sentinels:
            return links
        with self._lock:
            links = replace(links, sentinels=self.sentinel_addresses(), master_name=self.master_name)
            self._workers[name] = links
            return links

    def _desired_upstreams(self) -> dict[str, str]:
        return {**super()._desired_upstreams(), **self.sentinels.upstreams()}

    # -- following Sentinel --------------------------------------------------------------------
    def sentinel_clients(self) -> list[redis.Redis]:
        """Direct (no proxy) admin clients to the live Sentinels: for faults and tests."""
        return self.sentinels.clients()

    def sentinel_master(self) -> Endpoint | None:
        """The primary's address as the first answering Sentinel names it (None: none answers)."""
        return self.sentinels.master()

    def sentinel_logs(self, lines: int = 30) -> str:
        return self.sentinels.logs(lines)

    def set_down_after(self, down_after_ms: int) -> int:
        """SENTINEL SET down-after-milliseconds on every Sentinel (a fault scales it by the
        run's time scale); a reset puts the default back. Returns how many Sentinels took it."""
        return self.sentinels.set_down_after(down_after_ms)

    def follow(self, force: bool = False) -> None:
        """Take the Sentinels' word for which node is the primary (throttled)."""
        if not self._following or (not force and time.monotonic() - self._followed_at < FOLLOW_EVERY_S):
            return
        self._followed_at = time.monotonic()
        address = self.sentinels.master()
        node_id = self.node_at(address) if address is not None else None
        if node_id is not None and node_id != self.nodes.primary.id:
            with self._lock:
                self.nodes.swap()
                self.failed_over = True

    @property
    def primary(self) -> Endpoint:
        self.follow()
        return self.nodes.primary.endpoint

    @property
    def replica(self) -> Endpoint:
        self.follow()
        return self.nodes.replica.endpoint

    def primary_id(self) -> str:
        self.follow(force=True)
        return self.nodes.primary.id

    def _node(self, node: str) -> RedisNode:
        if node in ("primary", "replica"):
            self.follow()
        return super()._node(node)

    # -- faults --------------------------------------------------------------------------------
    def kill_primary(self) -> None:
        self.follow(force=True)
        super().kill_primary()

    def kill_node(self, node_id: str) -> None:
        """SIGKILL node ``a``/``b`` (a real crash)."""
        self._kill_node(self.nodes.by_id(node_id))

    def restart_node(self, node_id: str) -> None:
        """Start a killed node again, empty, on its port (its proxy follows a new port)."""
        self._restart_clean(self.nodes.by_id(node_id))

    def restart_primary(self, **kw: Any) -> None:
        self.follow(force=True)
        super().restart_primary(**kw)

    def promote_replica(self) -> None:
        raise Unsupported("the sentinel topology fails over through Sentinel, never by repointing proxies: "
                          "use --fault sentinel-failover (promote-replica is for the replica topology)")

    def node_role(self, node_id: str) -> str:
        """What node ``a``/``b`` says it is (``master``, ``slave``) or ``down``."""
        node = self.nodes.by_id(node_id)
        if not self._node_alive(node):
            return "down"
        try:
            return str(self.nodes.admin(node).info("replication")["role"])
        except redis.RedisError:
            return "down"

    # -- reset ---------------------------------------------------------------------------------
    def reset(self) -> None:
        """As the replica topology's reset; after a failover (or anything the Sentinels did not
        come back from) the Sentinels are restarted on the original topology."""
        with self._lock:
            self._following = False
            clean = (self.sentinels.young() and not self.failed_over
                     and self.sentinels.down_after_ms == DEFAULT_DOWN_AFTER_MS and not self.sentinels.problem())
            if not clean:
                self.sentinels.stop()
                self.sentinels.down_after_ms = DEFAULT_DOWN_AFTER_MS
            self._min_replicas(0)          # the reset's own FLUSHALL must not be refused
            self._resetting = True
            try:
                super().reset()
            finally:
                self._resetting = False
            self._min_replicas(self.spec.min_replicas)
            self.wait_good_replicas()
            if clean:
                self._following, self._followed_at = True, 0.0
            else:
                self._launch_sentinels()

    def _start_node(self, node: RedisNode) -> None:
        super()._start_node(node)
        if self.sentinels.procs:      # a restarted node announces its proxy again
            self._configure_node(node)

    def _close_servers(self) -> None:
        self._following = False
        self.sentinels.close_clients()
        super()._close_servers()
