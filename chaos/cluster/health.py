"""Is the rig sound? The framework's own parts, and what is wrong with each.

A verdict is only worth something if the servers and proxies that produced it were alive
and reachable for the whole run (or taken down by a configured fault). ``Cluster.components()``
lists them: for a backend whose processes are ours (native, sentinel) a check costs a
``poll()`` and a read of ``/proc/<pid>/stat`` (died? stopped by SIGSTOP?); a network probe
(PING, ``SELECT 1``, the proxy API's version) runs only when asked (``deep``), since a
SIGSTOPped server still accepts TCP connections and only the process state says so. For a
backend whose servers are someone else's (compose, external) the probe is the only check
(skipped by a frequent check with ``remote=False``).

A probe that fails while our process is alive and running (not stopped, not dead) is not named
at once: on a loaded machine a starved but healthy server can miss a probe's timeout (a
PostgreSQL at load 12 did not accept a connection within 1 + 3 s). Such a server is named only
once its probes have gone unanswered for SLOW_PATIENCE_S in a row; a death or a SIGSTOP is named
at the next check, whatever the probe says.

``rig_problems`` turns that into the strings the orchestrator hands the checker: each
starts with the component's name and carries its log tail, and a healthy component is
never named.
"""
from __future__ import annotations

import signal
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol

KINDS = ("proxy", "postgres", "redis", "sentinel")
PROBE_TIMEOUT_S = 1.0
SLOW_PATIENCE_S = 15.0     # a live, running server of ours may miss its probes this long before it is named
LOG_LINES = 20
NO_LOG = "(no log: this server was not started by the rig)"


@dataclass
class Component:
    """One server or proxy a run stands on; ``problem()`` says what is wrong ('' when healthy)."""

    name: str                       # "proxy server", "PostgreSQL", "Redis node a (primary)", "Sentinel 2"
    kind: str                       # proxy | postgres | redis | sentinel
    pid: int | None = None
    address: str = ""
    server: Any = field(default=None, repr=False, compare=False)     # the LocalServer, when it is ours
    probe: Callable[[float], None] | None = field(default=None, repr=False, compare=False)  # raises if unreachable

    def problem(self, deep: bool = False, timeout: float = PROBE_TIMEOUT_S, remote: bool = True) -> str:
        """'' when healthy, else e.g. ``died: killed by SIGKILL``, ``stopped (SIGSTOP): state T``
        or ``unreachable at 127.0.0.1:5432: OperationalError: ...``. Our own processes are
        checked by pid, and probed over the network too when ``deep``; a server that is not ours
        is always probed, unless ``remote`` is False (a frequent check that must stay cheap)."""
        if self.server is not None:
            found = process_problem(self.server)
            if found or not deep:
                return found
        elif not (remote or deep):
            return ""
        if self.probe is None:
            return ""
        try:
            self.probe(timeout)
        except Exception as exc:  # noqa: BLE001 - any failure to answer is the finding
            where = f" at {self.address}" if self.address else ""
            finding = f"unreachable{where}: {type(exc).__name__}: {str(exc).strip()[:300]}"
            if self.server is None:
                return finding      # not ours: the probe is all there is to go by
            found = process_problem(self.server)      # it may have died or stopped meanwhile
            if found:
                return found
            unanswered = _unanswered_for(self.server)
            if unanswered < SLOW_PATIENCE_S:
                return ""           # alive and running: slow under load until it stays silent this long
            return f"{finding} (alive and running, its probes unanswered for {unanswered:.1f} s)"
        _answered(self.server)
        return ""

    def log_tail(self, lines: int = LOG_LINES) -> str:
        if self.server is None:
            return NO_LOG
        return self.server.log_tail(lines)

    def matches(self, names: Iterable[str]) -> bool:
        """Whether ``names`` (kinds or component names) include this component."""
        names = set(names)
        return self.kind in names or self.name in names

    def label(self) -> str:
        pid = self.server.pid if self.server is not None else self.pid
        return f"{self.name} (pid {pid})" if pid else self.name


def describe_exit(code: int | None) -> str:
    """`exit code 3`, `killed by SIGKILL`, or `running` (the one description of a process's end:
    servers here, workers through chaos.workload.procutil)."""
    if code is None:
        return "running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def process_state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` (R, S, D, T, t, Z...), '' when gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def process_problem(server: Any) -> str:
    """What is wrong with a server process of ours: never started, died, or stopped."""
    proc = getattr(server, "proc", None)
    if proc is None:
        return "not running: never started"
    code = proc.poll()
    if code is not None:
        return f"died: {describe_exit(code)}"
    state = process_state(proc.pid)
    if state in ("T", "t"):
        return f"stopped (SIGSTOP): state {state}"
    if state == "Z":      # exited; another thread holds the reaping lock: wait for the code
        try:
            code = proc.wait(0.5)
        except Exception:  # noqa: BLE001 - still not reaped: say what is known
            return "died: exited (not reaped yet)"
        return f"died: {describe_exit(code)}"
    return ""


def _unanswered_for(server: Any) -> float:
    """Seconds since this server process's first probe in the current run of unanswered ones
    (0.0 at the first); kept on the server object, per pid (a restarted server starts over)."""
    now = time.monotonic()
    pid = getattr(getattr(server, "proc", None), "pid", None)
    since = getattr(server, "_unanswered_since", None)
    if since is None or since[0] != pid:
        since = (pid, now)
        try:
            server._unanswered_since = since
        except AttributeError:      # an object without a __dict__: no patience for it
            return SLOW_PATIENCE_S
    return now - since[1]


