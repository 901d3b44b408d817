"""pytest option `--chaos-topology replica|sentinel[:k=v,...]`: the topology every suite runs on.

Listed in chaos/pytest_plugin/__init__.py's ``pytest_plugins``. The choice is exported as $CHAOS_TOPOLOGY in
``pytest_configure``, before pytest-xdist starts its workers, so every worker's cluster
(``start_cluster``) is the same topology; see chaos/cluster/sentinel.py. suites/sentinel
starts its own sentinel topology whatever this says.
"""
from __future__ import annotations

import os

import pytest

from chaos.pytest_plugin import settings

TOPOLOGIES = ("replica", "sentinel")   # chaos.cluster.sentinel.TOPOLOGIES (checked there)
ENV = "CHAOS_TOPOLOGY"                 # chaos.cluster.sentinel.ENV


def pytest_addoption(parser: pytest.Parser) -> None:
    settings.add(parser, "--chaos-topology", metavar="NAME",
                 help=f"topology: {' | '.join(TOPOLOGIES)}, e.g. sentinel:quorum=2 "
                      f"(default: ${ENV}, else replica)")


@pytest.hookimpl(trylast=True)     # after --chaos-server exported its choice: the Sentinel binary follows it
def pytest_configure(config: pytest.Config) -> None:
    chosen = settings.value(config, "chaos_topology")
    if not chosen and not os.environ.get(ENV):
        return    # the replica topology: nothing to check or export
    from chaos.cluster.errors import ClusterError
    from chaos.cluster.sentinel import use_topology
    try:
        use_topology(chosen)
    except ClusterError as exc:
        raise pytest.UsageError(str(exc)) from None
