"""The topology: Redis primary + replica and PostgreSQL behind Toxiproxy-API proxies.

``start_cluster(backend, name)`` is the one entry point; see docs/cluster.md.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from chaos.cluster.endpoint import Endpoint, WorkerLinks
from chaos.cluster.errors import (ClusterError, EngineUnreachable, MissingBinary, PortInUse, ServerStartError,
                                  UnknownBackend, Unsupported)

if TYPE_CHECKING:
    from chaos.cluster.topology import Cluster

BACKENDS = ("native", "compose", "external")
DEFAULT_BACKEND = "native"

__all__ = ["BACKENDS", "Cluster", "ClusterError", "Endpoint", "EngineUnreachable", "MissingBinary", "PortInUse",
           "ServerStartError", "UnknownBackend", "Unsupported", "WorkerLinks", "check_backend", "start_cluster"]


def __getattr__(name: str):
    # Lazy: the proxy server process runs `python -m chaos.proxy` and must not pay
    # for importing redis and psycopg (0.3 s) just to start.
    if name == "Cluster":
        from chaos.cluster.topology import Cluster
        return Cluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_backend(name: str | None) -> str:
    """The backend to use: ``name``, else $CHAOS_BACKEND, else native; unknown names list the valid ones."""
    chosen = name or os.environ.get("CHAOS_BACKEND") or DEFAULT_BACKEND
    if chosen not in BACKENDS:
        raise UnknownBackend(f"unknown backend {chosen!r}: choose one of {', '.join(BACKENDS)} "
                             f"(--backend, --chaos-backend or CHAOS_BACKEND)")
    return chosen


def start_cluster(backend: str | None, name: str, **options) -> "Cluster":
    """Start (or, for external, connect to) a topology named ``name`` (unique per run and worker).

    ``topology=`` (else $CHAOS_TOPOLOGY, else replica) picks the replica or the sentinel topology."""
    chosen = check_backend(backend)
    from chaos.cluster.sentinel import check_topology, parse_topology
    topology, spec = parse_topology(check_topology(options.pop("topology", None)))
    if topology == "sentinel":     # production's failover: Sentinels behind the proxy (chaos/cluster/sentinel.py)
        if chosen != "native":
            raise Unsupported(f"the sentinel topology runs on the native backend only (asked: {chosen}); "
                              f"drop --backend {chosen} or pick --topology replica")
        from chaos.cluster.sentinel import SentinelCluster
        return SentinelCluster.start(name, spec=spec, **options)
    if chosen == "native":
        from chaos.cluster.native import NativeCluster
        return NativeCluster.start(name, **options)
    if chosen == "compose":
        from chaos.cluster.compose import ComposeCluster
        return ComposeCluster.start(name, **options)
    from chaos.cluster.external import ExternalCluster
    return ExternalCluster.start(name, **options)
