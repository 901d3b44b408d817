"""Addresses: where a server or a proxy listens, and one worker process's own links."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Endpoint:
    """A TCP address; ``str()`` gives the ``host:port`` form the Toxiproxy API uses."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> "Endpoint":
        """``"127.0.0.1:6379"`` -> Endpoint; a clear ValueError for anything else."""
        host, sep, port = text.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"bad address {text!r}: expected HOST:PORT, e.g. 127.0.0.1:6379")
        return cls(host, int(port))


@dataclass(frozen=True)
class WorkerLinks:
    """One worker process's own proxies to each server, so a fault can hit just its links."""

    name: str
    redis_url: str
    replica_url: str
    pg_dsn: str
    proxies: dict[str, str] = field(default_factory=dict)
    sentinels: tuple[str, ...] = ()    # "host:port" of each Sentinel's proxy (sentinel topology only)
    master_name: str = ""              # the name the Sentinels monitor the primary under


def redis_url(endpoint: Endpoint, db: int = 0) -> str:
    return f"redis://{endpoint}/{db}"


def pg_dsn(endpoint: Endpoint, dbname: str = "chaos", user: str = "postgres") -> str:
    return f"postgresql://{user}@{endpoint}/{dbname}"
