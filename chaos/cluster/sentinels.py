"""The Sentinels of the sentinel topology: their processes, proxies, config and what they say.

Each Sentinel runs as ``<binary> sentinel.conf --sentinel`` behind its own proxy
(``sentinel-N``) and announces that proxy, so whatever a Sentinel hands out leads through
the fault proxies. Its config is written at each launch and already lists the replica and
the other Sentinels (``known-replica``, ``known-sentinel``), so they agree at once instead
of after a few hello rounds; ``SENTINEL DEBUG`` shortens the periods they poll at.
chaos/cluster/sentinel.py holds the topology that owns them.
"""
from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any, Callable

import redis

from chaos.cluster.endpoint import Endpoint
from chaos.cluster.errors import ClusterError
from chaos.cluster.local_server import LocalServer, start_all
from chaos.cluster.ports import HOST, free_port
from chaos.cluster.proxymap import ProxyMap
from chaos.cluster.redis_server import admin_client, answers_ping
from chaos.cluster.rundirs import ClusterDir

MASTER_NAME = "chaos"
READY_TIMEOUT_S = 15.0
# How often Sentinel pings, asks INFO, publishes hellos and asks its peers (SENTINEL DEBUG).
# Redis hard-wires 1 s / 10 s / 2 s / 1 s; a returning primary waits 4 publish periods
# before it is demoted. These only make Sentinel look more often: the failover's own
# timing is down-after-milliseconds, which the fault sets (scaled). Not below 500 ms of
# ping period: while the primary is down Sentinel takes a replica's INFO as fresh for 5
# ping periods but refreshes it only every second, and with no fresh replica it aborts
# the failover (-failover-abort-no-good-slave) and waits 2 x failover-timeout to retry.
# TILT: a Sentinel whose timer ran more than 2 s late (a starved machine; Redis's tilt-trigger,
# kept) stops acting, goes on pinging and asking INFO, and acts again after tilt-period without
# another late tick. Redis's 30 s period is sized for its 1 s pings and 30 s down-after; here 6
# ping periods, 3 of the faults' shortest down-after, refresh what it knows. With 30 s, a loaded
# run whose three Sentinels entered TILT mid-failover (the leader waiting for the promotion)
# did not promote within the fault's 15 s: the fault failed and the test with it.
TILT_PERIOD_MS = 3000
DEBUG_PERIODS_MS = {"ping-period": 500, "info-period": 500, "publish-period": 200, "ask-period": 200,
                    "tilt-period": TILT_PERIOD_MS}
DEFAULT_DOWN_AFTER_MS = 5000
# Long on purpose: a replica replicating from another address than the one Sentinel
# monitors the primary at (node b dials the "replication" proxy) is re-pointed by Sentinel
# (+fix-slave-config) once failover-timeout has passed. A reset restarts Sentinels that
# have run for half of it, so it never happens within a session.
FAILOVER_TIMEOUT_MS = 600000


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


