"""pytest option `--chaos-topology replica|sentinel[:k=v,...]`: the topology every suite runs on.

Listed in chaos/plugin.py's ``pytest_plugins``. The choice is exported as $CHAOS_TOPOLOGY in
``pytest_configure``, before pytest-xdist starts its workers, so every worker's cluster
(``start_cluster``) is the same topology; see chaos/cluster/sentinel.py. suites/sentinel
starts its own sentinel topology whatever this says.
"""
from __future__ import annotations

import os

import pytest

from chaos.cluster.errors import ClusterError
from chaos.cluster.sentinel import ENV, TOPOLOGIES, use_topology


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos")
    group.addoption("--chaos-topology", default=None, metavar="NAME",
                    help=f"topology: {' | '.join(TOPOLOGIES)}, e.g. sentinel:quorum=2 "
                         f"(default: ${ENV}, else replica)")


@pytest.hookimpl(trylast=True)     # after --chaos-server exported its choice: the Sentinel binary follows it
def pytest_configure(config: pytest.Config) -> None:
    try:
        use_topology(config.getoption("chaos_topology"))
    except ClusterError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_report_header(config: pytest.Config) -> str:
    return f"chaos: topology={os.environ.get(ENV) or 'replica'}"
