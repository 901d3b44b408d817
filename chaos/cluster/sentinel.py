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

The topology is chosen by ``--topology`` / ``--chaos-topology`` / ``$CHAOS_TOPOLOGY``:
``sentinel[:sentinels=3,quorum=2,min_replicas=0,min_replicas_max_lag=1]``.
"""
from __future__ import annotations

import os
import secrets
import shutil
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, ClassVar

import redis

from chaos.cluster.endpoint import Endpoint, WorkerLinks
from chaos.cluster.errors import ClusterError, MissingBinary, Unsupported
from chaos.cluster.local_server import LocalServer, start_all
from chaos.cluster.native import NativeCluster
from chaos.cluster.ports import HOST, free_port
from chaos.cluster.redis_server import admin_client, answers_ping
from chaos.cluster.rundirs import ClusterDir
from chaos.cluster.topology import RedisNode
from chaos.errors import BadArguments
from chaos.params import parse_spec

ENV = "CHAOS_TOPOLOGY"
TOPOLOGIES = ("replica", "sentinel")
DEFAULT_TOPOLOGY = "replica"
MASTER_NAME = "chaos"
SENTINEL_INSTALL = ("install Redis with `apt-get install -y redis-server` (Sentinel runs as "
                    "`redis-server --sentinel`) or the Sentinel alone with `apt-get install -y redis-sentinel`")
READY_TIMEOUT_S = 15.0
FOLLOW_EVERY_S = 0.01
# How often Sentinel pings, asks INFO, publishes hellos and asks its peers (SENTINEL DEBUG).
# Redis hard-wires 1 s / 10 s / 2 s / 1 s; a returning primary waits 4 publish periods
# before it is demoted. These only make Sentinel look more often: the failover's own
# timing is down-after-milliseconds, which the fault sets (scaled). Not below 500 ms of
# ping period: while the primary is down Sentinel takes a replica's INFO as fresh for 5
# ping periods but refreshes it only every second, and with no fresh replica it aborts
# the failover (-failover-abort-no-good-slave) and waits 2 x failover-timeout to retry.
DEBUG_PERIODS_MS = {"ping-period": 500, "info-period": 500, "publish-period": 200, "ask-period": 200}
DEFAULT_DOWN_AFTER_MS = 5000
# Long on purpose: a replica replicating from another address than the one Sentinel
# monitors the primary at (node b dials the "replication" proxy) is re-pointed by Sentinel
# (+fix-slave-config) once failover-timeout has passed. A reset restarts Sentinels that
# have run for half of it, so it never happens within a session.
FAILOVER_TIMEOUT_MS = 600000


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


def check_topology(text: str | None) -> str:
    """The topology asked for (``text``, else $CHAOS_TOPOLOGY, else replica), validated."""
    chosen = text or os.environ.get(ENV) or DEFAULT_TOPOLOGY
    parse_topology(chosen)
    return chosen


def use_topology(text: str | None) -> str:
    """Validate and export as $CHAOS_TOPOLOGY (child processes and xdist workers start the same).
    A sentinel topology without a Sentinel-capable binary is refused here, before anything starts."""
    chosen = check_topology(text)
    if parse_topology(chosen)[0] == "sentinel":
        sentinel_binary()
    if text:
        os.environ[ENV] = chosen
    return chosen


def sentinel_binary() -> str:
    """The binary that runs Sentinel: the chosen redis-server/valkey-server (``--sentinel``),
    else `redis-sentinel` on PATH."""
    from chaos.cluster.servers import server_binary
    try:
        binary = server_binary()
    except MissingBinary:
        binary = shutil.which("redis-sentinel") or ""
    if not binary or not _runs_sentinel(binary):
        raise MissingBinary(f"the sentinel topology needs a Sentinel-capable binary and found none "
                            f"({binary or 'no redis-server'} cannot run `--sentinel`): {SENTINEL_INSTALL}")
    return binary


def _runs_sentinel(binary: str) -> bool:
    name = Path(binary).name
    return "redis" in name or "valkey" in name


# ---------------------------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------------------------
class SentinelProcess(LocalServer):
    """One Sentinel: ``<binary> sentinel.conf --sentinel`` with a config written at each launch."""

    kind = "sentinel"

    def __init__(self, name: str, workdir: Path, cdir: ClusterDir | None, binary: str,
                 port_picker: Callable[[], int] = free_port):
        super().__init__(name, workdir, cdir, port_picker=port_picker)
        self.binary = binary
        self.myid = secrets.token_hex(20)
        self.config: list[str] = []

    @property
    def conf_path(self) -> Path:
        return self.workdir / "sentinel.conf"

    def launch(self) -> None:
        self.conf_path.write_text("\n".join([f"port {self.port}", *self.config]) + "\n")
        super().launch()

    def argv(self) -> list[str]:
        return [self.binary, str(self.conf_path), "--sentinel"]

    def log_files(self) -> list[Path]:
        return [self.log_path, self.workdir / "sentinel-server.log"]

    def ready(self) -> bool:
        return answers_ping(self.host, self.port)


# ---------------------------------------------------------------------------------------------
# the topology
# ---------------------------------------------------------------------------------------------
class SentinelCluster(NativeCluster):
    """The native topology plus Sentinels that own the failover (see the module doc)."""

    topology: ClassVar[str] = "sentinel"
    spec: ClassVar[SentinelSpec] = SentinelSpec()

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.master_name = MASTER_NAME
        self.sentinel_procs: list[SentinelProcess] = []
        self._sentinel_admins: dict[str, redis.Redis] = {}
        self.down_after_ms = DEFAULT_DOWN_AFTER_MS
        self._sentinels_started = 0.0
        self._following = False
        self._followed_at = 0.0
        self._resetting = False
        for i in range(1, self.spec.sentinels + 1):
            self.links[f"sentinel-{i}"] = f"{self._prefix}sentinel-{i}"

    @classmethod
    def start(cls, name: str, *, spec: SentinelSpec | None = None, **options: Any) -> "SentinelCluster":
        """Start the whole topology; ``spec`` defaults to $CHAOS_TOPOLOGY's parameters."""
        if spec is None and cls is not SentinelCluster:      # rebuild() of a started cluster: the same shape
            spec = cls.spec
        if spec is None:
            spec = parse_topology(os.environ.get(ENV) or "sentinel")[1] or SentinelSpec()
        spec.validate()
        sentinel_binary()      # refused before anything starts
        bound = cls if spec == cls.spec else type(cls.__name__, (cls,), {"spec": spec, "__module__": cls.__module__})
        return super(SentinelCluster, bound).start(name, **options)

    # -- start-up ------------------------------------------------------------------------------
    def _create_links(self) -> None:
        super()._create_links()
        binary = self._procs["a"].binary      # type: ignore[attr-defined]
        root = self.base_dir
        for i in range(1, self.spec.sentinels + 1):
            proc = SentinelProcess(f"sentinel-{i}", root / f"sentinel-{i}", self._cdir, binary)
            self._procs[proc.name] = proc
            self.sentinel_procs.append(proc)
        made = self.api.populate([{"name": self.links[p.name], "upstream": f"{HOST}:{p.port}",
                                   "listen": f"{self._listen_host}:0", "enabled": True}
                                  for p in self.sentinel_procs])
        for proxy in made:
            self._listen[proxy["name"]] = Endpoint.parse(proxy["listen"])
        self._configure_node(self._a)
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
        client, deadline = self._admin(self._a), time.monotonic() + timeout
        while int(client.info("replication").get("min_slaves_good_slaves", 0)) < self.spec.min_replicas:
            if time.monotonic() > deadline:
                raise ClusterError(f"the primary did not count {self.spec.min_replicas} good replica(s) in "
                                   f"{timeout:.0f} s: {client.info('replication')}")
            time.sleep(0.01)

    def _configure_node(self, node: RedisNode) -> None:
        """Announce the node's proxy, so Sentinel (and INFO) hand out the proxy's address; set
        min-replicas-to-write (not during a reset: it sets it once the replica is back)."""
        announced = self.node_address(node.id)
        client = self._admin(node)
        client.config_set("replica-announce-ip", announced.host)
        client.config_set("replica-announce-port", announced.port)
        if self.spec.min_replicas and not self._resetting:
            client.config_set("min-replicas-to-write", self.spec.min_replicas)
            client.config_set("min-replicas-max-lag", self.spec.min_replicas_max_lag)

    def _min_replicas(self, count: int) -> None:
        if not self.spec.min_replicas:
            return
        for node in (self._a, self._b):
            try:
                self._admin(node).config_set("min-replicas-to-write", count)
            except redis.RedisError:      # a dead node: it starts again configured (_start_node)
                pass

    def _sentinel_config(self, proc: SentinelProcess) -> list[str]:
        me = self.proxy_endpoint(self.links[proc.name])
        primary, replica = self.node_address("a"), self.node_address("b")
        name = self.master_name
        lines = ["bind 127.0.0.1", "daemonize no", f"dir {proc.workdir}",
                 f"logfile {proc.workdir / 'sentinel-server.log'}",
                 f"sentinel myid {proc.myid}", "sentinel resolve-hostnames no",
                 f"sentinel announce-ip {me.host}", f"sentinel announce-port {me.port}",
                 f"sentinel monitor {name} {primary.host} {primary.port} {self.spec.quorum}",
                 f"sentinel down-after-milliseconds {name} {self.down_after_ms}",
                 f"sentinel failover-timeout {name} {FAILOVER_TIMEOUT_MS}",
                 f"sentinel parallel-syncs {name} 1",
                 f"sentinel known-replica {name} {replica.host} {replica.port}"]
        for other in self.sentinel_procs:
            if other is not proc:
                peer = self.proxy_endpoint(self.links[other.name])
                lines.append(f"sentinel known-sentinel {name} {peer.host} {peer.port} {other.myid}")
        return lines

    def _launch_sentinels(self) -> None:
        for proc in self.sentinel_procs:
            proc.config = self._sentinel_config(proc)
        start_all(self.sentinel_procs, READY_TIMEOUT_S)
        for proc in self.sentinel_procs:
            upstream = f"{HOST}:{proc.port}"
            if self.api.get_proxy(self.links[proc.name])["upstream"] != upstream:   # a port clash moved it
                self.api.update_proxy(self.links[proc.name], upstream=upstream)
            args = [x for kv in DEBUG_PERIODS_MS.items() for x in kv]
            self._sentinel_admin(proc).execute_command("SENTINEL", "DEBUG", *args)
        self.wait_sentinels()
        self._following, self._followed_at = True, 0.0
        self._sentinels_started = time.monotonic()

    def wait_sentinels(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Until every Sentinel sees node a as primary, node b as its healthy replica, and
        enough peers to reach the quorum and elect a leader (SENTINEL CKQUORUM)."""
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            last = self._sentinel_problem()
            if not last:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"the Sentinels did not agree on the topology in {timeout:.0f} s: {last}; "
                                   f"log tails:\n{self.sentinel_logs()}")
            time.sleep(0.005)

    def _sentinel_problem(self) -> str:
        """'' when every Sentinel sees the original topology healthy, else what is wrong."""
        primary, replica = self.node_address("a"), self.node_address("b")
        for proc in self.sentinel_procs:
            if not proc.alive():
                return f"{proc.name} is not running"
            try:
                client = self._sentinel_admin(proc)
                master = _pairs(client.execute_command("SENTINEL", "MASTER", self.master_name))
                if master.get("flags") != "master" or (master.get("ip"), int(master.get("port", 0))) != \
                        (primary.host, primary.port):
                    return f"{proc.name} sees master {master.get('ip')}:{master.get('port')} flags {master.get('flags')}"
                replicas = [_pairs(r) for r in client.execute_command("SENTINEL", "REPLICAS", self.master_name)]
                healthy = [r for r in replicas if r.get("flags") == "slave" and r.get("master-link-status") == "ok"
                           and (r.get("ip"), int(r.get("port", 0))) == (replica.host, replica.port)]
                if len(replicas) != 1 or not healthy:
                    return f"{proc.name} sees replicas {[(r.get('port'), r.get('flags')) for r in replicas]}"
                client.execute_command("SENTINEL", "CKQUORUM", self.master_name)
                if int(client.info("sentinel").get("sentinel_tilt", 0)):
                    return f"{proc.name} is in TILT mode"
            except redis.RedisError as exc:
                return f"{proc.name}: {type(exc).__name__}: {exc}"
        return ""

    # -- addresses -----------------------------------------------------------------------------
    def node_address(self, node_id: str) -> Endpoint:
        """The address node ``a``/``b`` announces: its proxy (``redis`` / ``replica``)."""
        return self.proxy_endpoint(self.links["redis" if node_id == "a" else "replica"])

    def node_proxy(self, node_id: str) -> str:
        """The proxy every client and Sentinel reaches node ``a``/``b`` through."""
        return self.links["redis" if node_id == "a" else "replica"]

    def sentinel_addresses(self) -> tuple[str, ...]:
        """Where clients ask the Sentinels: their proxies."""
        return tuple(str(self.proxy_endpoint(self.links[p.name])) for p in self.sentinel_procs)

    def worker_links(self, name: str) -> WorkerLinks:
        links = super().worker_links(name)
        if links.sentinels:
            return links
        with self._lock:
            links = replace(links, sentinels=self.sentinel_addresses(), master_name=self.master_name)
            self._workers[name] = links
            return links

    def _desired_upstreams(self) -> dict[str, str]:
        desired = super()._desired_upstreams()
        for proc in self.sentinel_procs:
            desired[self.links[proc.name]] = f"{HOST}:{proc.port}"
        return desired

    # -- following Sentinel --------------------------------------------------------------------
    def _sentinel_admin(self, proc: SentinelProcess) -> redis.Redis:
        key = f"{proc.name}:{proc.port}"
        client = self._sentinel_admins.get(key)
        if client is None:
            client = self._sentinel_admins[key] = admin_client(proc.host, proc.port, timeout=0.5)
        return client

    def sentinel_clients(self) -> list[redis.Redis]:
        """Direct (no proxy) admin clients to the live Sentinels: for faults and tests."""
        return [self._sentinel_admin(p) for p in self.sentinel_procs if p.alive()]

    def sentinel_master(self) -> Endpoint | None:
        """The primary's address as the first answering Sentinel names it (None: none answers)."""
        for client in self.sentinel_clients():
            try:
                host, port = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name)
                return Endpoint(host, int(port))
            except (redis.RedisError, TypeError, ValueError):
                continue
        return None

    def node_at(self, address: Endpoint) -> str | None:
        """``a`` / ``b`` for an announced address, None for anything else."""
        for node_id in ("a", "b"):
            if self.node_address(node_id) == address:
                return node_id
        return None

    def follow(self, force: bool = False) -> None:
        """Take the Sentinels' word for which node is the primary (throttled)."""
        if not self._following or (not force and time.monotonic() - self._followed_at < FOLLOW_EVERY_S):
            return
        self._followed_at = time.monotonic()
        address = self.sentinel_master()
        node_id = self.node_at(address) if address is not None else None
        if node_id is not None and node_id != self._primary.id:
            with self._lock:
                self._primary, self._replica = self._replica, self._primary
                self.failed_over = True

    @property
    def primary(self) -> Endpoint:
        self.follow()
        return self._primary.endpoint

    @property
    def replica(self) -> Endpoint:
        self.follow()
        return self._replica.endpoint

    def primary_id(self) -> str:
        self.follow(force=True)
        return self._primary.id

    def _node(self, node: str) -> RedisNode:
        if node in ("primary", "replica"):
            self.follow()
        return super()._node(node)

    def kill_primary(self) -> None:
        self.follow(force=True)
        super().kill_primary()

    def kill_node(self, node_id: str) -> None:
        """SIGKILL node ``a``/``b`` (a real crash)."""
        self._kill_node(self._a if node_id == "a" else self._b)

    def restart_node(self, node_id: str) -> None:
        """Start a killed node again, empty, on its port (its proxy follows a new port)."""
        self._restart_clean(self._a if node_id == "a" else self._b)

    def restart_primary(self, **kw: Any) -> None:
        self.follow(force=True)
        super().restart_primary(**kw)

    def promote_replica(self) -> None:
        raise Unsupported("the sentinel topology fails over through Sentinel, never by repointing proxies: "
                          "use --fault sentinel-failover (promote-replica is for the replica topology)")

    def node_role(self, node_id: str) -> str:
        """What node ``a``/``b`` says it is (``master``, ``slave``) or ``down``."""
        node = self._a if node_id == "a" else self._b
        if not self._node_alive(node):
            return "down"
        try:
            return str(self._admin(node).info("replication")["role"])
        except redis.RedisError:
            return "down"

    def set_down_after(self, down_after_ms: int) -> int:
        """SENTINEL SET down-after-milliseconds on every Sentinel (a fault scales it by the
        run's time scale); a reset puts the default back. Returns how many Sentinels took it."""
        self.down_after_ms = max(1, int(down_after_ms))
        answered = 0
        for client in self.sentinel_clients():
            try:
                client.execute_command("SENTINEL", "SET", self.master_name, "down-after-milliseconds",
                                       self.down_after_ms)
                answered += 1
            except redis.RedisError:    # a stopped or cut Sentinel keeps its setting; the others act
                continue
        return answered

    def sentinel_logs(self, lines: int = 30) -> str:
        return "\n".join(p.log_tail(lines) for p in self.sentinel_procs)

    # -- reset ---------------------------------------------------------------------------------
    def reset(self) -> None:
        """As the replica topology's reset; after a failover (or anything the Sentinels did not
        come back from) the Sentinels are restarted on the original topology."""
        with self._lock:
            self._following = False
            young = time.monotonic() - self._sentinels_started < FAILOVER_TIMEOUT_MS / 2000
            clean = (young and not self.failed_over and self.down_after_ms == DEFAULT_DOWN_AFTER_MS
                     and not self._sentinel_problem())
            if not clean:
                self._stop_sentinels()
                self.down_after_ms = DEFAULT_DOWN_AFTER_MS
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

    def _stop_sentinels(self) -> None:
        for client in self._sentinel_admins.values():
            client.close()
        self._sentinel_admins.clear()
        for proc in self.sentinel_procs:
            proc.stop()

    def _start_node(self, node: RedisNode) -> None:
        super()._start_node(node)
        if self.sentinel_procs:      # a restarted node announces its proxy again
            self._configure_node(node)

    def _close_servers(self) -> None:
        self._following = False
        for client in self._sentinel_admins.values():
            client.close()
        super()._close_servers()


def _pairs(reply: Any) -> dict[str, str]:
    """A flat [k, v, k, v...] Sentinel reply (RESP2) -> dict."""
    if isinstance(reply, dict):
        return {str(k): str(v) for k, v in reply.items()}
    return {str(reply[i]): str(reply[i + 1]) for i in range(0, len(reply) - 1, 2)}