class SentinelGroup:
    """``count`` Sentinels watching node a (proxy ``redis``) with replica node b (proxy ``replica``)."""

    def __init__(self, count: int, quorum: int, proxies: ProxyMap, links: dict[str, str]):
        self.count, self.quorum = count, quorum
        self.proxies, self.links = proxies, links
        self.master_name = MASTER_NAME
        self.procs: list[SentinelProcess] = []
        self.down_after_ms = DEFAULT_DOWN_AFTER_MS
        self.started = 0.0
        self._admins: dict[str, redis.Redis] = {}
        for i in range(1, count + 1):
            links[f"sentinel-{i}"] = f"{proxies.prefix}sentinel-{i}"

    # -- addresses -----------------------------------------------------------------------------
    def node_proxy(self, node_id: str) -> str:
        """The proxy every client and Sentinel reaches node ``a``/``b`` through."""
        return self.links["redis" if node_id == "a" else "replica"]

    def node_address(self, node_id: str) -> Endpoint:
        """The address node ``a``/``b`` announces: its proxy."""
        return self.proxies.endpoint(self.node_proxy(node_id))

    def node_at(self, address: Endpoint) -> str | None:
        """``a`` / ``b`` for an announced address, None for anything else."""
        return next((node_id for node_id in ("a", "b") if self.node_address(node_id) == address), None)

    def address(self, proc: SentinelProcess) -> Endpoint:
        return self.proxies.endpoint(self.links[proc.name])

    def addresses(self) -> tuple[str, ...]:
        """Where clients ask the Sentinels: their proxies."""
        return tuple(str(self.address(p)) for p in self.procs)

    def upstreams(self) -> dict[str, str]:
        """Each Sentinel's proxy -> the Sentinel."""
        return {self.links[p.name]: f"{HOST}:{p.port}" for p in self.procs}

    # -- processes -----------------------------------------------------------------------------
    def create(self, root: Path, cdir: ClusterDir | None, binary: str) -> list[SentinelProcess]:
        """The Sentinel processes (not launched) and their proxies."""
        self.procs = [SentinelProcess(f"sentinel-{i}", root / f"sentinel-{i}", cdir, binary)
                      for i in range(1, self.count + 1)]
        self.proxies.make(self.upstreams())
        return self.procs

    def config(self, proc: SentinelProcess) -> list[str]:
        me = self.address(proc)
        primary, replica = self.node_address("a"), self.node_address("b")
        name = self.master_name
        lines = ["bind 127.0.0.1", "daemonize no", f"dir {proc.workdir}",
                 f"logfile {proc.workdir / 'sentinel-server.log'}",
                 f"sentinel myid {proc.myid}", "sentinel resolve-hostnames no",
                 f"sentinel announce-ip {me.host}", f"sentinel announce-port {me.port}",
                 f"sentinel monitor {name} {primary.host} {primary.port} {self.quorum}",
                 f"sentinel down-after-milliseconds {name} {self.down_after_ms}",
                 f"sentinel failover-timeout {name} {FAILOVER_TIMEOUT_MS}",
                 f"sentinel parallel-syncs {name} 1",
                 f"sentinel known-replica {name} {replica.host} {replica.port}"]
        for other in self.procs:
            if other is not proc:
                peer = self.address(other)
                lines.append(f"sentinel known-sentinel {name} {peer.host} {peer.port} {other.myid}")
        return lines

    def launch(self) -> None:
        """Start every Sentinel on the original topology and wait until they agree on it."""
        for proc in self.procs:
            proc.config = self.config(proc)
        start_all(self.procs, READY_TIMEOUT_S)
        api = self.proxies.api
        for proc in self.procs:
            upstream = f"{HOST}:{proc.port}"
            if api.get_proxy(self.links[proc.name])["upstream"] != upstream:   # a port clash moved it
                api.update_proxy(self.links[proc.name], upstream=upstream)
            args = [x for kv in DEBUG_PERIODS_MS.items() for x in kv]
            self.admin(proc).execute_command("SENTINEL", "DEBUG", *args)
        self.wait()
        self.started = time.monotonic()

    def young(self) -> bool:
        """Started less than half a failover-timeout ago (see FAILOVER_TIMEOUT_MS)."""
        return time.monotonic() - self.started < FAILOVER_TIMEOUT_MS / 2000

    def stop(self) -> None:
        self.close_clients()
        for proc in self.procs:
            proc.stop()

    def close_clients(self) -> None:
        for client in self._admins.values():
            client.close()
        self._admins.clear()

    # -- what they say -------------------------------------------------------------------------
    def wait(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Until every Sentinel sees node a as primary, node b as its healthy replica, and
        enough peers to reach the quorum and elect a leader (SENTINEL CKQUORUM)."""
        deadline = time.monotonic() + timeout
        while True:
            last = self.problem()
            if not last:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"the Sentinels did not agree on the topology in {timeout:.0f} s: {last}; "
                                   f"log tails:\n{self.logs()}")
            time.sleep(0.005)

    def problem(self) -> str:
        """'' when every Sentinel sees the original topology healthy, else what is wrong."""
        primary, replica = self.node_address("a"), self.node_address("b")
        for proc in self.procs:
            if not proc.alive():
                return f"{proc.name} is not running"
            try:
                client = self.admin(proc)
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

    def admin(self, proc: SentinelProcess) -> redis.Redis:
        key = f"{proc.name}:{proc.port}"
        client = self._admins.get(key)
        if client is None:
            client = self._admins[key] = admin_client(proc.host, proc.port, timeout=0.5)
        return client

    def clients(self) -> list[redis.Redis]:
        """Direct (no proxy) admin clients to the live Sentinels: for faults and tests."""
        return [self.admin(p) for p in self.procs if p.alive()]

    def master(self) -> Endpoint | None:
        """The primary's address as the first answering Sentinel names it (None: none answers)."""
        for client in self.clients():
            try:
                host, port = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master_name)
                return Endpoint(host, int(port))
            except (redis.RedisError, TypeError, ValueError):
                continue
        return None

    def set_down_after(self, down_after_ms: int) -> int:
        """SENTINEL SET down-after-milliseconds on every Sentinel; how many took it."""
        self.down_after_ms = max(1, int(down_after_ms))
        answered = 0
        for client in self.clients():
            try:
                client.execute_command("SENTINEL", "SET", self.master_name, "down-after-milliseconds",
                                       self.down_after_ms)
                answered += 1
            except redis.RedisError:    # a stopped or cut Sentinel keeps its setting; the others act
                continue
        return answered

    def logs(self, lines: int = 30) -> str:
        return "\n".join(p.log_tail(lines) for p in self.procs)


def in_tilt(clients: list[redis.Redis]) -> list[int]:
    """The positions (0-based, in `clients`' order) of the Sentinels in TILT now (INFO sentinel
    ``sentinel_tilt``); one that does not answer is not counted."""
    out = []
    for i, client in enumerate(clients):
        try:
            if int(client.info("sentinel").get("sentinel_tilt", 0)):
                out.append(i)
        except (redis.RedisError, ValueError):
            continue
    return out


def _pairs(reply: Any) -> dict[str, str]:
    """A flat [k, v, k, v...] Sentinel reply (RESP2) -> dict."""
    if isinstance(reply, dict):
        return {str(k): str(v) for k, v in reply.items()}
    return {str(reply[i]): str(reply[i + 1]) for i in range(0, len(reply) - 1, 2)}
