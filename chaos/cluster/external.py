"""The external backend: a staging topology given by environment variables.

    CHAOS_REDIS_PRIMARY=10.0.0.5:6379  CHAOS_REDIS_REPLICA=10.0.0.6:6379  CHAOS_POSTGRES=10.0.0.7:5432
    TOXIPROXY_URL=http://10.0.0.8:8474  CHAOS_EXTERNAL_WIPE=yes

Nothing is started: proxies are made in that Toxiproxy (names prefixed with the cluster
name, so several workers can share it) and the replica is pointed at the replication
proxy, which it must be able to reach (``CHAOS_PROXY_HOST``: the proxy server's address
as the Redis servers see it, default the TOXIPROXY_URL host). Every reset FLUSHALLs both
Redis servers and drops database ``chaos``: ``CHAOS_EXTERNAL_WIPE=yes`` says that is fine.
Killing or restarting a server is not possible here (Unsupported), and there is one
topology, so it runs without xdist parallelism.

Before anything is made, every endpoint must answer a short probe (TCP connect + PING,
``SELECT 1``, the API's version): one that does not is bad configuration, a ClusterError
naming its variable. During a run the same probes are the components' health checks
(``components()``), so an endpoint that vanishes mid-run makes the verdict unknown.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from chaos.cluster.endpoint import Endpoint
from chaos.cluster.errors import ClusterError, one_line
from chaos.cluster.rundirs import new_cluster_dir
from chaos.cluster.topology import Cluster, RedisNode
from chaos.proxy.client import ToxiproxyClient, ToxiproxyError

PROBE_TIMEOUT_S = 2.0
if TYPE_CHECKING:
    from chaos.cluster.health import Component

VARIABLES = {"CHAOS_REDIS_PRIMARY": "10.0.0.5:6379", "CHAOS_REDIS_REPLICA": "10.0.0.6:6379",
             "CHAOS_POSTGRES": "10.0.0.7:5432", "TOXIPROXY_URL": "http://10.0.0.8:8474"}


def read_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The external endpoints, or a ClusterError naming every missing or bad variable."""
    env = dict(os.environ if env is None else env)
    missing = [f"{name} (e.g. {example})" for name, example in VARIABLES.items() if not env.get(name)]
    if missing:
        raise ClusterError(f"the external backend needs {', '.join(missing)}: set them to your servers' "
                           "addresses, or use the native backend")
    for name in ("CHAOS_REDIS_PRIMARY", "CHAOS_REDIS_REPLICA", "CHAOS_POSTGRES"):
        try:
            Endpoint.parse(env[name])
        except ValueError as exc:
            raise ClusterError(f"{name}: {exc}") from None
    if int(env.get("PYTEST_XDIST_WORKER_COUNT") or 1) > 1:
        raise ClusterError("the external backend has one Redis pair and one database 'chaos', which parallel "
                           "xdist workers would wipe under each other: run it with -n 0 (or -n 1)")
    if env.get("CHAOS_EXTERNAL_WIPE") != "yes":
        raise ClusterError("the external backend FLUSHALLs both Redis servers and drops database 'chaos' at "
                           "every reset: set CHAOS_EXTERNAL_WIPE=yes to confirm the cluster is yours to wipe")
    return env


def check_endpoints(env: dict[str, str], timeout: float = PROBE_TIMEOUT_S) -> None:
    """Every endpoint answers, or a ClusterError naming the variable, what it found and the fix."""
    import psycopg
    import redis

    from chaos.cluster.redis_server import admin_client

    api = ToxiproxyClient(env["TOXIPROXY_URL"], timeout=timeout)
    try:
        api.version()
    except ToxiproxyError as exc:
        raise ClusterError(f"TOXIPROXY_URL={env['TOXIPROXY_URL']}: no Toxiproxy API answers ({exc.message}); start "
                           "toxiproxy-server or `python -m chaos proxy serve` there, or fix the variable") from None
    finally:
        api.close()
    for name, what in (("CHAOS_REDIS_PRIMARY", "Redis primary"), ("CHAOS_REDIS_REPLICA", "Redis replica")):
        endpoint = Endpoint.parse(env[name])
        try:
            with admin_client(endpoint.host, endpoint.port, timeout=timeout) as client:
                client.ping()
        except redis.RedisError as exc:
            raise ClusterError(f"{name}={env[name]}: the {what} does not answer PING ({exc}); start it there, "
                               "or fix the variable") from None
    endpoint = Endpoint.parse(env["CHAOS_POSTGRES"])
    try:
        psycopg.connect(host=endpoint.host, port=endpoint.port, dbname="postgres", user="postgres",
                        connect_timeout=max(1, round(timeout))).close()
    except psycopg.Error as exc:
        raise ClusterError(f"CHAOS_POSTGRES={env['CHAOS_POSTGRES']}: PostgreSQL does not accept a connection as user "
                           f"postgres ({one_line(str(exc))}); start it there, or fix the variable") from None


class ExternalCluster(Cluster):
    backend = "external"

    @classmethod
    def start(cls, name: str, **_options) -> "ExternalCluster":
        env = read_environment()
        check_endpoints(env)        # bad configuration is refused before anything is made
        api = ToxiproxyClient(env["TOXIPROXY_URL"])
        primary, replica, postgres = (Endpoint.parse(env[v]) for v in
                                      ("CHAOS_REDIS_PRIMARY", "CHAOS_REDIS_REPLICA", "CHAOS_POSTGRES"))
        cdir = new_cluster_dir(name)
        nodes = (RedisNode("a", primary, str(primary)), RedisNode("b", replica, str(replica)))
        cluster = cls(name, cdir.path, api, nodes, postgres, str(postgres), proxy_prefix=f"{name}.",
                      listen_host=env.get("CHAOS_PROXY_HOST") or api.host)
        try:
            cluster._create_links()
        except BaseException:
            cluster.close()
            raise
        return cluster

    def components(self) -> list["Component"]:
        """The endpoints, probed over the network (TCP connect + PING, a connection, the API's
        version), each named with the variable that gave it: none of them is our process."""
        from chaos.cluster.health import endpoint_components

        variables = {"proxy": "TOXIPROXY_URL", "postgres": "CHAOS_POSTGRES"}
        nodes = {str(self.nodes.a.endpoint): "CHAOS_REDIS_PRIMARY", str(self.nodes.b.endpoint): "CHAOS_REDIS_REPLICA"}
        out = endpoint_components(self)
        for component in out:
            variable = variables.get(component.kind) or nodes.get(component.address)
            component.name = f"{component.name} [{variable}]" if variable else component.name
        return out

    def _close_servers(self) -> None:
        try:
            self.proxies.delete_own()
        except ToxiproxyError as exc:
            if exc.status != 0:
                raise
            # the proxy server is gone, and our proxies with it: nothing is left to remove