def _answered(server: Any) -> None:
    if server is not None and getattr(server, "_unanswered_since", None) is not None:
        server._unanswered_since = None


class Topology(Protocol):
    """What the health checks read of a topology (chaos.cluster.topology.Cluster and its
    backends, which import this module): its components, and for the backends' lists its
    proxy API, its PostgreSQL endpoint and its two Redis nodes (chaos.cluster.redispair.RedisPair)."""

    api: Any
    postgres: Any
    nodes: Any

    def components(self) -> list[Component]: ...


def rig_problems(cluster: Topology, spared: Iterable[str] = (), *, deep: bool = False,
                 timeout: float = PROBE_TIMEOUT_S, remote: bool = True) -> list[str]:
    """One string per component that is not sound and not ``spared`` (kinds or names a configured
    fault may take down): ``"<name> (pid N) <problem>; log tail:\\n<tail>"``. ``deep`` adds the
    network probes of our processes (``timeout`` each); ``remote=False`` skips the probes of
    servers that are not ours (see Component.problem)."""
    spared = set(spared)
    out = []
    for component in cluster.components():
        if component.matches(spared):
            continue
        found = component.problem(deep=deep, timeout=timeout, remote=remote)
        if found:
            out.append(f"{component.label()} {found}; log tail:\n{component.log_tail()}")
    return out


# -- probes --------------------------------------------------------------------------------
def redis_probe(host: str, port: int) -> Callable[[float], None]:
    def probe(timeout: float) -> None:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(b"PING\r\n")
            reply = sock.recv(64)
            if not reply.startswith(b"+PONG"):
                raise ConnectionError(f"PING answered {reply[:60]!r}")
    return probe


def postgres_probe(host: str, port: int) -> Callable[[float], None]:
    def probe(timeout: float) -> None:
        import psycopg
        with psycopg.connect(host=host, port=port, dbname="postgres", user="postgres", autocommit=True,
                             connect_timeout=max(1, round(timeout))) as conn:
            conn.execute("SET statement_timeout = %s" % int(timeout * 1000))
            conn.execute("SELECT 1")
    return probe


def proxy_probe(url: str) -> Callable[[float], None]:
    def probe(timeout: float) -> None:
        from chaos.proxy.client import ToxiproxyClient
        client = ToxiproxyClient(url, timeout=timeout)
        try:
            client.version()
        finally:
            client.close()
    return probe


def tcp_probe(host: str, port: int) -> Callable[[float], None]:
    """A bare TCP connect: for an endpoint whose protocol is not known here."""
    def probe(timeout: float) -> None:
        socket.create_connection((host, port), timeout=timeout).close()
    return probe


# -- the backends' lists ---------------------------------------------------------------------
def node_name(node_id: str, primary_id: str) -> str:
    return f"Redis node {node_id} ({'primary' if node_id == primary_id else 'replica'})"


def endpoint_components(cluster: Topology) -> list[Component]:
    """Servers that are not our processes (compose, external): probed over the network."""
    primary_id = cluster.nodes.primary.id
    out = [Component("proxy server", "proxy", address=cluster.api.url, probe=proxy_probe(cluster.api.url))]
    pg = cluster.postgres
    out.append(Component("PostgreSQL", "postgres", address=str(pg), probe=postgres_probe(pg.host, pg.port)))
    for node in (cluster.nodes.a, cluster.nodes.b):
        ep = node.endpoint
        out.append(Component(node_name(node.id, primary_id), "redis", address=str(ep),
                             probe=redis_probe(ep.host, ep.port)))
    return out


def process_components(cluster: Topology, processes: dict[str, Any]) -> list[Component]:
    """A native topology's servers from its processes dict (proxy, a, b, postgres, sentinel-N);
    a shared proxy server (TOXIPROXY_URL) is probed over the network."""
    primary_id = cluster.nodes.primary.id
    out = []
    proxy = processes.get("proxy")
    if proxy is not None:
        out.append(Component("proxy server", "proxy", proxy.pid, cluster.api.url, server=proxy,
                             probe=proxy_probe(cluster.api.url)))
    else:
        out.append(Component("proxy server", "proxy", address=cluster.api.url, probe=proxy_probe(cluster.api.url)))
    for key, server in processes.items():
        if key == "proxy":
            continue
        address = f"{server.host}:{server.port}"
        if key == "postgres":
            out.append(Component("PostgreSQL", "postgres", server.pid, address, server=server,
                                 probe=postgres_probe(server.host, server.port)))
        elif key in ("a", "b"):
            out.append(Component(node_name(key, primary_id), "redis", server.pid, address, server=server,
                                 probe=redis_probe(server.host, server.port)))
        elif key.startswith("sentinel-"):
            out.append(Component(f"Sentinel {key.split('-', 1)[1]}", "sentinel", server.pid, address,
                                 server=server, probe=redis_probe(server.host, server.port)))
        else:
            out.append(Component(key, getattr(server, "kind", "server"), server.pid, address, server=server,
                                 probe=tcp_probe(server.host, server.port)))
    return out
