"""The topology: Redis primary + replica and PostgreSQL behind Toxiproxy-API proxies.

``start_cluster(backend, name, topology=, server=)`` is the one entry point; see docs/cluster.md.
``configured`` is where the backend configuration is read from the environment
($CHAOS_BACKEND, $CHAOS_TOPOLOGY, $CHAOS_SERVER) for what the edge (the CLI's options, the
plugin's) did not name; below it the backend, topology and server are passed as objects and
a cluster knows its own (``cluster.backend``, ``cluster.topology_text``, ``cluster.server``).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chaos.cluster.endpoint import Endpoint, WorkerLinks
from chaos.cluster.errors import (ClusterError, EngineUnreachable, MissingBinary, PortInUse, ServerStartError,
                                  UnknownBackend, Unsupported)

if TYPE_CHECKING:
    from chaos.cluster.topology import Cluster

BACKENDS = ("native", "compose", "external")
DEFAULT_BACKEND = "native"
BACKEND_ENV, TOPOLOGY_ENV, SERVER_ENV = "CHAOS_BACKEND", "CHAOS_TOPOLOGY", "CHAOS_SERVER"

__all__ = ["BACKENDS", "Cluster", "ClusterError", "Endpoint", "EngineUnreachable", "MissingBinary", "PortInUse",
           "ServerStartError", "UnknownBackend", "Unsupported", "WorkerLinks", "check_backend", "configured",
           "Configured", "start_cluster"]


def __getattr__(name: str):
    # Lazy: the proxy server process runs `python -m chaos.proxy` and must not pay
    # for importing redis and psycopg (0.3 s) just to start.
    if name == "Cluster":
        from chaos.cluster.topology import Cluster
        return Cluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Configured:
    """Where cells run: the backend, the topology as `--topology` writes it, the server named (or None)."""

    backend: str
    topology: str
    server: str | None


def configured(backend: str | None = None, topology: str | None = None, server: str | None = None,
               environ: Mapping[str, str] | None = None) -> Configured:
    """The edge's reading of the backend configuration: each value given, else its variable
    ($CHAOS_BACKEND, $CHAOS_TOPOLOGY, $CHAOS_SERVER), else the default; each checked, before
    anything starts (an unknown name lists the valid ones; a sentinel topology without a
    Sentinel-capable binary is refused). The one reader of those variables."""
    from chaos.cluster.sentinel import check_topology
    from chaos.cluster.servers import check_server
    env = os.environ if environ is None else environ
    chosen_server = check_server(server or env.get(SERVER_ENV) or None, "" if server else f"${SERVER_ENV}")
    return Configured(check_backend(backend, env), check_topology(topology or env.get(TOPOLOGY_ENV) or None,
                                                                   chosen_server), chosen_server)


def check_backend(name: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The backend to use: ``name``, else $CHAOS_BACKEND, else native; unknown names list the valid ones."""
    chosen = name or (os.environ if environ is None else environ).get(BACKEND_ENV) or DEFAULT_BACKEND
    if chosen not in BACKENDS:
        raise UnknownBackend(f"unknown backend {chosen!r}: choose one of {', '.join(BACKENDS)} "
                             f"(--backend, --chaos-backend or CHAOS_BACKEND)")
    return chosen


def start_cluster(backend: str | None, name: str, *, topology: str | None = None, server: str | None = None,
                  **options) -> "Cluster":
    """Start (or, for external, connect to) a topology named ``name`` (unique per run and worker).

    ``topology=`` picks the replica or the sentinel topology (`sentinel:quorum=2`), ``server=``
    the Redis-protocol server (`redis`, `valkey`); what is not given comes from `configured`
    (the environment, else the defaults). The cluster keeps them: ``cluster.topology_text``,
    ``cluster.server``."""
    where = configured(backend, topology, server)
    from chaos.cluster.sentinel import parse_topology
    shape, spec = parse_topology(where.topology)
    cluster = _start(where.backend, name, shape, spec, server=where.server, **options)
    cluster.server = where.server
    return cluster


def _start(backend: str, name: str, shape: str, spec, **options) -> "Cluster":
    if shape == "sentinel":     # production's failover: Sentinels behind the proxy (chaos/cluster/sentinel.py)
        if backend != "native":
            raise Unsupported(f"the sentinel topology runs on the native backend only (asked: {backend}); "
                              f"drop --backend {backend} or pick --topology replica")
        from chaos.cluster.sentinel import SentinelCluster
        return SentinelCluster.start(name, spec=spec, **options)
    if backend == "native":
        from chaos.cluster.native import NativeCluster
        return NativeCluster.start(name, **options)
    if backend == "compose":
        from chaos.cluster.compose import ComposeCluster
        return ComposeCluster.start(name, **options)
    from chaos.cluster.external import ExternalCluster
    return ExternalCluster.start(name, **options)
