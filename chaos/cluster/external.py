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
"""
from __future__ import annotations

import os

from chaos.cluster.endpoint import Endpoint
from chaos.cluster.errors import ClusterError
from chaos.cluster.rundirs import new_cluster_dir
from chaos.cluster.topology import Cluster, RedisNode
from chaos.proxy.client import ToxiproxyClient

VARIABLES = {"CHAOS_REDIS_PRIMARY": "10.0.0.5:6379", "CHAOS_REDIS_REPLICA": "10.0.0.6:6379",
             "CHAOS_POSTGRES": "10.0.0.7:5432", "TOXIPROXY_URL": "http://10.0.0.8:8474"}


def read_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The external endpoints, or a ClusterError naming every missing or bad variable."""
    env = dict(os.environ if env is None else env)
    missing = [f"{name} (e.g. {example})" for name, example in VARIABLES.items() if not env.get(name)]
    if missing:
        raise ClusterError(f"the external backend needs {', '.join(missing)}")
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


class ExternalCluster(Cluster):
    backend = "external"

    @classmethod
    def start(cls, name: str, **_options) -> "ExternalCluster":
        env = read_environment()
        api = ToxiproxyClient(env["TOXIPROXY_URL"])
        api.version()
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

    def _close_servers(self) -> None:
        for proxy in self._own_proxies():
            self.api.delete_proxy(proxy)
