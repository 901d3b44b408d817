"""pytest option `--chaos-server redis|valkey`: the Redis-protocol server the topology runs.

Listed in chaos/plugin.py's ``pytest_plugins``. The choice is exported as $CHAOS_SERVER in
``pytest_configure``, before pytest-xdist starts its workers, so every worker (and every
process a test starts) runs the same server; see chaos/cluster/servers.py.
"""
from __future__ import annotations

import os

import pytest

from chaos.cluster.servers import ENV, SERVERS, UnknownServer, use_server


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos")
    group.addoption("--chaos-server", default=None, metavar="NAME",
                    help=f"Redis-protocol server: {' | '.join(SERVERS)} "
                         f"(default: ${ENV}, else $CHAOS_REDIS_SERVER or redis-server on PATH)")


def pytest_configure(config: pytest.Config) -> None:
    try:
        use_server(config.getoption("chaos_server"))
    except UnknownServer as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_report_header(config: pytest.Config) -> str:
    return f"chaos: server={os.environ.get(ENV) or 'default (CHAOS_REDIS_SERVER or redis-server)'}"
