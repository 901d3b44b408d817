"""Finding the server binaries, with an error that says how to install a missing one.

Env overrides let a user run Valkey, a newer Redis or another PostgreSQL:
``CHAOS_REDIS_SERVER`` (a binary path or name) and ``CHAOS_PG_BIN`` (a bin dir).
"""
from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

from chaos.cluster.errors import MissingBinary

REDIS_INSTALL = "apt-get install -y redis-server"
PG_INSTALL = "apt-get install -y postgresql"
TOXIPROXY_INSTALL = ("download toxiproxy-server from https://github.com/Shopify/toxiproxy/releases "
                     "or unset CHAOS_PROXY_SERVER to use the embedded proxy")


def redis_server() -> str:
    """The redis-server binary: $CHAOS_REDIS_SERVER, else `redis-server` on PATH."""
    wanted = os.environ.get("CHAOS_REDIS_SERVER")
    found = shutil.which(wanted or "redis-server")
    if found:
        return found
    if wanted:
        raise MissingBinary(f"CHAOS_REDIS_SERVER={wanted!r} is not an executable: "
                            f"point it at a redis-server (or valkey-server) binary, or unset it")
    raise MissingBinary(f"redis-server not found on PATH: install it with `{REDIS_INSTALL}` "
                        f"or set CHAOS_REDIS_SERVER to its path")


def pg_bin_dir() -> Path:
    """A dir holding `initdb` and `postgres`: $CHAOS_PG_BIN, PATH, or the newest Debian one."""
    wanted = os.environ.get("CHAOS_PG_BIN")
    if wanted:
        path = Path(wanted)
        if not _has_pg(path):
            raise MissingBinary(f"CHAOS_PG_BIN={wanted!r} holds no executable initdb and postgres: "
                                f"point it at a PostgreSQL bin dir (e.g. /usr/lib/postgresql/15/bin) or unset it")
        return path
    on_path = shutil.which("initdb")
    if on_path and _has_pg(Path(on_path).resolve().parent):
        return Path(on_path).resolve().parent
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_major, reverse=True)
    for candidate in map(Path, debian):
        if _has_pg(candidate):
            return candidate
    raise MissingBinary(f"PostgreSQL initdb/postgres not found (looked at CHAOS_PG_BIN, PATH and "
                        f"/usr/lib/postgresql/*/bin): install it with `{PG_INSTALL}` or set CHAOS_PG_BIN")


def toxiproxy_server(name: str = "toxiproxy-server") -> str:
    found = shutil.which(name)
    if not found:
        raise MissingBinary(f"{name} not found on PATH: {TOXIPROXY_INSTALL}")
    return found


def _has_pg(path: Path) -> bool:
    return all(os.access(path / exe, os.X_OK) for exe in ("initdb", "postgres"))


def _major(path: str) -> int:
    part = Path(path).parent.name
    return int(part) if part.isdigit() else 0
