"""pytest option `--chaos-server redis|valkey`: the Redis-protocol server the topology runs.

Listed in chaos/pytest_plugin/__init__.py's ``pytest_plugins``. The choice is exported as $CHAOS_SERVER in
``pytest_configure``, before pytest-xdist starts its workers, so every worker (and every
process a test starts) runs the same server; see chaos/cluster/servers.py.
"""
from __future__ import annotations

import os

import pytest

from chaos.pytest_plugin import settings

SERVERS = ("redis", "valkey")     # chaos.cluster.servers.SERVERS (checked there)
ENV = "CHAOS_SERVER"              # chaos.cluster.servers.ENV


def pytest_addoption(parser: pytest.Parser) -> None:
    settings.add(parser, "--chaos-server", metavar="NAME",
                 help=f"Redis-protocol server: {' | '.join(SERVERS)} "
                      f"(default: ${ENV}, else $CHAOS_REDIS_SERVER or redis-server on PATH)")


def pytest_configure(config: pytest.Config) -> None:
    chosen = settings.value(config, "chaos_server")
    if not chosen and not os.environ.get(ENV):
        return    # nothing to check or export
    from chaos.cluster.servers import UnknownServer, use_server
    try:
        use_server(chosen)
    except UnknownServer as exc:
        raise pytest.UsageError(str(exc)) from None
